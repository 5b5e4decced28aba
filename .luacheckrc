-- luacheck configuration for lua/ (run by `make lint`). Scripts run inside Redis: Lua 5.1 plus
-- the globals Redis provides.
std = "lua51"
read_globals = {"redis", "cjson", "cmsgpack", "bit", "struct", "KEYS", "ARGV"}
max_line_length = 110

-- A script's `--- @include "name"` line is replaced by lua/includes/name.lua when the library is
-- loaded, so the locals the includes define are in scope in every script: read them from the
-- include files themselves, so this list cannot drift.
local shared = {}
for _, name in ipairs({"common", "unregisterCore", "silence", "kvBytes"}) do
  local file = assert(io.open("lua/includes/" .. name .. ".lua"))
  for line in file:lines() do
    local defined = line:match("^local function ([%w_]+)") or line:match("^local ([%w_]+) =")
    if defined then shared[#shared + 1] = defined end
  end
  file:close()
end
for _, name in ipairs(shared) do read_globals[#read_globals + 1] = name end

-- An include defines helpers for the scripts; each script uses only some of them.
files["lua/includes"] = {ignore = {"211"}}
