-- Last step of a move, in the old slot: take the moved counts out of the old counter (what a
-- writer added since the claim stays, for the next run), forget it when empty, drop the intent.
-- KEYS[1]  the old counter HASH      KEYS[2]  the intent HASH     KEYS[3]  the old registry
-- ARGV[1]  the registry member       ARGV[2..] slice, minus its count, slice, ... (negated
--          by the client: Lua numbers are doubles, counts are 64-bit)
-- Returns how many slices the old counter still holds.
for i = 2, #ARGV, 2 do
  -- a slice the cleaner trimmed meanwhile stays trimmed (no negative count is made)
  if redis.call('HEXISTS', KEYS[1], ARGV[i]) == 1 then
    if redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1]) == 0 then
      redis.call('HDEL', KEYS[1], ARGV[i])
    end
  end
end
redis.call('DEL', KEYS[2])
local left = redis.call('HLEN', KEYS[1])
if left == 0 then redis.call('ZREM', KEYS[3], ARGV[1]) end
return left
