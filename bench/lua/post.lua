-- POST the same JSON body on every request (a static request: built once, no per-request Lua).
-- args: path, body-file [, Authorization header value]
package.path = package.path .. ";" .. debug.getinfo(1, "S").source:sub(2):match("(.*/)") .. "?.lua"
require "common"

function init(args)
  local file = assert(io.open(args[2], "rb"))
  wrk.method = "POST"
  wrk.path = args[1]
  wrk.body = file:read("*a")
  wrk.headers["Content-Type"] = "application/json"
  if args[3] then
    wrk.headers["Authorization"] = args[3]
  end
  file:close()
end
