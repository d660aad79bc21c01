-- retire.lua (added): end an owner's runs for good, creating nothing.
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
-- KEYS[4..] tickets  asc:{<asset>}:ticket:<run> of that owner (missing ones are skipped)
-- ARGV[1] holder id (recorded in the audit stream)
-- ARGV[2] now (unix ms)
-- ARGV[3] ms the tombstone is kept (> 0)
-- ARGV[4] (optional) audit stream cap, default 1000
-- ARGV[5] (optional, added) n, the number of ticket keys: KEYS[4..3+n] are
--         the tickets, and KEYS[4+n..3+2n] their facts hashes
--         asc:{<asset>}:facts:<run>, in the same order, removed with them.
--         Absent: every key from KEYS[4] on is a ticket.
--
-- The fence and the audit stream are then kept at least as long as the
-- tombstone (an expiry is set where they have none or a shorter one).
--
-- Returns the number of tickets removed.
-- Errors: BAD_ARGS <reason>

local holder = ARGV[1]
local now = tonumber(ARGV[2])
local keep = tonumber(ARGV[3])
local cap = tonumber(ARGV[4] or '1000') or 1000
local tickets = tonumber(ARGV[5] or tostring(#KEYS - 3))
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
