-- GCRA for one key in one round trip: read the theoretical arrival time
-- (TAT), decide, and store the new TAT only when the request passes. This is
-- decide() in ratelimit.go, line for line; keep them the same.
--
-- KEYS[1]  the key; its value is the TAT in microseconds of server time
-- ARGV[1]  rpm
-- ARGV[2]  the emission interval T in microseconds (computed by the caller)
-- ARGV[3]  "" to use the server clock; tests pass a fixed time in
--          microseconds instead, and the key then gets no expiry
--
-- Returns {allowed (1 or 0), remaining, retry_after_us, reset_after_us}.
-- Every number stays an integer below 2^53, so the doubles of Lua are exact.

local rpm = tonumber(ARGV[1])
local t = tonumber(ARGV[2])
local now
if ARGV[3] == '' then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000000 + tonumber(time[2])
else
  now = tonumber(ARGV[3])
end

local limit = t * rpm
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then
  tat = now
end
local nxt = tat + t
if nxt - now > limit then
  return {0, 0, nxt - limit - now, tat - now}
end

-- string.format('%d') writes the integer's digits whatever its size, rather
-- than relying on how Redis turns a Lua number into an argument.
if ARGV[3] == '' then
  -- The key lives exactly until the allowance has fully refilled, when it
  -- is the same as no key at all.
  redis.call('SET', KEYS[1], string.format('%d', nxt), 'PX', math.ceil((nxt - now) / 1000))
else
  redis.call('SET', KEYS[1], string.format('%d', nxt))
end

-- remaining = floor(free / t), corrected for the rounding of the division.
local free = limit - (nxt - now)
local remaining = math.floor(free / t)
if remaining * t > free then
  remaining = remaining - 1
elseif (remaining + 1) * t <= free then
  remaining = remaining + 1
end
return {1, remaining, 0, nxt - now}
