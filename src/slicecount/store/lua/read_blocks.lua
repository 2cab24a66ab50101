-- Blocks layout: what many series of one shard hold for a range of one precision, each series
-- in one atomic step (operations/block_reading.py). The cleaner moves counts from the open hash
-- into the block in one script too, so block + hash read here are one moment's: no generation
-- to check again, no second round trip for the frames, one reply for every series.
-- KEYS[2i-1], KEYS[2i]  series i's block STRING and open HASH (all in the shard's slot)
-- ARGV[1] precision   ARGV[2] first slice start   ARGV[3] end (excluded)
-- ARGV[4] slices a frame holds (core/blocks.py FRAME_SLICES)
-- ARGV[4 + i] (optional) the generation of series i's block whose frames for this range the
--   reader holds (0: none): when the block is still that generation, its frames are not read
--   (a sealed frame changes only with the generation: reads/sealed.py)
-- Returns four strings for all the series (core/spans.py): per series, packed '<i8i4i4I4', the
-- start (second) of its first frame returned (0: none), its frames (-1: none read, the block
-- is the generation the reader holds), its open pairs and its block's generation (0: no
-- block); each frame's byte length ('<i4'); the frames' bytes end to end; every open field and
-- its count as decimal text, "second count second count ...", the series' one after the other
-- (the reader keeps those in its range). Joining the hash's own strings is done in C: a loop
-- over the fields in Lua took two thirds of a live store's read, whose open hashes hold a
-- minute of one-second fields. A hash holding anything but plain integers (a foreign field)
-- has its integers kept one by one instead. A value that is not a block of this format reads
-- as no block (core/blocks.py layout).
local precision, first, last = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local period = precision * tonumber(ARGV[4])
local byte, floor, sub = string.byte, math.floor, string.sub
local pack, unpack = struct.pack, unpack
local formats = {}  -- struct formats of n frame lengths
for n = 1, 8 do formats[n] = '<' .. string.rep('i4', n) end
local HEAD = 1024
local STACK = 4000  -- string.byte returns its values on the C stack: a long header in pieces

-- numbers[from..to] packed '<i4' each, STACK at a time (unpack puts them on the C stack)
local function packed(numbers, from, to)
  local parts, p = {}, 0
  for a = from, to, STACK do
    local b = math.min(to, a + STACK - 1)
    p = p + 1
    parts[p] = pack(formats[b - a + 1] or ('<' .. string.rep('i4', b - a + 1)), unpack(numbers, a, b))
  end
  return table.concat(parts)
end

-- the generation of a block's first bytes (0: too short, or not a block of this format)
local function generation_of(head)
  if type(head) ~= 'string' or #head < 10 then return 0 end
  local s, b, version = byte(head, 1, 3)
  if s ~= 83 or b ~= 66 or version ~= 2 then return 0 end
  return (struct.unpack('<I4', head, 5))
end

-- start, frames, lengths, bytes and the generation of what the block holds for the range
local function frames(block)
  local head = redis.pcall('GETRANGE', block, 0, HEAD - 1)
  local generation = generation_of(head)
  if generation == 0 then return 0, 0, '', '', 0 end
  local sections = byte(head, 4)
  local size = byte(head, 9) + 256 * byte(head, 10)
  if size > #head then
    head = redis.call('GETRANGE', block, 0, size - 1)
    if #head < size then return 0, 0, '', '', 0 end
  end
  -- every number of the header at once: the sections' triples, then every frame's length
  local numbers, count, n, scale = {}, 0, 0, 1
  for from = 11, size, STACK do
    local bytes = {byte(head, from, math.min(size, from + STACK - 1))}
    for j = 1, #bytes do
      local v = bytes[j]
      if v < 128 then
        count = count + 1
        numbers[count], n, scale = n + v * scale, 0, 1
      else
        n, scale = n + (v - 128) * scale, scale * 128
      end
    end
  end
  if count < 3 * sections then return 0, 0, '', '', 0 end
  local at, offset = 3 * sections, size  -- the lengths of section k start after ``at``
  for k = 0, sections - 1 do
    local frames_in = numbers[3 * k + 3]
    if numbers[3 * k + 1] == precision then
      local start = numbers[3 * k + 2] * period
      local lo = math.max(0, floor((first - start) / period))
      local hi = math.min(frames_in, floor((last - 1 - start) / period) + 1)
      if last <= first or hi <= lo or at + hi > count then return 0, 0, '', '', generation end
      for i = at + 1, at + lo do offset = offset + numbers[i] end
      local total = 0
      for i = at + lo + 1, at + hi do total = total + numbers[i] end
      local lengths = packed(numbers, at + lo + 1, at + hi)
      local data = ''
      if total > 0 and offset + total <= #head then
        data = sub(head, offset + 1, offset + total)
      elseif total > 0 then
        data = redis.call('GETRANGE', block, offset, offset + total - 1)
      end
      return start + lo * period, hi - lo, lengths, data, generation
    end
    for i = at + 1, at + frames_in do offset = offset + (numbers[i] or 0) end
    at = at + frames_in
  end
  return 0, 0, '', '', generation
end

local concat, find, format, match = table.concat, string.find, string.format, string.match
-- the open fields as text: joined as they are, or (anything but plain integers of up to 18
-- digits: a foreign field) the integers alone, one by one, as block_reading.py keeps them
local function open_text(flat)
  if type(flat) ~= 'table' or flat.err or #flat == 0 then return 0, '' end
  local text = concat(flat, ' ')
  -- a string's length is one step: a pattern looking for 19 digits in a row tried every
  -- position of every second's 10 digits, half of a held read's time
  local plain = not find(text, '[^0-9 ]')
  for j = 1, plain and #flat or 0 do
    local n = #flat[j]
    if n > 18 or n == 0 or find(flat[j], ' ', 1, true) then plain = false; break end
  end
  if plain then return #flat / 2, text end
  local kept, k = {}, 0
  for j = 1, #flat, 2 do
    local a, b = flat[j], flat[j + 1]
    local second = match(a, '^%-?%d+$') and tonumber(a)
    local n = match(b, '^%-?%d+$') and tonumber(b)
    if second and n and math.abs(second) < 2^53 and math.abs(n) < 2^53 then
      k = k + 1
      kept[k] = format('%.0f %.0f', second, n)
    end
  end
  return k, concat(kept, ' ')
end

local meta, lengths, data, opened, m, o = {}, {}, {}, {}, 0, 0
for i = 1, #KEYS, 2 do
  local held = tonumber(ARGV[4 + (i + 1) / 2]) or 0
  local start, count, packed, bytes, generation = 0, -1, '', '', held
  if held == 0 or generation_of(redis.pcall('GETRANGE', KEYS[i], 0, 9)) ~= held then
    start, count, packed, bytes, generation = frames(KEYS[i])
  end
  local pairs, text = open_text(redis.pcall('HGETALL', KEYS[i + 1]))
  if pairs > 0 then
    o = o + 1
    opened[o] = text
  end
  m = m + 1
  meta[m], lengths[m], data[m] = pack('<i8i4i4I4', start, count, pairs, generation), packed, bytes
end
return {concat(meta), concat(lengths), concat(data), concat(opened, ' ')}
