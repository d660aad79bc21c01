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
-- ARGV[10] (optional, added) n, the bridge to the legacy layout: the keys
--         above are the namespaced family (asc:n:<namespace>:{<asset>}:...,
--         same hash tag) and KEYS[n..] the legacy family of the same asset:
--         KEYS[n] lock asc:{<asset>}:lock, KEYS[n+1] fence, KEYS[n+2]
--         ticket:<run>, KEYS[n+3] facts:<run>, KEYS[n+4] retired:<owner>,
--         and KEYS[n+5] ticket:<earlier run> when KEYS[7] is given. n is 7
--         without KEYS[7], 8 with it; KEYS[5] and KEYS[6] are required.
--         Both locks are taken or neither (LOCKED names the one held); the
--         token is drawn above both fences and the floor and stored in
--         both; either tombstone refuses the run; of the two copies of a
--         ticket (each run's and the superseded run's) the newer by
--         (fencing_token, revision) is first copied over the other, facts
--         included, so a run in flight goes on from where an executor of
--         either layout left it; the claimed ticket (and a superseded one
--         failed here) is written to both copies.
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

-- The state machine's tables, generated from its one declaration.
-- BEGIN GENERATED from domain/src/machine.rs by `make generate`: TERMINAL ALERTING
-- The statuses that end a run: nothing is written after them.
local TERMINAL = { FINISHED = true, FAILED = true }
-- The statuses of a run whose high risk is confirmed and that has not
-- ended: it must notify and end before a later run replaces it.
local ALERTING = { HIGH_RISK_FOUND = true, NOTIFYING = true, NOTIFIED = true }
-- END GENERATED

-- The bridge's legacy family, when given.
local legacy
local bridge = tonumber(ARGV[10] or '')
if ARGV[10] and ARGV[10] ~= '' then
  if not ((bridge == 7 and #KEYS == 11) or (bridge == 8 and #KEYS == 13)) then
    return redis.error_reply('BAD_ARGS the legacy keys start at KEYS[7] (KEYS[8] with KEYS[7]) and are 5 (6)')
  end
  legacy = { lock = KEYS[bridge], fence = KEYS[bridge + 1], ticket = KEYS[bridge + 2],
    facts = KEYS[bridge + 3], retired = KEYS[bridge + 4], earlier = KEYS[bridge + 5] }
end
-- The superseded run's ticket: KEYS[7], unless the legacy keys start there.
local earlier_key = KEYS[7]
if bridge == 7 then earlier_key = nil end

-- A stored ticket, decoded; nil when missing, false when corrupt.
local function read(key)
  local found = redis.call('GET', key)
  if not found then return nil end
  local ok, decoded = pcall(cjson.decode, found)
  if not ok or type(decoded) ~= 'table' or type(decoded.status) ~= 'string'
      or type(decoded.fencing_token) ~= 'number' or type(decoded.revision) ~= 'number' then
    return false
  end
  return decoded, found
end

-- Copies the facts hash `from` over `to` (both may be nil or missing).
local function copy_facts(from, to)
  if not from or not to then return end
  redis.call('DEL', to)
  local fields = redis.call('HGETALL', from)
  if #fields > 0 then redis.call('HSET', to, unpack(fields)) end
end

-- The bridge: the newer of a ticket's two copies goes over the other, its
-- expiry and facts with it. Returns an error reply for a corrupt copy.
local function sync(key, facts, legacy_key, legacy_facts)
  local mine, mine_raw = read(key)
  local theirs, theirs_raw = read(legacy_key)
  if mine == false then return redis.error_reply('TICKET_CORRUPT ' .. key) end
  if theirs == false then return redis.error_reply('TICKET_CORRUPT ' .. legacy_key) end
  local from, to, raw_from, from_facts, to_facts
  if theirs and (not mine or theirs.fencing_token > mine.fencing_token
      or (theirs.fencing_token == mine.fencing_token and theirs.revision > mine.revision)) then
    from, to, raw_from, from_facts, to_facts = legacy_key, key, theirs_raw, legacy_facts, facts
  elseif mine and (not theirs or theirs.fencing_token ~= mine.fencing_token
      or theirs.revision ~= mine.revision) then
    from, to, raw_from, from_facts, to_facts = key, legacy_key, mine_raw, facts, legacy_facts
  else
    return nil
  end
  local ttl = redis.call('PTTL', from)
  if ttl > 0 then
    redis.call('SET', to, raw_from, 'PX', ttl)
  else
    redis.call('SET', to, raw_from)
  end
  copy_facts(from_facts, to_facts)
  return nil
end

local retired = KEYS[5] and redis.call('EXISTS', KEYS[5]) == 1
if legacy and not retired then
  retired = redis.call('EXISTS', legacy.retired) == 1
end
if retired then
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', cap, '*',
    'op', 'acquire', 'result', 'RUN_RETIRED', 'ticket', KEYS[3], 'holder', holder, 'at', at)
  return redis.error_reply('RUN_RETIRED ' .. KEYS[3])
end

-- After the tombstones: a retired run's copies are never written again.
if legacy then
  local refused = sync(KEYS[3], KEYS[6], legacy.ticket, legacy.facts)
  if refused then return refused end
  if earlier_key then
    refused = sync(earlier_key, nil, legacy.earlier, nil)
    if refused then return refused end
  end
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

if TERMINAL[ticket.status] then
  return {ticket.fencing_token, raw, facts, current}
end

-- The superseded run, as found: refuse while it alerts, else end it below.
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
  if ALERTING[decoded.status] then
    return redis.error_reply('EARLIER_ALERTING ' .. earlier_key)
  end
  if not TERMINAL[decoded.status] then
    earlier = decoded
  end
end

-- The bridge's legacy lock first: both locks are taken, or neither.
if legacy then
  local legacy_by = redis.call('GET', legacy.lock)
  if legacy_by and legacy_by ~= holder then
    return redis.error_reply('LOCKED ' .. legacy_by .. ' ' .. redis.call('PTTL', legacy.lock))
  end
end
-- Take the lock if free; if it is the caller's already, extend it.
local locked_by = redis.call('SET', KEYS[1], holder, 'NX', 'PX', px, 'GET')
if locked_by == holder then
  redis.call('PEXPIRE', KEYS[1], px)
elseif locked_by then
  return redis.error_reply('LOCKED ' .. locked_by .. ' ' .. redis.call('PTTL', KEYS[1]))
end
if legacy then
  redis.call('SET', legacy.lock, holder, 'PX', px)
end

-- Draws a token above every earlier one (of both fences, with the
-- bridge), the floor and `above`.
local function draw(above)
  local drawn = redis.call('INCR', KEYS[2])
  local counted = drawn
  if legacy then
    drawn = math.max(drawn, redis.call('INCR', legacy.fence))
  end
  if drawn < above + 1 then
    drawn = above + 1
  end
  if drawn ~= counted then
    redis.call('SET', KEYS[2], int(drawn))
  end
  if legacy then
    redis.call('SET', legacy.fence, int(drawn))
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
  local ended = cjson.encode(earlier)
  redis.call('SET', earlier_key, ended, 'KEEPTTL')
  if legacy and redis.call('EXISTS', legacy.earlier) == 1 then
    redis.call('SET', legacy.earlier, ended, 'KEEPTTL')
  end
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
local copies = { { KEYS[3], facts_key, KEYS[2] } }
if legacy then
  copies[2] = { legacy.ticket, legacy.facts, legacy.fence }
end
for _, copy in ipairs(copies) do
  if keep_ticket > 0 then
    redis.call('SET', copy[1], raw, 'PX', int(keep_ticket))
  else
    redis.call('SET', copy[1], raw)
  end
  if copy[2] and ticket.facts_hash == true then
    if keep_ticket > 0 then
      redis.call('PEXPIRE', copy[2], int(keep_ticket))
    else
      redis.call('PERSIST', copy[2])
    end
  end
  if keep_asset > 0 then
    redis.call('PEXPIRE', copy[3], int(keep_asset))
  end
end

redis.call('XADD', KEYS[4], 'MAXLEN', '~', cap, '*',
  'op', 'acquire', 'result', 'ok', 'ticket', KEYS[3], 'holder', holder,
  'token', int(token), 'status', ticket.status, 'revision', int(ticket.revision), 'at', at)
if keep_asset > 0 then
  redis.call('PEXPIRE', KEYS[4], int(keep_asset))
end
return {token, raw, facts, current}
