-- read_committed fetch of max_messages from a random offset of a random partition.
-- args: topic, partitions, high watermark (the smallest of the partitions), max_messages[, Accept header]
package.path = package.path .. ";" .. debug.getinfo(1, "S").source:sub(2):match("(.*/)") .. "?.lua"
require "common"

local topic, partitions, high, max_messages, headers

function init(args)
  topic = args[1]
  partitions = tonumber(args[2])
  high = tonumber(args[3])
  max_messages = tonumber(args[4])
  headers = {}
  if args[5] then headers["Accept"] = args[5] end
  math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16) % 100000)
end

function request()
  local partition = math.random(0, partitions - 1)
  local top = math.max(high - max_messages, 0)
  local offset = math.random(0, top)
  return wrk.format("GET", string.format(
    "/v1/topics/%s/partitions/%d/messages?offset=%d&max_messages=%d&isolation=read_committed",
    topic, partition, offset, max_messages), headers)
end
