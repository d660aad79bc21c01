-- retire.lua: end an owner's runs for good, creating nothing.
--
-- The owner is what the runs belong to (the AssetScan object, by its uid).
-- Once it is gone, none of its runs may start again: this script leaves a
-- tombstone that acquire.lua (given it as KEYS[5]) answers with RUN_RETIRED,
-- and removes the tickets it is given. A ticket still in progress is failed
-- under a freshly drawn token before it goes, so the audit stream says who
-- ended it; a terminal one is removed as it is, its history unchanged.
-- Running it twice, or concurrently from two callers, is harmless: a ticket
-- already removed is skipped, and nothing is ever created.
--
-- KEYS[1] fence      asc:{<asset>}:fence
-- KEYS[2] audit      asc:{<asset>}:audit
-- KEYS[3] tombstone  asc:{<asset>}:retired:<owner>
-- KEYS[4..3+n]       tickets asc:{<asset>}:ticket:<run> of that owner
--                    (missing ones are skipped)
-- KEYS[4+n..3+2n]    their facts hashes asc:{<asset>}:facts:<run>, in the
--                    same order, removed with them
--
-- ARGV[1] the argument object, JSON, version 1:
--   v             1
--   holder        holder id, recorded in the audit stream (a non-empty string)
--   now           unix ms
--   tombstone_ms  ms the tombstone is kept (> 0)
--   tickets       n, the number of tickets
--   audit_cap     (optional) audit stream cap, default 1000
-- An unknown field or version, a field of the wrong kind, a missing one or
-- KEYS that are not 3 + 2n are BAD_ARGS.
--
-- Deprecated, removed in 0.3.0: the positional form of 0.1.0, taken when
-- ARGV[1] does not start with '{'. ARGV: holder, now, tombstone ms, then
-- optionally audit cap and n; without n every key from KEYS[4] on is a
-- ticket (no facts hashes).
--
-- The fence and the audit stream are then kept at least as long as the
-- tombstone (an expiry is set where they have none or a shorter one).
--
-- Returns the number of tickets removed.
-- Errors: BAD_ARGS <reason>

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
  holder = 'a non-empty string', now = 'an integer >= 0', tombstone_ms = 'an integer >= 0',
  tickets = 'an integer >= 0', audit_cap = 'an integer >= 0',
}

-- Version 1.
local function object()
  local args, wrong = decode_args(FIELDS, { 'holder', 'now', 'tombstone_ms', 'tickets' })
  if not args then return nil, wrong end
  if #KEYS ~= 3 + 2 * args.tickets then
    return nil, (3 + 2 * args.tickets) .. ' KEYS expected for ' .. args.tickets
      .. ' tickets and their facts, ' .. #KEYS .. ' given'
  end
  return args
end

-- The positional form of 0.1.0 (deprecated, removed in 0.3.0), as the
-- same table.
local function positional()
  return {
    holder = ARGV[1], now = tonumber(ARGV[2]), tombstone_ms = tonumber(ARGV[3]),
    audit_cap = tonumber(ARGV[4] or '1000'), tickets = tonumber(ARGV[5] or tostring(#KEYS - 3)),
  }
end

local args, wrong = arguments(object, positional)
if not args then
  return redis.error_reply('BAD_ARGS ' .. wrong)
end
local holder = args.holder
local now = args.now
local keep = args.tombstone_ms
local cap = args.audit_cap or 1000
local tickets = args.tickets
if holder == nil or holder == '' or now == nil or keep == nil or keep <= 0 or KEYS[3] == nil then
  return redis.error_reply('BAD_ARGS holder, now, a tombstone key and its ms > 0 are required')
end
if tickets == nil or tickets < 0 or (#KEYS - 3 ~= tickets and #KEYS - 3 ~= 2 * tickets) then
  return redis.error_reply('BAD_ARGS n must count the tickets, with one facts hash each or none')
end
local with_facts = tickets > 0 and #KEYS - 3 == 2 * tickets

-- The state machine's table, generated from its one declaration.
-- BEGIN GENERATED from domain/src/machine.rs by `make generate`: TERMINAL
-- The statuses that end a run: nothing is written after them.
local TERMINAL = { FINISHED = true, FAILED = true }
-- END GENERATED

redis.call('SET', KEYS[3], now, 'PX', keep)

local removed = 0
for i = 4, 3 + tickets do
  local raw = redis.call('GET', KEYS[i])
  if raw then
    local ok, ticket = pcall(cjson.decode, raw)
    if not ok or type(ticket) ~= 'table' or type(ticket.status) ~= 'string'
        or type(ticket.fencing_token) ~= 'number' or type(ticket.revision) ~= 'number' then
      redis.call('XADD', KEYS[2], 'MAXLEN', '~', cap, '*',
        'op', 'retire', 'result', 'ok', 'ticket', KEYS[i], 'holder', holder,
        'corrupt', '1', 'at', now)
    elseif TERMINAL[ticket.status] then
      redis.call('XADD', KEYS[2], 'MAXLEN', '~', cap, '*',
        'op', 'retire', 'result', 'ok', 'ticket', KEYS[i], 'holder', holder,
        'token', ticket.fencing_token, 'status', ticket.status,
        'revision', ticket.revision, 'at', now)
    else
      local token = redis.call('INCR', KEYS[1])
      if token <= ticket.fencing_token then
        token = ticket.fencing_token + 1
        redis.call('SET', KEYS[1], token)
      end
      redis.call('XADD', KEYS[2], 'MAXLEN', '~', cap, '*',
        'op', 'retire', 'result', 'ok', 'ticket', KEYS[i], 'holder', holder,
        'token', token, 'from', ticket.status, 'status', 'FAILED',
        'revision', ticket.revision + 1, 'at', now)
    end
    redis.call('DEL', KEYS[i])
    removed = removed + 1
  end
  if with_facts then
    redis.call('DEL', KEYS[i + tickets])
  end
end

redis.call('XADD', KEYS[2], 'MAXLEN', '~', cap, '*',
  'op', 'retire', 'result', 'ok', 'tombstone', KEYS[3], 'holder', holder,
  'removed', removed, 'at', now)

-- The fence and the audit stream outlive the tombstone at least: a key
-- without an expiry (the stream this script may just have created, or a
-- store that keeps history forever) gets one, so nothing of a deleted
-- owner stays forever. A live owner's next acquire sets its own expiry.
for _, key in ipairs({ KEYS[1], KEYS[2] }) do
  local ttl = redis.call('PTTL', key)
  if ttl == -1 or (ttl >= 0 and ttl < keep) then
    redis.call('PEXPIRE', key, keep)
  end
end
return removed
