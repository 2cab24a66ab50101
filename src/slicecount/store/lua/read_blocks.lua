-- Blocks layout: what many series of one shard hold for a range of one precision, each series
-- in one atomic step (operations/block_reading.py). The cleaner moves counts from the open hash
-- into the block in one script too, so block + hash read here are one moment's: no generation
-- to check again, no second round trip for the frames, one reply for every series.
-- KEYS[2i-1], KEYS[2i]  series i's block STRING and open HASH (all in the shard's slot)
-- ARGV[1] precision   ARGV[2] first slice start   ARGV[3] end (excluded)
-- ARGV[4] slices a frame holds (core/blocks.py FRAME_SLICES)
-- Returns four items a series: the start (second) of the first frame returned (0: none), the
-- byte length of each frame returned, their bytes, and {second, count, ...} of the open fields
-- whose slice of the precision is in the range (fields that are not integers: foreign, left
-- out). A value that is not a block of this format reads as no block (core/blocks.py layout).
local precision, first, last = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local period = precision * tonumber(ARGV[4])
local byte, floor = string.byte, math.floor
local NONE = {}
local HEAD = 1024

local function varint(text, at)  -- LEB128 at 1-based ``at``: the value, where the next starts
  local n, scale = 0, 1
  while true do
    local b = byte(text, at)
    if not b then return nil, at end
    at = at + 1
    if b < 128 then return n + b * scale, at end
    n, scale = n + (b - 128) * scale, scale * 128
  end
end

local function frames(block)  -- the start, lengths and bytes of the frames over the range
  -- most blocks are shorter than HEAD: one GETRANGE holds the header and every frame
  local head = redis.pcall('GETRANGE', block, 0, HEAD - 1)
  if type(head) ~= 'string' or #head < 10 then return 0, NONE, '' end
  local s, b, version, sections = byte(head, 1, 4)
  if s ~= 83 or b ~= 66 or version ~= 2 then return 0, NONE, '' end  -- "SB", version 2
  local size = byte(head, 9) + 256 * byte(head, 10)
  if size > #head then
    head = redis.call('GETRANGE', block, 0, size - 1)
    if #head < size then return 0, NONE, '' end
  end
  local triples, at, n = {}, 11, nil
  for k = 1, 3 * sections do
    n, at = varint(head, at)
    if not n then return 0, NONE, '' end
    triples[k] = n
  end
  local offset = size  -- of the first frame of the section being walked
  for k = 0, sections - 1 do
    local count = triples[3 * k + 3]
    if triples[3 * k + 1] == precision then
      local start = triples[3 * k + 2] * period
      local lo = math.max(0, floor((first - start) / period))
      local hi = math.min(count, floor((last - 1 - start) / period) + 1)
      if last <= first or hi <= lo then return 0, NONE, '' end
      local lengths, total = {}, 0
      for i = 0, hi - 1 do
        n, at = varint(head, at)
        if not n then return 0, NONE, '' end
        if i < lo then
          offset = offset + n
        else
          lengths[#lengths + 1], total = n, total + n
        end
      end
      local data = ''
      if total > 0 and offset + total <= #head then
        data = string.sub(head, offset + 1, offset + total)
      elseif total > 0 then
        data = redis.call('GETRANGE', block, offset, offset + total - 1)
      end
      return start + lo * period, lengths, data
    end
    for _ = 1, count do
      n, at = varint(head, at)
      if not n then return 0, NONE, '' end
      offset = offset + n
    end
  end
  return 0, NONE, ''
end

local out = {}
for i = 1, #KEYS, 2 do
  local start, lengths, data = frames(KEYS[i])
  local opened, flat = {}, redis.pcall('HGETALL', KEYS[i + 1])
  if type(flat) == 'table' and not flat.err then
    for j = 1, #flat, 2 do
      local second, count = tonumber(flat[j]), tonumber(flat[j + 1])
      if second and count and second % 1 == 0 and count % 1 == 0 then
        local slice = second - second % precision
        if slice >= first and slice < last then
          opened[#opened + 1], opened[#opened + 2] = second, count
        end
      end
    end
  end
  out[#out + 1], out[#out + 2], out[#out + 3], out[#out + 4] = start, lengths, data, opened
end
return out
