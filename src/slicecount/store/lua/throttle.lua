-- One request against every rate limit of one identity (throttle/operations.py: hit), atomically: read
-- each limit's counts and, only if every limit admits the request, count it in each. A refused
-- request counts nowhere, so each window admits exactly what its limit allows.
-- KEYS     per limit: its current window's counter, then (sliding, ARGV[2] = 2) the previous
-- ARGV[1]  the request's cost     ARGV[2]  keys per limit: 1 (fixed) or 2 (sliding)
-- ARGV[3..] per limit: amount, the previous window's weight, the counter's TTL in ms
-- Returns {1 if counted else 0, previous count, current count, ...} (counts before the request).
local cost = tonumber(ARGV[1])
local per = tonumber(ARGV[2])
local reply = {1}
for i = 0, #KEYS / per - 1 do
  local current = tonumber(redis.call('GET', KEYS[i * per + 1]) or 0)
  local previous = 0
  if per == 2 then previous = tonumber(redis.call('GET', KEYS[i * per + 2]) or 0) end
  -- the test of windows.admits, in the same order: the same doubles give the same answer
  if previous * tonumber(ARGV[4 + i * 3]) + current + cost > tonumber(ARGV[3 + i * 3]) then
    reply[1] = 0
  end
  reply[#reply + 1] = previous
  reply[#reply + 1] = current
end
if reply[1] == 1 then
  for i = 0, #KEYS / per - 1 do
    redis.call('INCRBY', KEYS[i * per + 1], cost)
    redis.call('PEXPIRE', KEYS[i * per + 1], ARGV[5 + i * 3])
  end
end
return reply
