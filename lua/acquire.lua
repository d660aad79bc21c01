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
-- KEYS[6] (optional, added) facts hash asc:{<asset>}:facts:<run>: one field
--         per fact, its value the fact's JSON as written. It expires with
--         the ticket, and its fields come back with the claim.
-- ARGV[9] (optional, added) "<token>:<revision>" of the copy of the ticket
--         the caller already holds (read just before): if the ticket is
--         still there, the facts are not sent back.
--
-- KEYS[7] (optional, added) ticket asc:{<asset>}:ticket:<earlier run> of a
--         run this claim supersedes (an earlier spec generation's run of the
--         same owner that has not ended). Checked only when the claimed run
--         has not ended: if that ticket is alerting (HIGH_RISK_FOUND,
--         NOTIFYING or NOTIFIED) nothing is taken or written and the claim
--         is refused with EARLIER_ALERTING, since that run must finish (and
--         notify) first; if it is in progress otherwise, it is failed in this
--         same step under a freshly drawn token (drawn before the claim's,
--         so lower), so its executor's next write is refused and no risk can
--         be confirmed under it afterwards. A missing or ended ticket is
--         left as it is. Its expiry is kept.
--
-- Returns {token, ticket JSON, facts, current}: facts is the facts hash as
-- HGETALL gives it (name, JSON, name, JSON, ...), empty when there is none
-- or the caller's copy is current; current is 1 when that copy (ARGV[9]) is
-- the ticket as found, else 0.
-- Errors: LOCKED <holder> <pttl> | TICKET_CORRUPT <reason> | BAD_ARGS <reason>
--         | RUN_RETIRED <ticket key> | EARLIER_ALERTING <earlier ticket key>
--         (added)
--
-- The ticket is claimed here, not at the first write: from this moment on a
-- previous holder's token no longer matches and every write it tries fails.
-- A terminal ticket is returned as found, with its own token, and nothing is
-- taken or written, also while another run holds the lock: a run that
-- ended needs no lock. The facts are never decoded here: the claim costs
-- the same whatever the ticket has learned.

local holder = ARGV[1]
local ttl = tonumber(ARGV[2])
local floor = tonumber(ARGV[3])
local now = tonumber(ARGV[4])
local keep_ticket = tonumber(ARGV[7] or '0') or 0
local keep_asset = tonumber(ARGV[8] or '0') or 0
local facts_key = KEYS[6]
if holder == nil or holder == '' or ttl == nil or ttl <= 0 or floor == nil or floor < 0
    or floor ~= math.floor(floor) or now == nil then
  return redis.error_reply('BAD_ARGS holder, ttl > 0, an integer floor >= 0 and now are required')
end

-- Numbers reach Redis commands as integer strings: Lua's own conversion of
-- a number (%.14g, through the C library's exact float printing) costs as
-- much as a command.
local function int(n)
  return string.format('%d', n)
end
local cap = int(tonumber(ARGV[6] or '1000') or 1000)
local px, at = int(ttl), int(now)

if KEYS[5] and redis.call('EXISTS', KEYS[5]) == 1 then
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', cap, '*',
    'op', 'acquire', 'result', 'RUN_RETIRED', 'ticket', KEYS[3], 'holder', holder, 'at', at)
  return redis.error_reply('RUN_RETIRED ' .. KEYS[3])
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

-- The facts the caller lacks: none if its copy is this very revision, none
-- for a new ticket or one without a facts hash, else the whole hash.
local current = 0
if raw and ARGV[9] == int(ticket.fencing_token) .. ':' .. int(ticket.revision) then
  current = 1
end
local facts = {}
if raw and current == 0 and facts_key and ticket.facts_hash == true then
  facts = redis.call('HGETALL', facts_key)
end

if ticket.status == 'FINISHED' or ticket.status == 'FAILED' then
  return {ticket.fencing_token, raw, facts, current}
end

-- The superseded run, as found: refuse while it alerts, else end it below.
local earlier_key = KEYS[7]
local earlier, earlier_raw
if earlier_key then
  earlier_raw = redis.call('GET', earlier_key)
end
if earlier_raw then
  local ok, decoded = pcall(cjson.decode, earlier_raw)
  if not ok or type(decoded) ~= 'table' or type(decoded.status) ~= 'string'
      or type(decoded.fencing_token) ~= 'number' or type(decoded.revision) ~= 'number' then
    return redis.error_reply('TICKET_CORRUPT ' .. earlier_key)
  end
  if decoded.status == 'HIGH_RISK_FOUND' or decoded.status == 'NOTIFYING'
      or decoded.status == 'NOTIFIED' then
    return redis.error_reply('EARLIER_ALERTING ' .. earlier_key)
  end
  if decoded.status ~= 'FINISHED' and decoded.status ~= 'FAILED' then
    earlier = decoded
  end
end

-- Take the lock if free; if it is the caller's already, extend it.
local locked_by = redis.call('SET', KEYS[1], holder, 'NX', 'PX', px, 'GET')
if locked_by == holder then
  redis.call('PEXPIRE', KEYS[1], px)
elseif locked_by then
  return redis.error_reply('LOCKED ' .. locked_by .. ' ' .. redis.call('PTTL', KEYS[1]))
end

-- Draws a token above every earlier one, the floor and `above`.
local function draw(above)
  local drawn = redis.call('INCR', KEYS[2])
  if drawn < above + 1 then
    drawn = above + 1
    redis.call('SET', KEYS[2], int(drawn))
  end
  return drawn
end

if earlier then
  local ended_by = draw(math.max(floor, earlier.fencing_token))
  local from = earlier.status
  earlier.status = 'FAILED'
  earlier.fencing_token = ended_by
  earlier.revision = earlier.revision + 1
  earlier.holder = holder
  earlier.updated_at = now
  redis.call('SET', earlier_key, cjson.encode(earlier), 'KEEPTTL')
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', cap, '*',
    'op', 'supersede', 'result', 'ok', 'ticket', earlier_key, 'holder', holder,
    'token', int(ended_by), 'from', from, 'status', 'FAILED',
    'revision', int(earlier.revision), 'by', KEYS[3], 'at', at)
end

local token = draw(floor)

ticket.fencing_token = token
ticket.revision = ticket.revision + 1
ticket.holder = holder
ticket.updated_at = now
raw = cjson.encode(ticket)
if keep_ticket > 0 then
  redis.call('SET', KEYS[3], raw, 'PX', int(keep_ticket))
else
  redis.call('SET', KEYS[3], raw)
end
if facts_key and ticket.facts_hash == true then
  if keep_ticket > 0 then
    redis.call('PEXPIRE', facts_key, int(keep_ticket))
  else
    redis.call('PERSIST', facts_key)
  end
end
if keep_asset > 0 then
  redis.call('PEXPIRE', KEYS[2], int(keep_asset))
end

redis.call('XADD', KEYS[4], 'MAXLEN', '~', cap, '*',
  'op', 'acquire', 'result', 'ok', 'ticket', KEYS[3], 'holder', holder,
  'token', int(token), 'status', ticket.status, 'revision', int(ticket.revision), 'at', at)
if keep_asset > 0 then
  redis.call('PEXPIRE', KEYS[4], int(keep_asset))
end
return {token, raw, facts, current}
