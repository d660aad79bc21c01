-- advance.lua: the only write to a ticket after its claim. Checks, in order,
-- that the ticket exists and parses, that the caller's fencing token is the
-- one the ticket holds, and that the transition is in the table below; then
-- applies the patch and bumps the revision, all in one atomic step.
--
-- KEYS[1] ticket   asc:{<asset>}:ticket:<run>
-- KEYS[2] audit    asc:{<asset>}:audit
-- KEYS[3] facts    asc:{<asset>}:facts:<run>: the facts live there, one
--         field per fact, and the ticket key keeps only the header (no
--         "facts"; "facts_hash": true once it has any). A ticket still
--         holding its facts inside (the older layout) has them moved there
--         by its first write.
-- KEYS[4], KEYS[5] with "bridge": the legacy copy of the ticket,
--         asc:{<asset>}:ticket:<run>, when KEYS[1] is the namespaced one
--         (asc:n:<namespace>:{<asset>}:ticket:<run>, same hash tag), and its
--         facts hash. The write is accepted only if the legacy copy also
--         holds the caller's token (an executor of the legacy layout that
--         claimed it since makes the caller stale; a copy retired in the
--         legacy layout answers TICKET_NOT_FOUND), and it is written to both
--         copies, facts and expiry included.
--
-- ARGV[1] the argument object, JSON, version 1:
--   v                 1
--   token             the caller's fencing token (integer >= 0)
--   to                target status
--   now               unix ms
--   patch             (optional) {"complete_step": s, "attempts": {step: n},
--                     "last_error": {...} | null}, every key optional
--   keep_terminal_ms  (optional) ms to keep a ticket once it is terminal;
--                     0 (the default): forever
--   keep_open_ms      (optional) ms to keep a ticket that is not terminal
--                     after this write; 0 (the default): forever. A run
--                     nobody drives any more expires
--   audit_cap         (optional) audit stream cap, default 1000
--   return_facts      (optional) true: return the facts hash with the header
--   bridge            (optional) true: KEYS[4] and KEYS[5] are given
-- ARGV[2], ARGV[3], ... fact name, fact JSON, ...: stored in the facts hash
--         as given; the script never decodes them, so a write costs the same
--         whatever the facts weigh (which is why they are not in ARGV[1]).
-- An unknown field or version, a field of the wrong kind, a missing one or
-- KEYS that do not match "bridge" are BAD_ARGS.
--
-- Deprecated, removed in 0.3.0: the positional form of 0.1.0, taken when
-- ARGV[1] does not start with '{'. ARGV: token, target status, now, patch
-- JSON (which may hold "facts": {name: value}), then optionally
-- keep_terminal_ms, audit cap, keep_open_ms, '1' to return the facts, and
-- fact name, fact JSON pairs from ARGV[9] (they need KEYS[3]); KEYS[3] and
-- the bridge's KEYS[4], KEYS[5] optional. Without KEYS[3] the facts of the
-- patch are merged into the ticket's JSON (the layout before the facts
-- hash).
--
-- Returns the new ticket JSON; with "return_facts", {ticket JSON, facts}
-- where facts is the hash as HGETALL gives it. Numbers go through Lua's
-- cjson, which keeps 14 significant digits: exact for tokens, revisions and
-- unix ms below 1e14 (facts given as JSON in ARGV are stored untouched).
-- Errors: TICKET_NOT_FOUND | TICKET_CORRUPT | STALE_TOKEN <caller> <valid>
--         | ILLEGAL_TRANSITION <from> <to> | BAD_ARGS <reason>
-- Every rejection after the ticket was read is appended to the audit stream.

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
  token = 'an integer >= 0', to = 'a non-empty string', now = 'an integer >= 0',
  patch = 'a JSON object', keep_terminal_ms = 'an integer >= 0',
  keep_open_ms = 'an integer >= 0', audit_cap = 'an integer >= 0',
  return_facts = 'a boolean', bridge = 'a boolean',
}

-- Version 1; its facts start at ARGV[2].
local function object()
  local args, wrong = decode_args(FIELDS, { 'token', 'to', 'now' })
  if not args then return nil, wrong end
  local expected = args.bridge and 5 or 3
  if #KEYS ~= expected then
    return nil, expected .. ' KEYS expected with bridge as given, ' .. #KEYS .. ' given'
  end
  args.patch = args.patch or {}
  args.first_fact = 2
  return args
end

-- The positional form of 0.1.0 (deprecated, removed in 0.3.0), as the
-- same table. A patch that does not decode is refused after the ticket is
-- read (and audited), as before; its facts are accepted only here.
local function positional()
  local ok, patch = pcall(cjson.decode, ARGV[4] or '{}')
  return {
    token = tonumber(ARGV[1]), to = ARGV[2], now = tonumber(ARGV[3]),
    patch = ok and patch, facts_in_patch = true,
    keep_terminal_ms = tonumber(ARGV[5] or '0'), audit_cap = tonumber(ARGV[6] or '1000'),
    keep_open_ms = tonumber(ARGV[7] or '0'), return_facts = ARGV[8] == '1',
    first_fact = 9, token_text = ARGV[1],
  }
end

local args, wrong = arguments(object, positional)
if not args then
  return redis.error_reply('BAD_ARGS ' .. wrong)
end
local caller = args.token
local target = args.to
local now = args.now
local retention = args.keep_terminal_ms or 0
local keep_open = args.keep_open_ms or 0
local facts_key = KEYS[3]
if caller == nil or target == nil or now == nil then
  return redis.error_reply('BAD_ARGS token, target status and now are required')
end

-- Numbers reach Redis commands as integer strings: Lua's own conversion of
-- a number (%.14g, through the C library's exact float printing) costs as
-- much as a command.
local function int(n)
  return string.format('%d', n)
end
local cap = int(args.audit_cap or 1000)
local caller_text = args.token_text or int(caller)
local at = int(now)

-- The state machine's tables, generated from its one declaration.
-- BEGIN GENERATED from domain/src/machine.rs by `make generate`: NEXT TERMINAL
-- Each status and the statuses a write may move it to: itself and
-- FAILED for every status that has not ended, and the declared moves.
local NEXT = {
  INIT = { INIT = true, ASSET_ONLINE = true, ASSET_OFFLINE = true, FAILED = true },
  ASSET_ONLINE = { ASSET_ONLINE = true, VULN_CHECK_DONE = true, FAILED = true },
  ASSET_OFFLINE = { ASSET_OFFLINE = true, FINISHED = true, FAILED = true },
  VULN_CHECK_DONE = { VULN_CHECK_DONE = true, HIGH_RISK_FOUND = true, FINISHED = true, FAILED = true },
  HIGH_RISK_FOUND = { HIGH_RISK_FOUND = true, NOTIFYING = true, FAILED = true },
  NOTIFYING = { NOTIFYING = true, NOTIFIED = true, FAILED = true },
  NOTIFIED = { NOTIFIED = true, FINISHED = true, FAILED = true },
  FINISHED = {},
  FAILED = {},
}
-- The statuses that end a run: nothing is written after them.
local TERMINAL = { FINISHED = true, FAILED = true }
-- END GENERATED
local function allowed(from, to)
  local row = NEXT[from]
  return row ~= nil and row[to] == true
end

local raw = redis.call('GET', KEYS[1])
if not raw then
  return redis.error_reply('TICKET_NOT_FOUND ' .. KEYS[1])
end
local ok, ticket = pcall(cjson.decode, raw)
if not ok or type(ticket) ~= 'table' or type(ticket.status) ~= 'string'
    or type(ticket.fencing_token) ~= 'number' or type(ticket.revision) ~= 'number' then
  return redis.error_reply('TICKET_CORRUPT ' .. KEYS[1])
end

local function reject(reply, reason)
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', cap, '*',
    'op', 'advance', 'result', reason, 'ticket', KEYS[1], 'token', caller_text,
    'valid', int(ticket.fencing_token), 'from', ticket.status, 'to', target,
    'revision', int(ticket.revision), 'at', at)
  return redis.error_reply(reply)
end

if caller ~= ticket.fencing_token then
  return reject('STALE_TOKEN ' .. caller_text .. ' ' .. ticket.fencing_token, 'STALE_TOKEN')
end
local legacy_key, legacy_facts = KEYS[4], KEYS[5]
if legacy_key then
  local copy = redis.call('GET', legacy_key)
  if not copy then
    return redis.error_reply('TICKET_NOT_FOUND ' .. legacy_key)
  end
  local cok, legacy = pcall(cjson.decode, copy)
  if not cok or type(legacy) ~= 'table' or type(legacy.fencing_token) ~= 'number' then
    return redis.error_reply('TICKET_CORRUPT ' .. legacy_key)
  end
  if caller ~= legacy.fencing_token then
    ticket.fencing_token = legacy.fencing_token
    return reject('STALE_TOKEN ' .. caller_text .. ' ' .. legacy.fencing_token, 'STALE_TOKEN')
  end
end
if not allowed(ticket.status, target) then
  return reject('ILLEGAL_TRANSITION ' .. ticket.status .. ' ' .. target, 'ILLEGAL_TRANSITION')
end

local patch = args.patch
if type(patch) ~= 'table' then
  return reject('BAD_ARGS patch is not a JSON object', 'BAD_ARGS')
end
for key, _ in pairs(patch) do
  if not (key == 'complete_step' or key == 'attempts' or key == 'last_error'
      or (key == 'facts' and args.facts_in_patch)) then
    return reject('BAD_ARGS unknown patch key ' .. tostring(key), 'BAD_ARGS')
  end
end
local sent = #ARGV - args.first_fact + 1
if sent > 0 and (not facts_key or sent % 2 ~= 0) then
  return reject('BAD_ARGS fact JSON needs the facts hash key and name, JSON pairs', 'BAD_ARGS')
end

-- Facts: with a facts hash, one HSET of the fields that change; without
-- one (the positional form without KEYS[3], deprecated), merged into the
-- ticket's JSON.
local fields = {}
local function store_fact(name, json)
  fields[#fields + 1] = name
  fields[#fields + 1] = json
end
if facts_key and type(ticket.facts) == 'table' then
  for name, value in pairs(ticket.facts) do
    if value ~= cjson.null then store_fact(name, cjson.encode(value)) end
  end
  ticket.facts = nil
end
if type(patch.facts) == 'table' then
  if facts_key then
    for name, value in pairs(patch.facts) do store_fact(name, cjson.encode(value)) end
  else
    if type(ticket.facts) ~= 'table' then ticket.facts = {} end
    for k, v in pairs(patch.facts) do ticket.facts[k] = v end
  end
end
for i = args.first_fact, #ARGV, 2 do
  store_fact(ARGV[i], ARGV[i + 1])
end
if #fields > 0 then
  redis.call('HSET', facts_key, unpack(fields))
  if legacy_facts then
    redis.call('HSET', legacy_facts, unpack(fields))
  end
  ticket.facts_hash = true
end

if type(patch.attempts) == 'table' then
  if type(ticket.attempts) ~= 'table' then ticket.attempts = {} end
  for k, v in pairs(patch.attempts) do ticket.attempts[k] = v end
end
if type(patch.complete_step) == 'string' then
  if type(ticket.completed_steps) ~= 'table' then ticket.completed_steps = {} end
  local seen = false
  for _, s in ipairs(ticket.completed_steps) do
    if s == patch.complete_step then seen = true end
  end
  if not seen then table.insert(ticket.completed_steps, patch.complete_step) end
end
if patch.last_error ~= nil then
  ticket.last_error = patch.last_error
end

local from = ticket.status
ticket.status = target
ticket.revision = ticket.revision + 1
ticket.updated_at = now
raw = cjson.encode(ticket)
local keep = keep_open
if TERMINAL[target] then keep = retention end
local copies = { { KEYS[1], facts_key } }
if legacy_key then copies[2] = { legacy_key, legacy_facts } end
for _, copy in ipairs(copies) do
  if keep > 0 then
    redis.call('SET', copy[1], raw, 'PX', int(keep))
  else
    redis.call('SET', copy[1], raw)
  end
  -- The facts hash lives exactly as long as its ticket.
  if copy[2] and ticket.facts_hash == true then
    if keep > 0 then
      redis.call('PEXPIRE', copy[2], int(keep))
    else
      redis.call('PERSIST', copy[2])
    end
  end
end

redis.call('XADD', KEYS[2], 'MAXLEN', '~', cap, '*',
  'op', 'advance', 'result', 'ok', 'ticket', KEYS[1], 'token', caller_text,
  'from', from, 'to', target, 'revision', int(ticket.revision), 'at', at)
if args.return_facts then
  local facts = {}
  if facts_key and ticket.facts_hash == true then
    facts = redis.call('HGETALL', facts_key)
  end
  return {raw, facts}
end
return raw
