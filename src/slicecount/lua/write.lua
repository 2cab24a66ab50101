-- Apply one prepared write, at most once per (writer, batch number): the registry members
-- (ZADD NX) and the increments (HINCRBY) of one shard, and the writer's new batch number, in
-- one atomic step. A batch whose reply was lost is sent again unchanged; if it was applied
-- already, this says so and writes nothing.
--
-- KEYS[1]            the writer's key (keys.py: writer): its last applied batch number
-- KEYS[2 .. 1+R]     the registries           KEYS[2+R ..]  the hashes, in the order of ARGV
-- ARGV[1]  batch number, or '' for a write that is not deduplicated (Store.incr, Store.apply)
-- ARGV[2]  how long the writer's key lives, in ms     ARGV[3]  R, the number of registries
-- ARGV[4 .. 3+R]  how many ZADD arguments (score, member pairs) each registry gets
-- then those arguments, registry after registry; then per hash: the number of slices c,
-- followed by c pairs (slice start, increment).
-- Returns {1, 0} for a batch applied before, else {0, commands refused}. A refused command
-- (a key of another type under our name) is counted, never a reason to undo the others; OOM
-- on the first write aborts before anything is written, so the caller may send it again.
local seq = ARGV[1]
if seq ~= '' then
  local last = redis.call('GET', KEYS[1])
  if last and tonumber(last) >= tonumber(seq) then return {1, 0} end
end

local registries = tonumber(ARGV[3])
local a = 4 + registries
local refused = 0
for r = 1, registries do
  local items = tonumber(ARGV[3 + r])
  local last_item = a + items - 1
  for j = a, last_item, 4000 do  -- unpack() has a stack limit: add members in slices
    local reply = redis.pcall('ZADD', KEYS[1 + r], 'NX', unpack(ARGV, j, math.min(j + 3999, last_item)))
    if type(reply) == 'table' then
      if r == 1 and j == a and string.find(reply.err, 'OOM command not allowed', 1, true) then
        return redis.error_reply(reply.err)
      end
      refused = refused + 1
    end
  end
  a = last_item + 1
end

local h, n_args = 2 + registries, #ARGV
while a <= n_args do
  local key, slices = KEYS[h], tonumber(ARGV[a])
  a, h = a + 1, h + 1
  for _ = 1, slices do
    if type(redis.pcall('HINCRBY', key, ARGV[a], ARGV[a + 1])) == 'table' then
      refused = refused + 1
    end
    a = a + 2
  end
end

if seq ~= '' then redis.call('SET', KEYS[1], seq, 'PX', ARGV[2]) end
return {0, refused}
