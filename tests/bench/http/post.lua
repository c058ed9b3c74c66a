-- wrk script: form POSTs with a CSRF cookie + field and a unique body per request (so the
-- BBS duplicate check never refuses one), round-robin over the paths in KAGI_PATHS.
-- Counts the answers with status KAGI_OK (303 for the BBS, 200 for the chat) and prints
-- "ACKED n" at the end, so the driver can compare acknowledged with stored.
local threads = {}

function setup(thread)
  thread:set("id", #threads + 1)
  table.insert(threads, thread)
end

local token, paths, field, ok_status
local counter = 0
acked = 0  -- global: done() reads it from every thread with thread:get

function init(args)
  token = os.getenv("KAGI_CSRF")
  field = os.getenv("KAGI_FIELD") or "body"
  ok_status = tonumber(os.getenv("KAGI_OK") or "303")
  paths = {}
  for p in string.gmatch(os.getenv("KAGI_PATHS"), "[^,]+") do table.insert(paths, p) end
end

function request()
  counter = counter + 1
  local path = paths[(counter % #paths) + 1]
  local body = "_csrf=" .. token .. "&name=bench&" .. field .. "=wrk+" .. id .. "+" .. counter
  return wrk.format("POST", path, {
    ["Content-Type"] = "application/x-www-form-urlencoded",
    ["Cookie"] = "kagi_csrf=" .. token,
  }, body)
end

function response(status, headers, body)
  if status == ok_status then acked = acked + 1 end
end

function done(summary, latency, requests)
  local total = 0
  for _, t in ipairs(threads) do total = total + t:get("acked") end
  io.write("ACKED " .. total .. "\n")
end
