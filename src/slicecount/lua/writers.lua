-- Forget the writers of one shard that have not written since ARGV[1] (epoch seconds): their
-- processes are gone (a writer id is new in every process), and a batch of theirs in doubt
-- for that long is past help. Atomic beside the writers' own transactions.
-- KEYS[1]  the shard's writers ZSET (member: writer id, score: time of its last write)
-- ARGV[1]  quiet since       ARGV[2]  the prefix of a writer's key (keys.py: writer)
-- Returns how many writers were forgotten.
local quiet = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1], 'LIMIT', 0, 1000)
for _, writer in ipairs(quiet) do
  redis.call('DEL', ARGV[2] .. writer)
  redis.call('ZREM', KEYS[1], writer)
end
return #quiet
