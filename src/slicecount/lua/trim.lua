-- Trim one chunk of a precision's hashes, walking the registry from a lexicographic cursor.
-- Atomic: a hash emptied here loses its registry member in the same step, and a writer's
-- MULTI (ZADD NX + HINCRBY) lands entirely before or after, so no counter is ever orphaned.
--
-- KEYS[1]  registry ZSET (all members score 0)
-- ARGV[1]  counter key prefix: a hash key is prefix .. member (keys.py: counter_for_member)
-- ARGV[2]  lex start ("[60:" or "(<last member>")    ARGV[3]  lex end ("(60;")
-- ARGV[4]  chunk size                                  ARGV[5]  mode: "full" | "incremental"
-- ARGV[6]  cutoff: slices older than this go           ARGV[7]  retention (slices kept)
-- ARGV[8]  first expired slice (incremental: HDEL first, first+step, ... < cutoff by name)
-- ARGV[9]  step (the precision)
-- Returns {last member or "", scanned, fields deleted, hashes removed, full trims, bad keys...}
local registry = KEYS[1]
local prefix, lex_start, lex_end = ARGV[1], ARGV[2], ARGV[3]
local chunk, mode = tonumber(ARGV[4]), ARGV[5]
local cutoff, retention = tonumber(ARGV[6]), tonumber(ARGV[7])
local first, step = tonumber(ARGV[8]), tonumber(ARGV[9])

local members = redis.call('ZRANGEBYLEX', registry, lex_start, lex_end, 'LIMIT', 0, chunk)
local deleted, removed, full = 0, 0, 0
local bad = {}

local function hdel(key, names)
  for j = 1, #names, 4000 do
    deleted = deleted + redis.call('HDEL', key, unpack(names, j, math.min(j + 3999, #names)))
  end
end

local expired = {}
if mode == 'incremental' then
  for s = first, cutoff - step, step do
    expired[#expired + 1] = string.format('%d', s)
  end
end

for _, member in ipairs(members) do
  local key = prefix .. member
  local kind = redis.call('TYPE', key)['ok']
  if kind == 'hash' then
    local trim_all = mode == 'full'
    if not trim_all then
      if #expired > 0 then hdel(key, expired) end
      trim_all = redis.call('HLEN', key) > retention
    end
    if trim_all then
      full = full + 1
      local kept, drop = {}, {}
      for _, field in ipairs(redis.call('HKEYS', key)) do
        local start = tonumber(field)
        if start == nil then
          if #bad < 10 then bad[#bad + 1] = key .. ' field ' .. field end
        elseif start < cutoff then
          drop[#drop + 1] = field
        else
          kept[#kept + 1] = {start, field}
        end
      end
      if #kept > retention then
        table.sort(kept, function(a, b) return a[1] < b[1] end)
        for j = 1, #kept - retention do drop[#drop + 1] = kept[j][2] end
      end
      if #drop > 0 then hdel(key, drop) end
    end
    if redis.call('EXISTS', key) == 0 then
      redis.call('ZREM', registry, member)
      removed = removed + 1
    end
  elseif kind == 'none' then
    redis.call('ZREM', registry, member)  -- the hash is gone: forget it
    removed = removed + 1
  elseif #bad < 10 then
    bad[#bad + 1] = key .. ' is a ' .. kind
  end
end

local last = ''
if #members == chunk then last = members[#members] end
local reply = {last, #members, deleted, removed, full}
for _, item in ipairs(bad) do reply[#reply + 1] = item end
return reply
