-- Forget the writers of one shard that have not written since ARGV[1] (epoch seconds): their
-- processes are gone (a writer id is new in every process), and a batch of theirs in doubt
-- for that long is past help. Atomic, so a writer that writes meanwhile is never forgotten.
-- KEYS[1]  the shard's writers HASH (field: writer id, value: "number refused time")
-- Returns how many writers were forgotten.
local before, forgotten = tonumber(ARGV[1]), 0
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local written = tonumber(string.match(all[i + 1], ' (%d+)$'))
  if written == nil or written < before then
    redis.call('HDEL', KEYS[1], all[i])
    forgotten = forgotten + 1
  end
end
return forgotten
