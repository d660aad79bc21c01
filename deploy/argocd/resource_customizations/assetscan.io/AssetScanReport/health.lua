-- Argo CD health of an assetscan.io/AssetScanReport: the durable record of
-- one run that ended, written whole by the operator when the run ends and
-- immutable since (no status subresource: the record is its spec). A report
-- is Healthy once it carries its verdict (spec.verdict, whatever it says:
-- the verdict is about the asset, not the operator), and Progressing
-- otherwise. Written for Lua 5.1 (Argo CD's interpreter) and newer; a
-- missing spec is never an error.

local hs = {}
local verdict = nil
if type(obj.spec) == "table" then
  verdict = obj.spec.verdict
end
if type(verdict) == "string" and verdict ~= "" then
  hs.status = "Healthy"
  hs.message = "verdict: " .. verdict
  return hs
end
hs.status = "Progressing"
hs.message = "waiting for the run's verdict"
return hs
