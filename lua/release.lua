-- release.lua: give the lock up, only if the caller holds it.
--
-- KEYS[1] lock     asc:{<asset>}:lock
-- KEYS[2] (optional) audit stream asc:{<asset>}:audit: records the release
-- ARGV[1] holder id
-- ARGV[2] (optional) now (unix ms), for the audit record
-- ARGV[3] (optional) audit stream cap, default 1000
-- KEYS[3] (optional, added) the bridge's legacy lock asc:{<asset>}:lock,
--         taken with the namespaced one KEYS[1]: released with it, under
--         the same rule (only if the caller holds it).
--
-- Returns 1 if released, 0 if not the owner (never deletes another's lock).

if KEYS[3] and redis.call('GET', KEYS[3]) == ARGV[1] then
  redis.call('DEL', KEYS[3])
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if KEYS[2] then
    -- Integer strings: Lua's own number conversion (%.14g) costs a command.
    local cap = string.format('%d', tonumber(ARGV[3] or '1000') or 1000)
    redis.call('XADD', KEYS[2], 'MAXLEN', '~', cap, '*',
      'op', 'release', 'result', 'ok', 'holder', ARGV[1], 'at', ARGV[2] or '0')
  end
  return 1
end
return 0
