-- Argo CD health of an assetscan.io/AssetScan.
--
-- The status mirrors the scan ticket of the object's current run (see the
-- operator's docs/assetscan.md). Health describes the operator's work, never the
-- asset: a finished run is Healthy whatever its verdict, and a confirmed
-- high risk shows in the message (and in the HighRisk condition), not as
-- Degraded. In order:
--   Degraded     the current generation's run ended FAILED, or Stalled=True
--                about the current generation (e.g. Redis unavailable);
--   Suspended    spec.suspend is set and no run is under way;
--   Progressing  no run yet, the operator has not seen the latest spec, a run
--                of an earlier generation is finishing first, or a run of
--                the current generation is under way (also a rescan);
--   Healthy      the current generation's last run is FINISHED.
-- Written for Lua 5.1 (Argo CD's interpreter) and newer; a missing status
-- or field is never an error.

local hs = {}

local function text(value)
  if value == nil then
    return ""
  end
  return tostring(value)
end

-- Whole numbers print the same in every Lua (5.4 would print 3.0).
local function number(value)
  if type(value) ~= "number" then
    return "?"
  end
  return string.format("%d", value)
end

local function condition(status, kind)
  if type(status.conditions) ~= "table" then
    return nil
  end
  for _, c in ipairs(status.conditions) do
    if type(c) == "table" and c.type == kind then
      return c
    end
  end
  return nil
end

-- A condition speaks for the generation it names; one that names none
-- speaks for the current one.
local function about(c, generation)
  return c.observedGeneration == nil or generation == nil or c.observedGeneration == generation
end

-- Run ids name their generation: <uid prefix>-g<generation>-s<scan>.
local function run_generation(run)
  if type(run) ~= "string" then
    return nil
  end
  local g = string.match(run, "%-g(%d+)%-s%d+$")
  if g == nil then
    return nil
  end
  return tonumber(g)
end

local generation = nil
if obj.metadata ~= nil then
  generation = obj.metadata.generation
end
local suspended = obj.spec ~= nil and obj.spec.suspend == true
local status = obj.status
if type(status) ~= "table" then
  status = {}
end
-- The operator's state machine, generated from its one declaration.
-- BEGIN GENERATED from domain/src/machine.rs by `make generate`: ENDED
-- The phases that end a run, and how; any other phase is a run under way.
local ENDED = { FINISHED = "succeeded", FAILED = "failed" }
-- END GENERATED
local phase = status.phase
local running = phase ~= nil and ENDED[phase] == nil
local run = text(status.run)
local run_gen = run_generation(status.run)
if run_gen == nil then
  run_gen = status.observedGeneration
end
local current_run = phase ~= nil and (generation == nil or run_gen == generation)

if ENDED[phase] == "failed" and current_run then
  local ready = condition(status, "Ready")
  hs.status = "Degraded"
  if ready ~= nil and ready.message ~= nil then
    hs.message = "run " .. run .. " failed: " .. text(ready.message)
  else
    hs.message = "run " .. run .. " failed"
  end
  return hs
end

-- The operator cannot go on (Redis unavailable, a corrupt ticket, an
-- invalid spec): whatever the phase, someone has to act.
local stalled = condition(status, "Stalled")
if stalled ~= nil and stalled.status == "True" and about(stalled, generation) then
  hs.status = "Degraded"
  hs.message = text(stalled.reason) .. ": " .. text(stalled.message)
  return hs
end

if suspended and not running then
  hs.status = "Suspended"
  hs.message = "spec.suspend is true: no new run starts"
  if phase ~= nil then
    hs.message = hs.message .. " (run " .. run .. " ended " .. text(phase) .. ")"
  end
  return hs
end

if phase == nil then
  hs.status = "Progressing"
  hs.message = "waiting for the first run to start"
  return hs
end

if generation ~= nil and (status.observedGeneration == nil or status.observedGeneration < generation) then
  hs.status = "Progressing"
  hs.message = "waiting for the operator to observe generation " .. number(generation)
  return hs
end

if not current_run then
  hs.status = "Progressing"
  if running then
    hs.message = "run " .. run .. " of generation " .. number(run_gen) .. " is finishing at " .. text(phase)
    if suspended then
      hs.message = hs.message .. "; spec.suspend is true: no new run starts after it"
    else
      hs.message = hs.message .. "; generation " .. number(generation) .. " runs next"
    end
  else
    hs.message = "waiting for the run of generation " .. number(generation) .. " to start"
  end
  return hs
end

if running then
  hs.status = "Progressing"
  hs.message = "run " .. run .. " at " .. text(phase)
  return hs
end

-- FINISHED: the verdict goes in the message.
hs.status = "Healthy"
local ready = condition(status, "Ready")
if ready ~= nil and ready.message ~= nil then
  hs.message = "run " .. run .. ": " .. text(ready.message)
else
  hs.message = "run " .. run .. ": scan complete"
end
if status.highRisk == true then
  local risk = condition(status, "HighRisk")
  local notified = ""
  if status.notification ~= nil and status.notification.state ~= nil then
    notified = " (notification " .. text(status.notification.state) .. ")"
  end
  if risk ~= nil and risk.message ~= nil and risk.message ~= "" then
    hs.message = hs.message .. "; high risk: " .. text(risk.message) .. notified
  else
    hs.message = hs.message .. "; high risk found" .. notified
  end
elseif status.highRisk == false then
  hs.message = hs.message .. "; no high risk"
end
return hs
