-- Last step of moving a blocks-layout series, in the old slot: drop the intent of this token
-- and forget the series when the old layout holds nothing of it again.
-- KEYS[1]  the intent HASH   KEYS[2]  the old open HASH   KEYS[3]  the old block STRING
-- KEYS[4]  the old registry ZSET
-- ARGV[1]  the registry member (0:<series>)      ARGV[2]  the move's token
-- Returns what the old layout holds again (open fields, plus 1 for a block): written there
-- since the claim, for the next run.
if redis.call('HGET', KEYS[1], 'token') == ARGV[2] then redis.call('DEL', KEYS[1]) end
local left = redis.call('HLEN', KEYS[2]) + redis.call('EXISTS', KEYS[3])
if left == 0 then redis.call('ZREM', KEYS[4], ARGV[1]) end
return left
