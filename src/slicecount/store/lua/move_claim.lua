-- First step of moving a counter to another shard layout (resharding.py), in its old slot:
-- remember the counts taken and the move's token, unless a move cut short left them there
-- (then that move is finished, with its own token: landing twice is refused by the token).
-- KEYS[1]  the old counter HASH      KEYS[2]  the move's intent HASH (keys.py: move_intent)
-- ARGV[1]  a fresh token
-- Returns the intent as HGETALL does ("token" and the slice fields), or {} for no counts.
local intent = redis.call('HGETALL', KEYS[2])
if #intent > 0 then return intent end
local counts = redis.call('HGETALL', KEYS[1])
if #counts == 0 then return {} end
redis.call('HSET', KEYS[2], 'token', ARGV[1])
for j = 1, #counts, 4000 do  -- unpack() has a stack limit: copy in slices
  redis.call('HSET', KEYS[2], unpack(counts, j, math.min(j + 3999, #counts)))
end
return redis.call('HGETALL', KEYS[2])
