-- Add values to one slice of a unique series in exact or first-seen mode (unique_writing.py).
-- Idempotent (adding the same values again changes nothing), so a batch of these calls may be
-- sent again whole after NOSCRIPT or a lost reply.
-- KEYS[1] the slice's HLL   KEYS[2] its exact SET   KEYS[3] the unique registry
-- KEYS[4] the first-seen counter HASH   KEYS[5] the counters' registry
-- KEYS[6 ..] the first-seen counter's HASHes at the precisions finer than this one
-- ARGV[1] cap (0: not exact)   ARGV[2] expiry (epoch s)   ARGV[3] registry member
-- ARGV[4] the slice's start   ARGV[5] "1": write the first-seen counter (the book's layout),
--   "2": only add the values first seen here to the finer HASHes (the blocks layout: KEYS[6]
--   is the series' open hash, the one finer HASH; KEYS[4] is not written)
-- ARGV[6] F, the finer HASHes   ARGV[7 .. 6 + 2F] each one's (slice start, registry member)
-- ARGV[7 + 2F ..] the values
-- Returns 1 when the SET is over its cap (it lists cap + 1 values: some only), else 0.
local cap = tonumber(ARGV[1])
local expire_at = ARGV[2]
local first_seen = ARGV[5] ~= '0'
local fine = tonumber(ARGV[6])
local first = 7 + 2 * fine
local last = #ARGV

-- the count rule of unique_reading.is_complete: the SET's size when it lists every value
local function count()
  local pf = redis.call('PFCOUNT', KEYS[1])
  if cap > 0 then
    local n = redis.call('SCARD', KEYS[2])
    if n > 0 and n <= cap and pf <= n + 2 + math.floor(n / 33) then return n end
  end
  return pf
end

local before = 0
if first_seen and fine > 0 then before = count() end
redis.call('ZADD', KEYS[3], 'GT', expire_at, ARGV[3])
for i = first, last, 1000 do  -- unpack() takes a few thousand values at most
  redis.call('PFADD', KEYS[1], unpack(ARGV, i, math.min(i + 999, last)))
end
redis.call('EXPIREAT', KEYS[1], expire_at)
local n = 0
if cap > 0 then
  n = redis.call('SCARD', KEYS[2])
  if n + last - first + 1 <= cap + 1 then  -- all fit: one SADD per thousand values
    for i = first, last, 1000 do
      n = n + redis.call('SADD', KEYS[2], unpack(ARGV, i, math.min(i + 999, last)))
    end
  else  -- stop at cap + 1: the SET then says "over the cap" by its size alone
    local i = first
    while n <= cap and i <= last do
      n = n + redis.call('SADD', KEYS[2], ARGV[i])
      i = i + 1
    end
  end
  redis.call('EXPIREAT', KEYS[2], expire_at)
end
if first_seen then
  local after = count()
  if ARGV[5] == '1' then
    redis.call('HSET', KEYS[4], ARGV[4], after)
    redis.call('ZADD', KEYS[5], 'NX', 0, ARGV[3])
  end
  -- finer slices count the values first seen in this slice, at the second they came
  if after > before then
    for k = 1, fine do
      redis.call('HINCRBY', KEYS[5 + k], ARGV[5 + 2 * k], after - before)
      redis.call('ZADD', KEYS[5], 'NX', 0, ARGV[6 + 2 * k])
    end
  end
end
if cap > 0 and n > cap then return 1 end
return 0
