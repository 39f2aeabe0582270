//! The Lua text every VM runs first: the sandbox, `redis.*` made in Lua,
//! and the loader FUNCTION LOAD runs a library with.

pub(super) const PRELUDE: &str = r#"
local private = ...
local raw_error = error
local getinfo = debug.getinfo
-- redis.call and redis.pcall are C functions `commands::scripting` sets
-- (as in Redis: a `return redis.call(...)` keeps the script's frame for
-- the error's line).
redis = {}
redis.error_reply = function(text)
    if type(text) ~= 'string' then raw_error('wrong number or type of arguments', 2) end
    if string.sub(text, 1, 1) == '-' then text = string.sub(text, 2) end
    if text == '' then text = 'ERR' end
    return {err = text}
end
redis.status_reply = function(text)
    if type(text) ~= 'string' then raw_error('wrong number or type of arguments', 2) end
    return {ok = text}
end
redis.sha1hex = function(...)
    if select('#', ...) ~= 1 then raw_error('wrong number of arguments', 2) end
    return private.sha1hex(...)
end
redis.log = function(level, ...) return private.log(level, ...) end
redis.setresp = function(version) return private.setresp(version) end
redis.acl_check_cmd = function(...)
    local allowed = private.acl_check_cmd(...)
    if type(allowed) == 'table' then raw_error(allowed) end
    return allowed
end
redis.set_repl = function(mode) end
redis.replicate_commands = function() return true end
redis.breakpoint = function() return false end
redis.debug = function(...) end
redis.LOG_DEBUG = 0
redis.LOG_VERBOSE = 1
redis.LOG_NOTICE = 2
redis.LOG_WARNING = 3
redis.REPL_NONE = 0
redis.REPL_SLAVE = 1
redis.REPL_REPLICA = 1
redis.REPL_AOF = 2
redis.REPL_ALL = 3
redis.REDIS_VERSION = private.redis_version
redis.REDIS_VERSION_NUM = private.redis_version_num
local handler = function(err)
    if type(err) ~= 'table' then
        err = {err = 'ERR ' .. tostring(err)}
    end
    if err.source == nil then
        for level = 2, 32 do
            local info = getinfo(level, 'Sl')
            if info == nil then break end
            if info.source == '@user_script' or info.source == '@user_function' then
                err.source = info.source
                err.line = info.currentline
                break
            end
        end
        if err.source == nil then
            -- Raised from a tail call: the script's frame is gone.
            err.source = private.source
            err.line = '?'
        end
    end
    return err
end
local raw_xpcall = xpcall
local trampoline = function(f)
    private.source = '@user_script'
    return raw_xpcall(f, handler)
end
-- A function's call (FCALL): its KEYS and ARGV are arguments.
private.trampoline_args = function(f, keys, argv)
    private.source = '@user_function'
    return raw_xpcall(function() return f(keys, argv) end, handler)
end
-- A script stopped by SCRIPT KILL or shutdown must not go on by catching
-- the error that stops it: the scripts' pcall and xpcall raise it again
-- (Redis gets there by raising it at every line).
local raw_pcall = pcall
local stopping = private.stopping
local function unless_stopped(ok, ...)
    if not ok and stopping() then raw_error((...), 0) end
    return ok, ...
end
pcall = function(...) return unless_stopped(raw_pcall(...)) end
-- The error handler of xpcall is not called for the error that stops a
-- run: Lua calls a handler with hooks off when the hook raised the error,
-- so a handler that loops would never be stopped.
xpcall = function(f, handler, ...)
    if type(handler) ~= 'function' then return unless_stopped(raw_xpcall(f, handler, ...)) end
    local guarded = function(e)
        if stopping() then return e end
        return handler(e)
    end
    return unless_stopped(raw_xpcall(f, guarded, ...))
end
-- A coroutine stopped by the hook returns the error to its resumer: it
-- is raised again there.
local raw_resume = coroutine.resume
coroutine.resume = function(...) return unless_stopped(raw_resume(...)) end
loadfile = nil
debug = nil
-- Not in Redis' sandbox here: an environment changed with setfenv stays
-- with a compiled script for the next caller, and a userdata's __gc runs
-- with hooks off (a loop there could never be stopped).
local raw_setfenv = setfenv
getfenv = nil
setfenv = nil
newproxy = nil
dofile = nil
require = nil
module = nil
io = nil
-- Redis 7.4 gives scripts `os.clock` alone (the CPU seconds the server
-- has used, as C's clock()).
os = {clock = private.os_clock}
package = nil
print = nil
-- Scripts run in `env`, an empty table in front of the globals: reading
-- a missing global fails, and nothing can be written through it, nor
-- through the library tables it shows (read-only proxies), as Redis 7's
-- read-only tables behave.
local real = _G
local rawget, type, tostring = rawget, type, tostring
local raw_setmetatable, raw_loadstring, raw_rawset = setmetatable, loadstring, rawset
local protected = raw_setmetatable({}, {__mode = 'k'})
-- The table behind each read-only proxy, for pairs and next.
local behind = raw_setmetatable({}, {__mode = 'k'})
local function readonly() raw_error('Attempt to modify a readonly table', 2) end
local function protect(t)
    local proxy = raw_setmetatable({}, {__index = t, __newindex = readonly, __metatable = false})
    protected[proxy] = true
    behind[proxy] = t
    return proxy
end
local shown = {}
for _, name in ipairs({'redis', 'cjson', 'bit', 'cmsgpack', 'struct', 'string', 'math', 'table', 'coroutine', 'os'}) do
    shown[name] = protect(real[name])
end
-- Strings share one metatable in a VM, and so every later script: what
-- getmetatable('') gives is a read-only view whose __index is the
-- scripts' read-only string table.
local string_meta = getmetatable('')
string_meta.__metatable = protect({__index = shown.string})
local env = {}
-- What scripts see behind `env`: the libraries' read-only proxies, every
-- other global (filled in at the end of this prelude), KEYS and ARGV (set
-- per run) and `_G` as `env`. A table rather than a function, so that a
-- global read is one more table lookup for the VM, not two Lua calls.
local visible = {}
private.visible = visible
private.lookup = function(name, level)
    local value = rawget(visible, name)
    if value == nil then
        raw_error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", level + 1)
    end
    return value
end
raw_setmetatable(env, {
    __index = visible,
    __newindex = readonly,
    __metatable = protect({}),
})
protected[env] = true
private.env = env
private.readonly = readonly
private.protect = protect
private.mark_protected = function(t) protected[t] = true end
real.setmetatable = function(t, mt)
    if protected[t] then raw_error('Attempt to modify a readonly table', 2) end
    return raw_setmetatable(t, mt)
end
real.rawset = function(t, k, v)
    if protected[t] then raw_error('Attempt to modify a readonly table', 2) end
    return raw_rawset(t, k, v)
end
-- pairs and next see through a read-only proxy to what it shows (a
-- script can list `os`, `string`..., as in Redis), never writably.
local raw_pairs, raw_next = pairs, next
real.pairs = function(t)
    local under = behind[t]
    if under ~= nil then return raw_pairs(under) end
    return raw_pairs(t)
end
real.next = function(t, k)
    local under = behind[t]
    if under ~= nil then return raw_next(under, k) end
    return raw_next(t, k)
end
-- Only source text: precompiled chunks are refused, as Redis refuses them.
real.loadstring = function(text, name)
    if type(text) == 'string' and text:byte(1) == 27 then return nil end
    local chunk, err = raw_loadstring(text, name)
    if chunk then raw_setfenv(chunk, env) end
    return chunk, err
end
for name, value in pairs(real) do visible[name] = value end
for name, proxy in pairs(shown) do visible[name] = proxy end
visible._G = env
raw_setmetatable(visible, {
    __index = function(_, name)
        raw_error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
    end,
})
raw_setmetatable(real, {
    __newindex = readonly,
    __index = function(t, name)
        raw_error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
    end,
})
return trampoline
"#;

/// Functions' side of a VM (run after [`PRELUDE`], with its `private`
/// table and the scripts' `redis` table): the environment libraries load
/// and run in, and `redis.register_function`.
///
/// As in Redis, a library's top level sees only a load-time `redis` (with
/// `register_function`, `log` and the version constants) and no other
/// global, and its functions see the globals scripts see, with a
/// read-only `redis` that has no `register_function`. Neither can create
/// globals. One environment serves every library: the `loading` flag
/// decides which view a lookup gets.
pub(super) const FUNCTIONS_PRELUDE: &str = r#"
local private, redis_api = ...
local raw_error, setmetatable, type, pairs, tostring = error, setmetatable, type, pairs, tostring
local lower, find, select = string.lower, string.find, select
local loading = nil
local readonly, lookup = private.readonly, private.lookup
local function missing(name)
    raw_error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 3)
end
local flag_names = {}
for _, name in pairs(private.flag_names) do flag_names[name] = true end
local function register(...)
    if loading == nil then
        raw_error('redis.register_function can only be called on FUNCTION LOAD command', 2)
    end
    local count = select('#', ...)
    if count < 1 or count > 2 then
        raw_error('wrong number of arguments to redis.register_function', 2)
    end
    local name, callback, description, flags = nil, nil, nil, {}
    if count == 1 then
        local named = ...
        if type(named) ~= 'table' then
            raw_error('calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).', 2)
        end
        for key, value in pairs(named) do
            if type(key) ~= 'string' then
                raw_error('named argument key given to redis.register_function is not a string', 2)
            end
            key = lower(key)
            if key == 'function_name' then
                if type(value) ~= 'string' and type(value) ~= 'number' then
                    raw_error('function_name argument given to redis.register_function must be a string', 2)
                end
                name = tostring(value)
            elseif key == 'description' then
                if type(value) ~= 'string' and type(value) ~= 'number' then
                    raw_error('description argument given to redis.register_function must be a string', 2)
                end
                description = tostring(value)
            elseif key == 'callback' then
                if type(value) ~= 'function' then
                    raw_error('callback argument given to redis.register_function must be a function', 2)
                end
                callback = value
            elseif key == 'flags' then
                if type(value) ~= 'table' then
                    raw_error('flags argument to redis.register_function must be a table representing function flags', 2)
                end
                local n = 1
                while value[n] ~= nil do
                    local flag = value[n]
                    if (type(flag) ~= 'string' and type(flag) ~= 'number') or not flag_names[lower(flag)] then
                        raw_error('unknown flag given', 2)
                    end
                    flags[#flags + 1] = lower(flag)
                    n = n + 1
                end
            else
                raw_error('unknown argument given to redis.register_function', 2)
            end
        end
        if name == nil then raw_error('redis.register_function must get a function name argument', 2) end
        if callback == nil then raw_error('redis.register_function must get a callback argument', 2) end
    else
        name, callback = ...
        if type(name) ~= 'string' and type(name) ~= 'number' then
            raw_error('first argument to redis.register_function must be a string', 2)
        end
        name = tostring(name)
        if type(callback) ~= 'function' then
            raw_error('second argument to redis.register_function must be a function', 2)
        end
    end
    if #name == 0 or find(name, '[^%w_]') then
        raw_error('Library names can only contain letters, numbers, or underscores(_) and must be at least one character long', 2)
    end
    if loading.seen[lower(name)] then
        raw_error('Function already exists in the library', 2)
    end
    loading.seen[lower(name)] = true
    loading.list[#loading.list + 1] = {name = name, callback = callback, description = description, flags = flags}
end
local load_api = {
    register_function = register,
    log = redis_api.log,
    LOG_DEBUG = redis_api.LOG_DEBUG,
    LOG_VERBOSE = redis_api.LOG_VERBOSE,
    LOG_NOTICE = redis_api.LOG_NOTICE,
    LOG_WARNING = redis_api.LOG_WARNING,
    REDIS_VERSION = redis_api.REDIS_VERSION,
    REDIS_VERSION_NUM = redis_api.REDIS_VERSION_NUM,
}
local load_redis = setmetatable({}, {
    __index = function(_, name)
        local value = load_api[name]
        if value == nil then missing(name) end
        return value
    end,
    __newindex = readonly,
    __metatable = false,
})
local env = {}
setmetatable(env, {
    __index = function(_, name)
        if loading ~= nil then
            if name == 'redis' then return load_redis end
            missing(name)
        end
        if name == 'KEYS' or name == 'ARGV' then missing(name) end
        if name == '_G' then return env end
        return lookup(name, 2)
    end,
    __newindex = readonly,
    __metatable = private.protect({}),
})
private.mark_protected(env)
private.mark_protected(load_redis)
private.functions_env = env
private.begin_load = function() loading = {seen = {}, list = {}} end
private.finish_load = function()
    local list = loading and loading.list or {}
    loading = nil
    return list
end
"#;
