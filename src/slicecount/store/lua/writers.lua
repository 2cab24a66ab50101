-- Forget writers of one shard that have not written since ARGV[1] (epoch seconds): their
-- processes are gone (a writer id is new in every process), and a batch of theirs in doubt
-- for that long is past help. The client listed them a moment ago; each one's score is read
-- again here, atomic beside the writers' own transactions, so a writer that wrote meanwhile
-- (its MULTI sets its key and its score together) is kept. Its mark (blocks layout: the
-- oldest second it may still send) goes with it.
-- KEYS[1]      the shard's writers ZSET (member: writer id, score: time of its last write)
-- KEYS[2]      the shard's marks ZSET (member: writer id, score: its mark)
-- KEYS[2 + i]  the key of writer ARGV[1 + i] (keys.py: writer)
-- Returns how many writers were forgotten.
local quiet, forgotten = tonumber(ARGV[1]), 0
for i = 3, #KEYS do
  local writer = ARGV[i - 1]
  local score = redis.call('ZSCORE', KEYS[1], writer)
  if score and tonumber(score) < quiet then
    redis.call('DEL', KEYS[i])
    redis.call('ZREM', KEYS[2], writer)
    forgotten = forgotten + redis.call('ZREM', KEYS[1], writer)
  end
end
return forgotten
