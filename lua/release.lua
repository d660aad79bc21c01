-- release.lua: give the lock up, only if the caller holds it.
--
-- KEYS[1] lock     asc:{<asset>}:lock
-- KEYS[2] audit    asc:{<asset>}:audit: records the release
-- KEYS[3] with "bridge": the legacy lock asc:{<asset>}:lock, taken with the
--         namespaced one KEYS[1]: released with it, under the same rule
--         (only if the caller holds it).
--
-- ARGV[1] the argument object, JSON, version 1:
--   v          1
--   holder     holder id (a non-empty string)
--   now        unix ms, for the audit record
--   audit_cap  (optional) audit stream cap, default 1000
--   bridge     (optional) true: KEYS[3] is given
-- An unknown field or version, a field of the wrong kind, a missing one or
-- KEYS that do not match "bridge" are BAD_ARGS.
--
-- Deprecated, removed in 0.3.0: the positional form of 0.1.0, taken when
-- ARGV[1] does not start with '{'. ARGV: holder, then optionally now and
-- audit cap; KEYS[2] optional (without it the release is not audited),
-- KEYS[3] the legacy lock.
--
-- Returns 1 if released, 0 if not the owner (never deletes another's lock).
-- Errors: BAD_ARGS <reason> (the argument object only)

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
  holder = 'a non-empty string', now = 'an integer >= 0',
  audit_cap = 'an integer >= 0', bridge = 'a boolean',
}

-- Version 1.
local function object()
  local args, wrong = decode_args(FIELDS, { 'holder', 'now' })
  if not args then return nil, wrong end
  local expected = args.bridge and 3 or 2
  if #KEYS ~= expected then
    return nil, expected .. ' KEYS expected with bridge as given, ' .. #KEYS .. ' given'
  end
  return args
end

-- The positional form of 0.1.0 (deprecated, removed in 0.3.0), as the
-- same table.
local function positional()
  return {
    holder = ARGV[1], now = tonumber(ARGV[2] or '0') or 0, audit_cap = tonumber(ARGV[3] or '1000'),
  }
end

local args, wrong = arguments(object, positional)
if not args then
  return redis.error_reply('BAD_ARGS ' .. wrong)
end
local holder = args.holder
-- Integer strings: Lua's own number conversion (%.14g) costs a command.
local function int(n)
  return string.format('%d', n)
end

if KEYS[3] and redis.call('GET', KEYS[3]) == holder then
  redis.call('DEL', KEYS[3])
end
if redis.call('GET', KEYS[1]) == holder then
  redis.call('DEL', KEYS[1])
  if KEYS[2] then
    redis.call('XADD', KEYS[2], 'MAXLEN', '~', int(args.audit_cap or 1000), '*',
      'op', 'release', 'result', 'ok', 'holder', holder, 'at', int(args.now))
  end
  return 1
end
return 0
