-- advance.lua: the only write to a ticket after its claim. Checks, in order,
-- that the ticket exists and parses, that the caller's fencing token is the
-- one the ticket holds, and that the transition is in the table below; then
-- applies the patch and bumps the revision, all in one atomic step.
--
-- KEYS[1] ticket   asc:{<asset>}:ticket:<run>
-- KEYS[2] audit    asc:{<asset>}:audit
-- ARGV[1] caller's fencing token
-- ARGV[2] target status
-- ARGV[3] now (unix ms)
-- ARGV[4] patch JSON: {"facts": {k: v}, "complete_step": s, "attempts": {step: n},
--         "last_error": {...} | null}; every key optional
-- ARGV[5] (optional) ms to keep a ticket once it is terminal, 0 = forever
-- ARGV[6] (optional) audit stream cap, default 1000
-- ARGV[7] (optional, added) ms to keep a ticket that is not terminal after
--         this write, 0 = forever: a run nobody drives any more expires
-- KEYS[3] (optional, added) facts hash asc:{<asset>}:facts:<run>. Given, the
--         facts live there, one field per fact, and the ticket key keeps
--         only the header (no "facts"; "facts_hash": true once it has any).
--         A ticket still holding its facts inside (the older layout) has
--         them moved there by its first write.
-- ARGV[8] (optional, added) '1': return the facts hash with the header
-- ARGV[9], ARGV[10], ... (optional, added) fact name, fact JSON, ...: stored
--         in the facts hash as given (needs KEYS[3]); the script never
--         decodes them, so a write costs the same whatever the facts weigh.
-- KEYS[4] (optional, added) the bridge: the legacy copy of the ticket,
--         asc:{<asset>}:ticket:<run>, when KEYS[1] is the namespaced one
--         (asc:n:<namespace>:{<asset>}:ticket:<run>, same hash tag), and
--         KEYS[5] its facts hash (needs KEYS[3]). The write is accepted only
--         if the legacy copy also holds the caller's token (an executor of
--         the legacy layout that claimed it since makes the caller stale;
--         a copy retired in the legacy layout answers TICKET_NOT_FOUND),
--         and it is written to both copies, facts and expiry included.
--
-- Returns the new ticket JSON; with ARGV[8] '1', {ticket JSON, facts} where
-- facts is the hash as HGETALL gives it. Numbers go through Lua's cjson,
-- which keeps 14 significant digits: exact for tokens, revisions and unix
-- ms below 1e14 (facts given as JSON in ARGV[9..] are stored untouched).
-- Errors: TICKET_NOT_FOUND | TICKET_CORRUPT | STALE_TOKEN <caller> <valid>
--         | ILLEGAL_TRANSITION <from> <to> | BAD_ARGS <reason>
-- Every rejection after the ticket was read is appended to the audit stream.

local caller = tonumber(ARGV[1])
local target = ARGV[2]
local now = tonumber(ARGV[3])
local retention = tonumber(ARGV[5] or '0') or 0
local keep_open = tonumber(ARGV[7] or '0') or 0
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
local cap = int(tonumber(ARGV[6] or '1000') or 1000)
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
    'op', 'advance', 'result', reason, 'ticket', KEYS[1], 'token', ARGV[1],
    'valid', int(ticket.fencing_token), 'from', ticket.status, 'to', target,
    'revision', int(ticket.revision), 'at', at)
  return redis.error_reply(reply)
end

if caller ~= ticket.fencing_token then
  return reject('STALE_TOKEN ' .. ARGV[1] .. ' ' .. ticket.fencing_token, 'STALE_TOKEN')
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
    return reject('STALE_TOKEN ' .. ARGV[1] .. ' ' .. legacy.fencing_token, 'STALE_TOKEN')
  end
end
if not allowed(ticket.status, target) then
  return reject('ILLEGAL_TRANSITION ' .. ticket.status .. ' ' .. target, 'ILLEGAL_TRANSITION')
end

local pok, patch = pcall(cjson.decode, ARGV[4] or '{}')
if not pok or type(patch) ~= 'table' then
  return reject('BAD_ARGS patch is not a JSON object', 'BAD_ARGS')
end
for key, _ in pairs(patch) do
  if key ~= 'facts' and key ~= 'complete_step' and key ~= 'attempts' and key ~= 'last_error' then
    return reject('BAD_ARGS unknown patch key ' .. tostring(key), 'BAD_ARGS')
  end
end
if #ARGV > 8 and (not facts_key or #ARGV % 2 ~= 0) then
  return reject('BAD_ARGS fact JSON needs the facts hash key and name, JSON pairs', 'BAD_ARGS')
end

-- Facts: with a facts hash, one HSET of the fields that change; without
-- one (a caller of the older contract), merged into the ticket as before.
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
for i = 9, #ARGV, 2 do
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
  'op', 'advance', 'result', 'ok', 'ticket', KEYS[1], 'token', ARGV[1],
  'from', from, 'to', target, 'revision', int(ticket.revision), 'at', at)
if ARGV[8] == '1' then
  local facts = {}
  if facts_key and ticket.facts_hash == true then
    facts = redis.call('HGETALL', facts_key)
  end
  return {raw, facts}
end
return raw
