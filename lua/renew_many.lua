#!lua flags=allow-cross-slot-keys
-- renew_many.lua: renew a batch of locks in one round trip (the watchdog's
-- call). Same rule per lock as renew.lua. On Redis Cluster every key must be
-- served by the node the call is sent to; slots may differ.
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
