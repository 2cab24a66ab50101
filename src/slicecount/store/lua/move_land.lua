-- Second step of a move, in the new slot: add the counts taken to the new counter, once per
-- token (a retry after a lost reply, or a rerun after a crash, lands nothing more).
-- KEYS[1]  the token's landed marker (keys.py: move_landed)
-- KEYS[2]  the new counter HASH      KEYS[3]  its registry ZSET
-- ARGV[1]  the registry member       ARGV[2]  seconds the marker is kept
-- ARGV[3..] slice, count, slice, count ...
-- Returns 1 when the counts landed now, 0 when they had landed before.
if not redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[3], 'NX', 0, ARGV[1])
for i = 3, #ARGV, 2 do
  redis.call('HINCRBY', KEYS[2], ARGV[i], ARGV[i + 1])
end
return 1
