-- Blocks layout: the generation of each block named, nothing else (operations/block_reading.py:
-- a refresh that holds a series' sealed frames reads its open hash with a plain HGETALL, then
-- this; a block still of the generation held was not rewritten meanwhile, so the frames held
-- and that hash are one moment's).
-- KEYS[i]  series i's block STRING
-- Returns one string: each block's generation as '<I4' (0: no block, or not of this format).
local byte, pack = string.byte, struct.pack
local out = {}
for i = 1, #KEYS do
  local head, generation = redis.pcall('GETRANGE', KEYS[i], 0, 9), 0
  if type(head) == 'string' and #head >= 10 then
    local s, b, version = byte(head, 1, 3)
    if s == 83 and b == 66 and version == 2 then generation = struct.unpack('<I4', head, 5) end
  end
  out[i] = pack('<I4', generation)
end
return table.concat(out)
