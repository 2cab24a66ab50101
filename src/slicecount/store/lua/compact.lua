-- Blocks layout: move sealed open fields of some series of one shard into their blocks
-- (operations/compacting.py plans each rewrite). Per series, atomic: the new block is set and
-- the moved counts leave the open hash in the same step, so block + hash (what readers add)
-- never changes; a writer's MULTI (HINCRBY + ZADD NX) lands wholly before or after.
-- KEYS[1]          the shard's registry ZSET
-- KEYS[2i], [2i+1] series i's open HASH and block STRING (all in the shard's slot)
-- ARGV, per series: its registry member; the block's generation the plan was made on (0: no
--   block); the count of pieces, then two arguments a piece: ('', new bytes) or (offset,
--   length) of a range kept from the old block (no pieces: the block goes); the count of
--   fields, then (field, the value read) each: that value leaves the field (HDEL at 0).
-- A series whose block changed since it was read is left alone (0: the next pass plans
-- again); one with data of another type under a key is left alone too (-1).
-- Returns {{1|0|-1 per series}, registry members removed, bytes written, microseconds held}.
local started = redis.call('TIME')
local registry = KEYS[1]
local outcomes, removed, written = {}, 0, 0
local at = 1

local function generation(value)
  if not value then return 0 end
  if #value < 8 or string.sub(value, 1, 2) ~= 'SB' then return -1 end
  return struct.unpack('<I4', value, 5)
end

local function each_slice(list, count, run)  -- unpack() has a stack limit: go in slices
  for j = 1, count, 4000 do
    run(unpack(list, j, math.min(j + 3999, count)))
  end
end

for i = 1, (#KEYS - 1) / 2 do
  local open, block = KEYS[2 * i], KEYS[2 * i + 1]
  local member, expected, pieces = ARGV[at], tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2])
  local first_piece = at + 3
  local fields = tonumber(ARGV[first_piece + 2 * pieces])
  local first_field = first_piece + 2 * pieces + 1
  at = first_field + 2 * fields

  local old = redis.pcall('GET', block)
  local outcome = 1
  if type(old) == 'table' then
    outcome = -1
  elseif generation(old) ~= expected then
    outcome = 0
  end
  local names, now = {}, {}
  if outcome == 1 and fields > 0 then
    for k = 0, fields - 1 do names[k + 1] = ARGV[first_field + 2 * k] end
    local ok = true
    each_slice(names, fields, function(...)
      local got = redis.pcall('HMGET', open, ...)
      if type(got) ~= 'table' or got.err then ok = false; return end
      for _, v in ipairs(got) do now[#now + 1] = v end
    end)
    -- every field still an integer: the decrements below cannot fail half way
    for k = 1, #now do
      if ok and now[k] and not tonumber(now[k]) then ok = false end
    end
    if not ok then outcome = -1 end
  end
  outcomes[i] = outcome

  if outcome == 1 then
    if pieces == 0 then
      redis.call('DEL', block)
    else
      local parts = {}
      for k = 0, pieces - 1 do
        local a, b = ARGV[first_piece + 2 * k], ARGV[first_piece + 2 * k + 1]
        if a == '' then
          parts[k + 1] = b
        else
          local offset = tonumber(a)
          parts[k + 1] = string.sub(old, offset + 1, offset + tonumber(b))
        end
      end
      local value = table.concat(parts)
      redis.call('SET', block, value)
      written = written + #value
    end
    local gone = {}
    for k = 1, fields do
      local read = ARGV[first_field + 2 * k - 1]
      if now[k] == read then
        gone[#gone + 1] = names[k]
      elseif read ~= '0' then  -- a writer added since the read: take out only what was read
        local minus = string.sub(read, 1, 1) == '-' and string.sub(read, 2) or '-' .. read
        if redis.call('HINCRBY', open, names[k], minus) == 0 then gone[#gone + 1] = names[k] end
      end
    end
    if #gone > 0 then
      each_slice(gone, #gone, function(...) redis.call('HDEL', open, ...) end)
    end
    local left = redis.pcall('HLEN', open)
    if pieces == 0 and left == 0 then
      removed = removed + redis.call('ZREM', registry, member)
    end
  end
end

local ended = redis.call('TIME')
return {outcomes, removed, written, (ended[1] - started[1]) * 1000000 + (ended[2] - started[2])}
