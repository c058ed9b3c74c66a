-- tests/bench/http/pipeline.lua — wrk sends KAGI_DEPTH (default 16) GETs of its URL's path at a
-- time on each connection, without waiting for the answers in between (HTTP/1.1 pipelining).
local depth = tonumber(os.getenv("KAGI_DEPTH") or "16")
local batch

init = function(args)
  local one = wrk.format("GET", wrk.path)
  local parts = {}
  for i = 1, depth do parts[i] = one end
  batch = table.concat(parts)
end

request = function()
  return batch
end
