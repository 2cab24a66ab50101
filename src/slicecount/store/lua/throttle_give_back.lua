-- Return tokens a process claimed and did not spend (throttle/operations.py: give_back), to a window's
-- counter that still exists (an expired one needs nothing back), never below zero.
-- KEYS[1]  the window's counter     ARGV[1]  tokens to return
-- Returns how many were returned.
local taken = tonumber(redis.call('GET', KEYS[1]) or 0)
local back = math.min(tonumber(ARGV[1]), taken)
if back <= 0 then return 0 end
redis.call('DECRBY', KEYS[1], back)
return back
