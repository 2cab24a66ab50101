-- Take up to ARGV[2] tokens of one limit's current fixed window for a process to spend locally
-- (throttle/operations.py: claim): never past the limit, so the window admits at most its amount.
-- KEYS[1]  the window's counter
-- ARGV[1]  the limit's amount     ARGV[2]  tokens wanted     ARGV[3]  the counter's TTL in ms
-- Returns how many tokens were granted (0 when the window is spent).
local taken = tonumber(redis.call('GET', KEYS[1]) or 0)
local granted = math.min(tonumber(ARGV[2]), tonumber(ARGV[1]) - taken)
if granted <= 0 then return 0 end
redis.call('INCRBY', KEYS[1], granted)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return granted
