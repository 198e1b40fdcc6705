-- GCRA for one key in one round trip: read the theoretical arrival time
-- (TAT), decide, and store the new TAT only when the request passes. With
-- n = 1 this is decide() in ratelimit.go; keep them the same.
--
-- KEYS[1]  the key; its value is the TAT in microseconds of server time
-- ARGV[1]  rpm
-- ARGV[2]  the emission interval T in microseconds (computed by the caller)
-- ARGV[3]  "" to use the server clock; tests pass a fixed time in
--          microseconds instead, and the key then gets no expiry
-- ARGV[4]  n, how many requests to admit at once (a lease; 1 when absent):
--          as many of them as fit are admitted, each moving the TAT by T,
--          exactly as that many requests arriving one after the other now
--
-- Returns {admitted (0..n), remaining, retry_after_us, reset_after_us}, the
-- decision of the last request admitted, or of one more when none is.
-- Every number stays an integer below 2^53, so the doubles of Lua are exact.

local rpm = tonumber(ARGV[1])
local t = tonumber(ARGV[2])
local n = tonumber(ARGV[4]) or 1
local now
if ARGV[3] == '' then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000000 + tonumber(time[2])
else
  now = tonumber(ARGV[3])
end

-- floor(a / b) for non-negative integers, corrected for the rounding of
-- the division.
local function div(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end

local limit = t * rpm
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then
  tat = now
end
-- A request passes when TAT + T - now <= limit: as many as fit in the
-- free part of the allowance.
local fit = div(limit - (tat - now), t)
if fit < 1 then
  local nxt = tat + t
  return {0, 0, nxt - limit - now, tat - now}
end
if fit < n then
  n = fit
end
local nxt = tat + n * t

-- string.format('%d') writes the integer's digits whatever its size, rather
-- than relying on how Redis turns a Lua number into an argument.
if ARGV[3] == '' then
  -- The key lives exactly until the allowance has fully refilled, when it
  -- is the same as no key at all.
  redis.call('SET', KEYS[1], string.format('%d', nxt), 'PX', math.ceil((nxt - now) / 1000))
else
  redis.call('SET', KEYS[1], string.format('%d', nxt))
end

return {n, div(limit - (nxt - now), t), 0, nxt - now}
