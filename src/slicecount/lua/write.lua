-- Apply one prepared write, at most once per (writer, batch number): the registry members
-- (ZADD NX) and the increments (HINCRBY) of one shard, and the writer's new batch number, in
-- one atomic step. A batch whose reply was lost is sent again unchanged; if it was applied
-- already, this says so (with what Redis refused of it then) and writes nothing.
--
-- KEYS[1]            the shard's writers HASH (keys.py: writers): writer id -> "number refused
--                    time" of its last applied batch (no TTL, so no eviction policy picks it;
--                    the cleaner forgets writers quiet for a week)
-- KEYS[2 .. 1+R]     the registries           KEYS[2+R ..]  the hashes, in the order of ARGV
-- ARGV[1]  writer id, or '' for a write that is not deduplicated (Store.incr, Store.apply)
-- ARGV[2]  batch number      ARGV[3]  now (epoch seconds)      ARGV[4]  R, the registries
-- ARGV[5 .. 4+R]  how many ZADD arguments (score, member pairs) each registry gets
-- then those arguments, registry after registry; then per hash: the number of slices c,
-- followed by c pairs (slice start, increment).
-- Returns {1, refused then} for a batch applied before, else {0, commands refused}. A refused
-- command (a key of another type under our name) is counted, never a reason to undo the
-- others; OOM on the first write aborts before anything is written, so the caller may send
-- it again.
local writer, seq = ARGV[1], tonumber(ARGV[2])
if writer ~= '' then
  local last = redis.call('HGET', KEYS[1], writer)
  if last then
    local applied, refused_then = string.match(last, '^(%d+) (%d+)')
    applied = tonumber(applied)
    if applied and applied >= seq then
      return {1, applied == seq and tonumber(refused_then) or 0}
    end
  end
end

local registries = tonumber(ARGV[4])
local a = 5 + registries
local refused = 0
for r = 1, registries do
  local items = tonumber(ARGV[4 + r])
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

if writer ~= '' then
  redis.call('HSET', KEYS[1], writer, ARGV[2] .. ' ' .. refused .. ' ' .. ARGV[3])
end
return {0, refused}
