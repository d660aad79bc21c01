-- acquire.lua: take the asset's lock and claim its ticket with a new fencing token.
--
-- KEYS[1] lock     asc:{<asset>}:lock
-- KEYS[2] fence    asc:{<asset>}:fence
-- KEYS[3] ticket   asc:{<asset>}:ticket:<run>
-- KEYS[4] audit    asc:{<asset>}:audit
-- ARGV[1] holder id
-- ARGV[2] lock ttl (ms)
-- ARGV[3] token floor (integer >= 0): the newest token known outside Redis
-- ARGV[4] now (unix ms)
-- ARGV[5] initial ticket JSON, used only when the ticket does not exist
-- ARGV[6] (optional) audit stream cap, default 1000
-- KEYS[5] (optional, added) tombstone asc:{<asset>}:retired:<owner>: the
--         run belongs to that owner; once retire.lua has retired the owner,
--         the run is refused (and the refusal audited) instead of created
-- ARGV[7] (optional, added) ms a non-terminal ticket is kept after this
--         claim (0 or absent: until it ends or is deleted)
-- ARGV[8] (optional, added) ms the asset's fence and audit stream are kept
--         after this claim (0 or absent: forever)
--
-- Returns {token, ticket JSON}.
-- Errors: LOCKED <holder> <pttl> | TICKET_CORRUPT <reason> | BAD_ARGS <reason>
--         | RUN_RETIRED <ticket key> (added)
--
-- The ticket is claimed here, not at the first write: from this moment on a
-- previous holder's token no longer matches and every write it tries fails.
-- A terminal ticket is returned as found, with its own token, and nothing is
-- taken or written: a run that ended needs no lock.

local holder = ARGV[1]
local ttl = tonumber(ARGV[2])
local floor = tonumber(ARGV[3])
local now = tonumber(ARGV[4])
local cap = tonumber(ARGV[6] or '1000') or 1000
local keep_ticket = tonumber(ARGV[7] or '0') or 0
local keep_asset = tonumber(ARGV[8] or '0') or 0
if holder == nil or holder == '' or ttl == nil or ttl <= 0 or floor == nil or floor < 0
    or floor ~= math.floor(floor) or now == nil then
  return redis.error_reply('BAD_ARGS holder, ttl > 0, an integer floor >= 0 and now are required')
end

if KEYS[5] and redis.call('EXISTS', KEYS[5]) == 1 then
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', cap, '*',
    'op', 'acquire', 'result', 'RUN_RETIRED', 'ticket', KEYS[3], 'holder', holder, 'at', now)
  return redis.error_reply('RUN_RETIRED ' .. KEYS[3])
end

local current = redis.call('GET', KEYS[1])
if current and current ~= holder then
  return redis.error_reply('LOCKED ' .. current .. ' ' .. redis.call('PTTL', KEYS[1]))
end

local raw = redis.call('GET', KEYS[3])
local ticket
if raw then
  local ok, decoded = pcall(cjson.decode, raw)
  if not ok or type(decoded) ~= 'table' or type(decoded.status) ~= 'string'
      or type(decoded.fencing_token) ~= 'number' or type(decoded.revision) ~= 'number' then
    return redis.error_reply('TICKET_CORRUPT ' .. KEYS[3])
  end
  ticket = decoded
else
  local ok, decoded = pcall(cjson.decode, ARGV[5] or '')
  if not ok or type(decoded) ~= 'table' then
    return redis.error_reply('BAD_ARGS initial ticket is not a JSON object')
  end
  ticket = decoded
  ticket.status = 'INIT'
  ticket.revision = 0
  ticket.fencing_token = 0
end

if ticket.status == 'FINISHED' or ticket.status == 'FAILED' then
  return {ticket.fencing_token, raw}
end

redis.call('SET', KEYS[1], holder, 'PX', ttl)
local token = redis.call('INCR', KEYS[2])
if token < floor + 1 then
  token = floor + 1
  redis.call('SET', KEYS[2], token)
end

ticket.fencing_token = token
ticket.revision = ticket.revision + 1
ticket.holder = holder
ticket.updated_at = now
raw = cjson.encode(ticket)
if keep_ticket > 0 then
  redis.call('SET', KEYS[3], raw, 'PX', keep_ticket)
else
  redis.call('SET', KEYS[3], raw)
end
if keep_asset > 0 then
  redis.call('PEXPIRE', KEYS[2], keep_asset)
end

redis.call('XADD', KEYS[4], 'MAXLEN', '~', cap, '*',
  'op', 'acquire', 'result', 'ok', 'ticket', KEYS[3], 'holder', holder,
  'token', token, 'status', ticket.status, 'revision', ticket.revision, 'at', now)
if keep_asset > 0 then
  redis.call('PEXPIRE', KEYS[4], keep_asset)
end
return {token, raw}
