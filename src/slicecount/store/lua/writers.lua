-- Forget writers of one shard that have not written since ARGV[1] (epoch seconds): their
-- processes are gone (a writer id is new in every process), and a batch of theirs in doubt
-- for that long is past help. The client listed them a moment ago; each one's score is read
-- again here, atomic beside the writers' own transactions, so a writer that wrote meanwhile
-- (its MULTI sets its key and its score together) is kept.
-- KEYS[1]      the shard's writers ZSET (member: writer id, score: time of its last write)
-- KEYS[1 + i]  the key of writer ARGV[1 + i] (keys.py: writer)
-- Returns how many writers were forgotten.
local quiet, forgotten = tonumber(ARGV[1]), 0
for i = 2, #KEYS do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if score and tonumber(score) < quiet then
    redis.call('DEL', KEYS[i])
    forgotten = forgotten + redis.call('ZREM', KEYS[1], ARGV[i])
  end
end
return forgotten
