-- Second step of moving a blocks-layout series, in the new slot: its open counts added to the
-- new open hash and its block merged into the new block, once per token (a retry after a lost
-- reply, or a rerun after a crash, lands nothing more).
-- KEYS[1]  the token's landed marker (keys.py: move_landed)
-- KEYS[2]  the new open HASH   KEYS[3]  the new block STRING   KEYS[4]  the new registry ZSET
-- ARGV[1]  the registry member (0:<series>)      ARGV[2]  seconds the marker is kept
-- ARGV[3]  the new block's generation as the merge read it (its bytes 4..7; '': no block)
-- ARGV[4]  the merged block ('': no block moved)  ARGV[5..] second, count, second, count ...
-- Returns 1 when it landed now, 0 when it had landed before, -1 when the new block changed
-- since the merge read it (a cleaner's compaction): nothing was written, merge again.
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
if ARGV[4] ~= '' then
  if redis.call('GETRANGE', KEYS[3], 4, 7) ~= ARGV[3] then return -1 end
  redis.call('SET', KEYS[3], ARGV[4])
end
redis.call('SET', KEYS[1], '1', 'EX', ARGV[2])
redis.call('ZADD', KEYS[4], 'NX', 0, ARGV[1])
for i = 5, #ARGV, 2 do
  redis.call('HINCRBY', KEYS[2], ARGV[i], ARGV[i + 1])
end
return 1
