-- Add values to one slice of a unique series in exact or first-seen mode (unique_writing.py).
-- Idempotent (adding the same values again changes nothing), so a batch of these calls may be
-- sent again whole after NOSCRIPT or a lost reply.
-- KEYS[1] the slice's HLL   KEYS[2] its exact SET   KEYS[3] the unique registry
-- KEYS[4] the first-seen counter HASH   KEYS[5] the counters' registry
-- ARGV[1] cap (0: not exact)   ARGV[2] expiry (epoch s)   ARGV[3] registry member
-- ARGV[4] the slice's start   ARGV[5] "1": write the first-seen counter   ARGV[6..] the values
-- Returns 1 when the SET is over its cap (it lists cap + 1 values: some only), else 0.
local cap = tonumber(ARGV[1])
local expire_at = ARGV[2]
local last = #ARGV
redis.call('ZADD', KEYS[3], 'GT', expire_at, ARGV[3])
for i = 6, last, 1000 do  -- unpack() takes a few thousand values at most
  redis.call('PFADD', KEYS[1], unpack(ARGV, i, math.min(i + 999, last)))
end
redis.call('EXPIREAT', KEYS[1], expire_at)
local n = 0
if cap > 0 then
  n = redis.call('SCARD', KEYS[2])
  if n + last - 5 <= cap + 1 then  -- all fit: one SADD per thousand values
    for i = 6, last, 1000 do
      n = n + redis.call('SADD', KEYS[2], unpack(ARGV, i, math.min(i + 999, last)))
    end
  else  -- stop at cap + 1: the SET then says "over the cap" by its size alone
    local i = 6
    while n <= cap and i <= last do
      n = n + redis.call('SADD', KEYS[2], ARGV[i])
      i = i + 1
    end
  end
  redis.call('EXPIREAT', KEYS[2], expire_at)
end
if ARGV[5] == '1' then
  local count = n
  if n == 0 or n > cap then count = redis.call('PFCOUNT', KEYS[1]) end
  redis.call('HSET', KEYS[4], ARGV[4], count)
  redis.call('ZADD', KEYS[5], 'NX', 0, ARGV[3])
end
if cap > 0 and n > cap then return 1 end
return 0
