-- First step of moving a blocks-layout series to another shard layout (resharding.py), in its
-- old slot: its open hash and its block become the move's intent and leave the old layout in
-- one step (what a writer or a cleaner of the old layout makes there later stays for the next
-- run), unless a move cut short left an intent (then that move is finished, with its token).
-- KEYS[1]  the move's intent HASH (keys.py: move_intent)
-- KEYS[2]  the old open HASH         KEYS[3]  the old block STRING
-- ARGV[1]  a fresh token
-- Returns the intent as HGETALL does: "token", "block" (its bytes, if it had one) and
-- "o:<second>" -> count for each open field; {} when the series holds nothing.
local intent = redis.call('HGETALL', KEYS[1])
if #intent > 0 then return intent end
local opened = redis.call('HGETALL', KEYS[2])
local block = redis.call('GET', KEYS[3])
if #opened == 0 and not block then return {} end
redis.call('HSET', KEYS[1], 'token', ARGV[1])
if block then redis.call('HSET', KEYS[1], 'block', block) end
for i = 1, #opened, 2 do
  redis.call('HSET', KEYS[1], 'o:' .. opened[i], opened[i + 1])
end
redis.call('DEL', KEYS[2], KEYS[3])
return redis.call('HGETALL', KEYS[1])
