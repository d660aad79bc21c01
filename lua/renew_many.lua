-- renew_many.lua: renew a batch of locks in one round trip (the watchdog's
-- call on a standalone server). Same rule per lock as renew.lua. On Redis
-- Cluster, keys of one call must share a hash slot (Redis refuses
-- cross-slot keys); the watchdog pipelines renew.lua per node there instead.
--
-- KEYS[i]   lock i
-- ARGV[1]   ttl (ms)
-- ARGV[i+1] holder id of lock i
--
-- Returns an array: 1 where renewed, 0 where the lock is gone or another's.

local renewed = {}
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[i + 1] then
    redis.call('PEXPIRE', key, ARGV[1])
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
