-- acquire.lua: take the asset's lock and claim its ticket with a new fencing token.
--
-- KEYS[1] lock      asc:{<asset>}:lock
-- KEYS[2] fence     asc:{<asset>}:fence
-- KEYS[3] ticket    asc:{<asset>}:ticket:<run>
-- KEYS[4] audit     asc:{<asset>}:audit
-- KEYS[5] tombstone asc:{<asset>}:retired:<owner>: the run belongs to that
--         owner; once retire.lua has retired the owner, the run is refused
--         (and the refusal audited) instead of created. A run of no owner
--         names a key that never exists (asc:{<asset>}:retired:).
-- KEYS[6] facts     asc:{<asset>}:facts:<run>: one field per fact, its value
--         the fact's JSON as written. It expires with the ticket, and its
--         fields come back with the claim.
-- KEYS[7] with "supersedes": the ticket asc:{<asset>}:ticket:<earlier run>
--         of a run this claim supersedes (an earlier spec generation's run
--         of the same owner that has not ended). Checked only when the
--         claimed run has not ended: if that ticket is alerting
--         (HIGH_RISK_FOUND, NOTIFYING or NOTIFIED) nothing is taken or
--         written and the claim is refused with EARLIER_ALERTING, since that
--         run must finish (and notify) first; if it is in progress
--         otherwise, it is failed in this same step under a freshly drawn
--         token (drawn before the claim's, so lower), so its executor's next
--         write is refused and no risk can be confirmed under it afterwards.
--         A missing or ended ticket is left as it is. Its expiry is kept.
-- KEYS[n..] with "bridge": the legacy family of the same asset, the keys
--         above being the namespaced one (asc:n:<namespace>:{<asset>}:...,
--         same hash tag): KEYS[n] lock asc:{<asset>}:lock, KEYS[n+1] fence,
--         KEYS[n+2] ticket:<run>, KEYS[n+3] facts:<run>, KEYS[n+4]
--         retired:<owner>, and KEYS[n+5] ticket:<earlier run> with
--         "supersedes"; n is 7, or 8 with "supersedes". Both locks are taken
--         or neither (LOCKED names the one held); the token is drawn above
--         both fences and the floor and stored in both; either tombstone
--         refuses the run; of the two copies of a ticket (each run's and the
--         superseded run's) the newer by (fencing_token, revision) is first
--         copied over the other, facts included, so a run in flight goes on
--         from where an executor of either layout left it; the claimed
--         ticket (and a superseded one failed here) is written to both.
-- KEYS[n] with "refuse_legacy_ms": 0.1.0's lock of the same asset,
--         asc:{<asset>}:lock, the keys above being the namespaced family;
--         n is 7, or 8 with "supersedes". For a deployment that turned the
--         bridge off after an upgrade from 0.1.0: 0.1.0 is refused on the
--         asset instead of taking the legacy lock beside this release's
--         namespaced one. Held by anyone but the closed marker (a 0.1.0
--         executor), the claim is refused with LOCKED naming that holder;
--         else, once the namespaced lock is taken, the legacy lock is set to
--         the closed marker, CLOSED below, for refuse_legacy_ms (at least
--         ttl_ms): 0.1.0's claim (SET NX) then answers LOCKED with that
--         holder, before it writes anything but the audit record of a
--         retired run. Nothing else of the legacy family is read or written.
--         The bridge takes a lock held by the marker as free and writes its
--         holder over it; a claim of the legacy family (0.1.0's, or this
--         release's of no namespace) finds it held.
--
-- ARGV[1] the argument object, JSON, version 1:
--   v               1
--   holder          holder id (a non-empty string)
--   ttl_ms          lock ttl (ms, > 0)
--   floor           token floor (integer >= 0): the newest token known
--                   outside Redis
--   now             unix ms
--   initial         the ticket (a JSON object) created when it does not exist
--   audit_cap       (optional) audit stream cap, default 1000
--   keep_ticket_ms  (optional) ms a non-terminal ticket is kept after this
--                   claim; 0 (the default): until it ends or is deleted
--   keep_asset_ms   (optional) ms the asset's fence and audit stream are kept
--                   after this claim; 0 (the default): forever
--   known           (optional) {"token": t, "revision": r} of the copy of the
--                   ticket the caller already holds (read just before): if
--                   the ticket is still there, the facts are not sent back
--   supersedes      (optional) true: KEYS[7] is a superseded run's ticket
--   bridge          (optional) true: the legacy family follows (see KEYS[n..])
--   refuse_legacy_ms (optional) > 0: 0.1.0's lock follows (see KEYS[n]) and
--                   is held by the closed marker for this many ms after the
--                   claim; 0 (the default): no such key. Not with "bridge".
-- An unknown field or version, a field of the wrong kind, a missing one or
-- KEYS that do not match "supersedes", "bridge" and "refuse_legacy_ms" are
-- BAD_ARGS.
--
-- Deprecated, removed in 0.3.0: the positional form of 0.1.0, taken when
-- ARGV[1] does not start with '{'. ARGV: holder, ttl, floor, now, initial
-- ticket JSON, then optionally audit cap, keep_ticket_ms, keep_asset_ms,
-- "<token>:<revision>" of the known copy, and the index n of the legacy
-- keys; KEYS[5], KEYS[6] and KEYS[7] optional (KEYS[7] is the superseded
-- run's ticket unless n is 7). Without KEYS[6] no facts come back.
--
-- Returns {token, ticket JSON, facts, current}: facts is the facts hash as
-- HGETALL gives it (name, JSON, name, JSON, ...), empty when there is none
-- or the caller's copy is current; current is 1 when that copy ("known") is
-- the ticket as found, else 0.
-- Errors: LOCKED <holder> <pttl> | TICKET_CORRUPT <reason> | BAD_ARGS <reason>
--         | RUN_RETIRED <ticket key> | EARLIER_ALERTING <earlier ticket key>
--
-- The ticket is claimed here, not at the first write: from this moment on a
-- previous holder's token no longer matches and every write it tries fails.
-- A terminal ticket is returned as found, with its own token, and nothing is
-- taken or written, also while another run holds the lock: a run that
-- ended needs no lock. The facts are never decoded here: the claim costs
-- the same whatever the ticket has learned.

-- BEGIN GENERATED from lua/lib/arguments.lua by `make generate`: ARGUMENTS
-- The argument object (lua/lib/arguments.lua). `fields` names each field
-- of version 1 with the kind of value it takes; `required` lists those that
-- must be there. Returns the decoded ARGV[1], or nil and what is wrong with
-- it.
local KINDS = {
  ['a non-empty string'] = function(x) return type(x) == 'string' and x ~= '' end,
  ['an integer >= 0'] = function(x) return type(x) == 'number' and x >= 0 and x == math.floor(x) end,
  ['a boolean'] = function(x) return type(x) == 'boolean' end,
  ['a JSON object'] = function(x) return type(x) == 'table' end,
}
local function decode_args(fields, required)
  local ok, args = pcall(cjson.decode, ARGV[1])
  if not ok or type(args) ~= 'table' then
    return nil, 'ARGV[1] is not a JSON object'
  end
  if args.v ~= 1 then
    return nil, 'argument version ' .. tostring(args.v) .. ' is unknown (this script knows 1)'
  end
  for name, value in pairs(args) do
    local kind = fields[name]
    if name ~= 'v' and kind == nil then
      return nil, 'unknown argument ' .. tostring(name)
    end
    if name ~= 'v' and not KINDS[kind](value) then
      return nil, name .. ' must be ' .. kind
    end
  end
  for _, name in ipairs(required) do
    if args[name] == nil then return nil, name .. ' is required' end
  end
  return args
end
-- The arguments of this call: the argument object, or (deprecated, until
-- 0.3.0) the positional form of 0.1.0, each read by the script's own
-- function; nil and what is wrong when they cannot be used.
local function arguments(object, positional)
  if string.sub(ARGV[1] or '', 1, 1) == '{' then
    return object()
  end
  return positional()
end
-- END GENERATED

local FIELDS = {
  holder = 'a non-empty string', ttl_ms = 'an integer >= 0', floor = 'an integer >= 0',
  now = 'an integer >= 0', initial = 'a JSON object', audit_cap = 'an integer >= 0',
  keep_ticket_ms = 'an integer >= 0', keep_asset_ms = 'an integer >= 0',
  known = 'a JSON object', supersedes = 'a boolean', bridge = 'a boolean',
  refuse_legacy_ms = 'an integer >= 0',
}

-- The holder a claim with "refuse_legacy_ms" leaves on 0.1.0's lock: what
-- a 0.1.0 replica reports as the asset's holder (LOCKED <holder> <pttl>),
-- so it says why and where to read on. Without spaces: LOCKED's words are
-- split on them. src/store/layout.rs names the same string.
local CLOSED = 'closed:identityBridge-off:see-docs/upgrading.md'

-- Version 1, with where the legacy keys start (nil without the bridge)
-- and where 0.1.0's lock is (nil without "refuse_legacy_ms").
local function object()
  local args, wrong = decode_args(FIELDS, { 'holder', 'ttl_ms', 'floor', 'now', 'initial' })
  if not args then return nil, wrong end
  local known = args.known
  if known and not (KINDS['an integer >= 0'](known.token)
      and KINDS['an integer >= 0'](known.revision)) then
    return nil, 'known must be {"token": integer, "revision": integer}'
  end
  local own = args.supersedes and 7 or 6
  local expected = own
  if args.bridge then
    args.bridge_at = own + 1
    expected = own + (args.supersedes and 6 or 5)
  end
  local given = 'supersedes and bridge'
  if (args.refuse_legacy_ms or 0) > 0 then
    if args.bridge then
      return nil, 'refuse_legacy_ms goes without bridge (the bridge takes the legacy lock itself)'
    end
    args.refused_at = own + 1
    expected = own + 1
    given = 'supersedes, bridge and refuse_legacy_ms'
  end
  if #KEYS ~= expected then
    return nil, expected .. ' KEYS expected with ' .. given .. ' as given, ' .. #KEYS .. ' given'
  end
  return args
end

-- The positional form of 0.1.0 (deprecated, removed in 0.3.0), as the
-- same table; the initial ticket stays JSON, decoded only when needed.
local function positional()
  local token, revision = string.match(ARGV[9] or '', '^(%d+):(%d+)$')
  local bridge_at = tonumber(ARGV[10] or '')
  if ARGV[10] and ARGV[10] ~= '' and not ((bridge_at == 7 and #KEYS == 11)
      or (bridge_at == 8 and #KEYS == 13)) then
    return nil, 'the legacy keys start at KEYS[7] (KEYS[8] with KEYS[7]) and are 5 (6)'
  end
  return {
    holder = ARGV[1], ttl_ms = tonumber(ARGV[2]), floor = tonumber(ARGV[3]),
    now = tonumber(ARGV[4]), initial_json = ARGV[5] or '',
    audit_cap = tonumber(ARGV[6] or '1000'), keep_ticket_ms = tonumber(ARGV[7] or '0'),
    keep_asset_ms = tonumber(ARGV[8] or '0'),
    known = token and { token = tonumber(token), revision = tonumber(revision) },
    supersedes = KEYS[7] ~= nil and bridge_at ~= 7, bridge_at = bridge_at,
  }
end

local args, wrong = arguments(object, positional)
if not args then
  return redis.error_reply('BAD_ARGS ' .. wrong)
end
local holder, ttl, floor, now = args.holder, args.ttl_ms, args.floor, args.now
local keep_ticket = args.keep_ticket_ms or 0
local keep_asset = args.keep_asset_ms or 0
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
local cap = int(args.audit_cap or 1000)
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
local bridge = args.bridge_at
if bridge then
  legacy = { lock = KEYS[bridge], fence = KEYS[bridge + 1], ticket = KEYS[bridge + 2],
    facts = KEYS[bridge + 3], retired = KEYS[bridge + 4], earlier = KEYS[bridge + 5] }
end
-- The superseded run's ticket.
local earlier_key = args.supersedes and KEYS[7] or nil
-- 0.1.0's lock, refused to 0.1.0: the bridge's, or refuse_legacy_ms's.
local legacy_lock = (legacy and legacy.lock) or (args.refused_at and KEYS[args.refused_at])

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
  local ok, decoded = true, args.initial
  if not decoded then ok, decoded = pcall(cjson.decode, args.initial_json) end
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
local known = args.known
if raw and known and known.token == ticket.fencing_token and known.revision == ticket.revision then
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

-- The legacy lock first: with the bridge both locks are taken, or
-- neither; refusing 0.1.0, a 0.1.0 executor that holds it is waited for.
-- The closed marker holds it for nobody.
if legacy_lock then
  local legacy_by = redis.call('GET', legacy_lock)
  if legacy_by and legacy_by ~= holder and legacy_by ~= CLOSED then
    return redis.error_reply('LOCKED ' .. legacy_by .. ' ' .. redis.call('PTTL', legacy_lock))
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
elseif legacy_lock then
  redis.call('SET', legacy_lock, CLOSED, 'PX', int(math.max(args.refuse_legacy_ms, ttl)))
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
