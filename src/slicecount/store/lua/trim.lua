-- Trim one chunk of a precision's hashes in one shard, and read the members of the next chunk.
-- Atomic: a hash emptied here loses its registry member in the same step, and a writer's
-- MULTI (ZADD NX + HINCRBY) lands entirely before or after, so no counter is ever orphaned.
-- Every key touched is declared (on a cluster, all in the shard's slot): the client names the
-- hashes of the members the previous call returned. A member gone since then (another
-- cleaner) is harmless: its hash is empty or new, and ZREM says whether it was still there.
--
-- KEYS[1]       the shard's registry ZSET (all members score 0)
-- KEYS[1 + i]   the hash of ARGV[10 + i], the chunk's i-th member
-- ARGV[1]  mode: "full" (list every hash), "cold" (no previous cutoff known: delete by name
--          the run of slices right before the cutoff, see cold()) or "incremental" (delete by
--          name the slices that expired since the last pass). Both list a hash still longer
--          than retention.
-- ARGV[2]  cutoff: slices older than this go    ARGV[3] retention: a longer hash gets listed
-- ARGV[4]  window: most slices a cold trim names in one hash
-- ARGV[5]  incremental: the first slice that expired since the last pass (first, first+step,
--          ... < cutoff are deleted by name)     ARGV[6] step (the precision)
-- ARGV[7]  horizon: slices after it go (further ahead than writers may write; a future slice
--          never pushes out one inside retention)
-- ARGV[8]  lex start of the next chunk   ARGV[9] lex end   ARGV[10] its size (0: none)
-- Returns {fields deleted, hashes removed, full trims, {bad keys...}, {next members...},
-- microseconds it held Redis (what the client sizes chunks by: not its own round trip)}
local started = redis.call('TIME')
local registry = KEYS[1]
local mode, cutoff, most = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local window, first, step = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local horizon, next_size = tonumber(ARGV[7]), tonumber(ARGV[10])
local deleted, removed, full = 0, 0, 0
local bad = {}

local function hdel(key, names, count)  -- unpack() has a stack limit: delete in slices
  for j = 1, count, 4000 do
    deleted = deleted + redis.call('HDEL', key, unpack(names, j, math.min(j + 3999, count)))
  end
end

local function note_bad(key, what)
  if #bad < 10 then bad[#bad + 1] = key .. what end
end

-- Slice names built once per call. Small hashes are ziplists, where each name HDEL looks for
-- is a scan of the hash: names are chosen to be there (a miss costs as much as listing).
local expired = {}  -- incremental: the slices that expired since the last pass
if mode == 'incremental' then
  for s = first, cutoff - step, step do
    expired[#expired + 1] = string.format('%d', s)
  end
end
local before = {}  -- cold: before[k] = cutoff - k * step, grown as the longest excess needs

local cutoff_text = string.format('%d', cutoff)
local cutoff_len = #cutoff_text
local horizon_text = string.format('%d', horizon)
local horizon_len = #horizon_text

local function trim_fully(key)
  full = full + 1
  local drop = {}
  for _, field in ipairs(redis.call('HKEYS', key)) do
    -- Slice starts of the same width compare as strings: no number conversion for the
    -- ~all fields that look like ours; a field we would delete is checked to be a number.
    if not (#field == cutoff_len and field >= cutoff_text
            and (horizon_len > cutoff_len or field <= horizon_text)) then
      local start = tonumber(field)
      if start == nil or start ~= math.floor(start) then
        note_bad(key, ' field ' .. field)
      elseif start < cutoff or start > horizon then
        drop[#drop + 1] = field
      end
    end
  end
  if #drop > 0 then hdel(key, drop, #drop) end
end

-- Cold: delete the run of slices right before the cutoff, by name, as far back as it runs: the
-- first block is as long as the hash is longer than retention (a busy series' expired run),
-- then blocks of 1, 2, 4... while each is all there (the slices retention does not hold yet:
-- its newest, not written yet). A named slice missing ends the run; older stragglers (a late
-- write, a sparse series' old slices, a slice past the horizon in a short hash) are left to the
-- sweep. A hash still longer than retention is listed, and so is one whose run outruns the
-- window (its cleaner was away longer than retention).
local function cold(key, size)
  local block = math.max(size - most, 1)
  local named, growing = 0, 1
  while named + block <= window do
    for k = #before + 1, named + block do
      before[k] = string.format('%d', cutoff - k * step)
    end
    local hits = redis.call('HDEL', key, unpack(before, named + 1, named + block))
    deleted, size, named = deleted + hits, size - hits, named + block
    if hits < block or size == 0 then  -- the run ended
      if size <= most then return size end
      break
    end
    if named == window then break end
    block, growing = math.min(growing, window - named), growing * 2
  end
  trim_fully(key)
  return redis.call('HLEN', key)
end

-- Per hash, the common case is two commands (HLEN, or the expired names then HLEN). A key of
-- the wrong type makes a command fail: pcall turns that into a "bad data" note, not an abort.
for i = 2, #KEYS do
  local key, size = KEYS[i], nil
  if #expired > 0 then
    local reply = redis.pcall('HDEL', key, unpack(expired))
    if type(reply) == 'number' then
      deleted = deleted + reply
      size = redis.call('HLEN', key)
    end
  else
    size = redis.pcall('HLEN', key)
    if type(size) ~= 'number' then size = nil end
  end
  if size == nil then
    note_bad(key, ' is a ' .. redis.call('TYPE', key)['ok'])
  else
    if mode == 'cold' and size > 0 then
      size = cold(key, size)
    elseif size > 0 and (mode == 'full' or size > most) then
      trim_fully(key)
      size = redis.call('HLEN', key)
    end
    if size == 0 then  -- emptied, or gone already: forget it in the same atomic step
      removed = removed + redis.call('ZREM', registry, ARGV[9 + i])
    end
  end
end

local following = {}
if next_size > 0 then
  following = redis.call('ZRANGEBYLEX', registry, ARGV[8], ARGV[9], 'LIMIT', 0, next_size)
end
local ended = redis.call('TIME')
local held = (ended[1] - started[1]) * 1000000 + (ended[2] - started[2])
return {deleted, removed, full, bad, following, held}
