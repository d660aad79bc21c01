--! The argument object's decoder, generated into every script of lua/ that
--! takes one (Redis loads each script alone, so each carries its own copy):
--! `make generate` writes it between the scripts' markers, and
--! `domain/tests/generated.rs` fails when a copy differs from this file.
--! Not a script of its own; the lines that start with `--!` stay here.
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
