-- renew.lua: extend the lock's ttl, only while the caller still holds it.
--
-- KEYS[1] lock     asc:{<asset>}:lock
-- ARGV[1] holder id
-- ARGV[2] ttl (ms)
--
-- Returns 1 if renewed, 0 if the lock is gone or held by someone else.

if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
