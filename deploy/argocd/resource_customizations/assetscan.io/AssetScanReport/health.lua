-- Argo CD health of an assetscan.io/AssetScanReport: the durable record of
-- one finished run, written when the run ends. A report is Healthy once it
-- carries its verdict (status.verdict, whatever it says: the verdict is
-- about the asset, not the operator), and Progressing until then.
-- Written for Lua 5.1 (Argo CD's interpreter) and newer; a missing status
-- is never an error.

local hs = {}
local verdict = nil
if type(obj.status) == "table" then
  verdict = obj.status.verdict
end
if type(verdict) == "string" and verdict ~= "" then
  hs.status = "Healthy"
  hs.message = "verdict: " .. verdict
  return hs
end
hs.status = "Progressing"
hs.message = "waiting for the run's verdict"
return hs
