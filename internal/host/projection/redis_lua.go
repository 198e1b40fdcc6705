package projection

import "github.com/redis/go-redis/v9"

// Lua scripts of the Redis state (format 2). Each runs atomically in Redis;
// every one checks the migration lock and the storage version first.
//
// Keys under base (the state prefix plus the projection key):
//
//	base:meta                  hash: version, fp (config fingerprint), through
//	                           (factsThroughId), wm:<window>, del:<window>
//	base:lock                  migration lock (a token with a TTL)
//	base:index:<window>        sorted set: bucket member -> bucket start (ms)
//	base:<window>:<member>     hash per bucket (format 2), member = bucket key
//	                           then group values, joined by ':'
//	base:dist:<field>:<window>:<member>  distinct values of a count_distinct
//	                           field: a set of the values in a base bucket,
//	                           a HyperLogLog in a rollup bucket
//	base:seen:<YYYY-MM-DD>     set of processed fact ids, by fact day
//	base                       the format-1 blob
//
// Bucket hash fields: n (facts), c|<f> (numeric values of field f),
// s|<f>|<scale>|<i> (limb i, base 10^9, of the sum of values with that
// many digits after the point), lo|<f> and hi|<f> (canonical decimals).

// luaCommon holds helpers shared by the scripts.
const luaCommon = `
local function bytecmp(x, y)
  local n = math.min(#x, #y)
  for i = 1, n do
    local p, q = string.byte(x, i), string.byte(y, i)
    if p ~= q then if p < q then return -1 else return 1 end end
  end
  if #x == #y then return 0 end
  if #x < #y then return -1 end
  return 1
end
-- dcmp compares canonical decimals (-?digits(.digits)?, no leading or
-- trailing zeros) exactly, digit by digit.
local function dcmp(a, b)
  local an, bn = string.sub(a, 1, 1) == '-', string.sub(b, 1, 1) == '-'
  if an ~= bn then if an then return -1 else return 1 end end
  if an then a = string.sub(a, 2); b = string.sub(b, 2) end
  local ai, af = string.match(a, '^(%d+)%.?(%d*)$')
  local bi, bf = string.match(b, '^(%d+)%.?(%d*)$')
  local c
  if #ai ~= #bi then
    if #ai < #bi then c = -1 else c = 1 end
  elseif ai ~= bi then c = bytecmp(ai, bi)
  else c = bytecmp(af, bf) end
  if an then c = -c end
  return c
end
local function tonum(v)
  if v then return tonumber(v) end
  return -math.huge
end
local function bkey(base, win, mem)
  if mem == '' then return base .. ':' .. win end
  return base .. ':' .. win .. ':' .. mem
end
local function dkey(base, f, win, mem)
  if mem == '' then return base .. ':dist:' .. f .. ':' .. win end
  return base .. ':dist:' .. f .. ':' .. win .. ':' .. mem
end
-- check returns an error reply table, or nil when the projection may be
-- used with this version (initialising meta when init is true).
local function check(meta, lock, base, version, fp, init, firstIndex)
  if redis.call('EXISTS', lock) == 1 then return {-1} end
  local m = redis.call('HMGET', meta, 'version', 'fp')
  local ver = m[1]
  if not ver then
    if redis.call('EXISTS', base) == 1 then return {-2, 1} end
    if firstIndex and redis.call('EXISTS', firstIndex) == 1 then ver = '2'
    elseif not init then return {-4}
    else
      redis.call('HSET', meta, 'version', version, 'fp', fp)
      return nil
    end
    redis.call('HSET', meta, 'version', ver)
  end
  if ver ~= version then return {-2, tonumber(ver)} end
  if m[2] and m[2] ~= fp then return {-3, m[2]} end
  if not m[2] then redis.call('HSET', meta, 'fp', fp) end
  return nil
end
`

// applyScript records and applies facts. ARGV: base, version, fp, maxID,
// L, L windows, atLeast (when not empty, the call writes nothing and
// returns -9 unless the stored through is at least it), F, F x (field
// name, kinds: s for sum, m for min/max, d for count_distinct), nfacts, then per fact: id, day, ts, L members, L
// starts, a flag string with one digit per field (1: a numeric value
// follows, 2: a distinct value follows, 3: both), then per field its
// values: scale, limbs (base 10^9, space-separated when more than one),
// the canonical decimal when the field has min/max; the distinct value.
// A day or start equal to the previous fact's is sent as "", a member
// as "%" (which no member can be: group values write '%' as %25).
//
// A fact updates its base bucket and every sealed coarser bucket of its
// time, all in this one atomic step with its dedupe record. The deltas of
// the new facts of one call are summed per bucket and written at the end
// with one command per field: the whole call is one atomic step, so every
// fact is still applied together with its dedupe record.
var applyScript = redis.NewScript(luaCommon + `
local meta, lock = KEYS[1], KEYS[2]
local base, version, fp, maxid = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local L = tonumber(ARGV[5])
local wins = {}
for j = 1, L do wins[j] = ARGV[5 + j] end
local atleast = ARGV[6 + L]
if atleast ~= '' then
  local th = redis.call('HGET', meta, 'through')
  if not th or bytecmp(th, atleast) < 0 then return {-9} end
end
local err = check(meta, lock, base, version, fp, true, base .. ':index:' .. wins[1])
if err then return err end
local fields = {}
for j = 1, L do
  fields[2*j - 1] = 'wm:' .. wins[j]
  fields[2*j] = 'del:' .. wins[j]
end
fields[2*L + 1] = 'through'
local mv = redis.call('HMGET', meta, unpack(fields))
local wm, del, idx = {}, {}, {}
for j = 1, L do
  wm[j] = tonum(mv[2*j - 1])
  del[j] = tonum(mv[2*j])
  idx[j] = base .. ':index:' .. wins[j]
end
local p = 7 + L
local F = tonumber(ARGV[p]); p = p + 1
local fname, fsum, fmm, cname, loname, hiname, sname = {}, {}, {}, {}, {}, {}, {}
for f = 1, F do
  local name, kinds = ARGV[p], ARGV[p + 1]
  p = p + 2
  fname[f] = name
  fsum[f] = string.find(kinds, 's', 1, true) ~= nil
  fmm[f] = string.find(kinds, 'm', 1, true) ~= nil
  cname[f] = 'c|' .. name
  loname[f] = 'lo|' .. name
  hiname[f] = 'hi|' .. name
  sname[f] = {}
end
local function sumfield(f, scale, li)
  local byScale = sname[f][scale]
  if not byScale then byScale = {}; sname[f][scale] = byScale end
  local n = byScale[li]
  if not n then n = 's|' .. fname[f] .. '|' .. scale .. '|' .. li; byScale[li] = n end
  return n
end
local order = {}
local sk, skOrder, skCmd = {}, {}, {}
local skl, bk = {}, {}
for j = 1, L do skl[j] = {}; bk[j] = {} end
local function distinct(j, f, mem, v)
  local byMem = skl[j][f]
  if not byMem then byMem = {}; skl[j][f] = byMem end
  local list = byMem[mem]
  if not list then
    list = {}
    byMem[mem] = list
    local key = dkey(base, fname[f], wins[j], mem)
    sk[key] = list
    skOrder[#skOrder + 1] = key
    -- Base buckets keep the values; rollup buckets a HyperLogLog.
    if j == 1 then skCmd[key] = 'SADD' else skCmd[key] = 'PFADD' end
  end
  list[#list + 1] = v
end
local function add(a, name, v)
  local cur = a.inc[name]
  if cur then a.inc[name] = cur + v
  else a.inc[name] = v; a.incOrder[#a.incOrder + 1] = name end
end
local nf = tonumber(ARGV[p]); p = p + 1
-- Pass 1: where each fact starts, and which ids are new (one SMISMEMBER
-- per day, and ids repeated within the call count once).
local fstart, fday, fid = {}, {}, {}
local dayIds, dayOrder, dayPos = {}, {}, {}
local day
for i = 1, nf do
  fstart[i] = p
  local id, d = ARGV[p], ARGV[p + 1]
  if d ~= '' then day = d end
  fid[i], fday[i] = id, day
  local ids = dayIds[day]
  if not ids then ids = {}; dayIds[day] = ids; dayOrder[#dayOrder + 1] = day end
  ids[#ids + 1] = id
  dayPos[i] = #ids
  p = p + 3 + 2*L
  local flags = ARGV[p]; p = p + 1
  for f = 1, F do
    local fl = string.byte(flags, f) - 48
    if fl % 2 == 1 then
      p = p + 2
      if fmm[f] then p = p + 1 end
    end
    if fl >= 2 then p = p + 1 end
  end
end
local known = {}
for _, d in ipairs(dayOrder) do
  local ids = dayIds[d]
  local res = {}
  for i = 1, #ids, 1000 do
    local part = redis.call('SMISMEMBER', base .. ':seen:' .. d, unpack(ids, i, math.min(i + 999, #ids)))
    for k = 1, #part do res[i + k - 1] = part[k] end
  end
  known[d] = res
end
local newIds = {}
local inCall = {}
-- Pass 2: apply the new facts.
local mems, starts = {}, {}
local vscale, vlimbs, vcanon, velem = {}, {}, {}, {}
local applied = 0
for i = 1, nf do
  p = fstart[i]
  local ts = tonumber(ARGV[p + 2])
  p = p + 3
  for j = 1, L do
    local m = ARGV[p + j - 1]
    if m ~= '%' then mems[j] = m end
    local st = ARGV[p + L + j - 1]
    if st ~= '' then starts[j] = st end
  end
  p = p + 2*L
  local flags = ARGV[p]; p = p + 1
  for f = 1, F do
    local fl = string.byte(flags, f) - 48
    vscale[f], velem[f] = nil, nil
    if fl % 2 == 1 then
      vscale[f] = ARGV[p]; vlimbs[f] = ARGV[p + 1]; p = p + 2
      if fmm[f] then vcanon[f] = ARGV[p]; p = p + 1 end
    end
    if fl >= 2 then velem[f] = ARGV[p]; p = p + 1 end
  end
  local id, d = fid[i], fday[i]
  if known[d][dayPos[i]] == 0 and not inCall[id] then
    inCall[id] = true
    local list = newIds[d]
    if not list then list = {}; newIds[d] = list end
    list[#list + 1] = id
    applied = applied + 1
    for j = 1, L do
      if ts >= del[j] then
        local mem = mems[j]
        if j == 1 or ts < wm[j] then
          local a = bk[j][mem]
          if not a then
            a = {key = bkey(base, wins[j], mem), n = 0, inc = {}, incOrder = {}, lo = {}, hi = {}, idx = idx[j], score = starts[j], mem = mem}
            bk[j][mem] = a
            order[#order + 1] = a
          end
          a.n = a.n + 1
          for f = 1, F do
            local sc = vscale[f]
            if sc then
              add(a, cname[f], 1)
              if fsum[f] then
                local ls = vlimbs[f]
                if string.find(ls, ' ', 1, true) then
                  local li = 0
                  for part in string.gmatch(ls, '%S+') do
                    add(a, sumfield(f, sc, li), tonumber(part))
                    li = li + 1
                  end
                elseif ls ~= '0' then
                  add(a, sumfield(f, sc, 0), tonumber(ls))
                end
              end
              if fmm[f] then
                local v = vcanon[f]
                if not a.lo[f] or dcmp(v, a.lo[f]) < 0 then a.lo[f] = v end
                if not a.hi[f] or dcmp(v, a.hi[f]) > 0 then a.hi[f] = v end
              end
            end
            if velem[f] then distinct(j, f, mem, velem[f]) end
          end
        else
          break -- levels above are not sealed either
        end
      end
    end
  end
end
for d, list in pairs(newIds) do
  for i = 1, #list, 1000 do
    redis.call('SADD', base .. ':seen:' .. d, unpack(list, i, math.min(i + 999, #list)))
  end
end
for _, a in ipairs(order) do
  local key = a.key
  if redis.call('HINCRBY', key, 'n', a.n) == a.n then
    redis.call('ZADD', a.idx, a.score, a.mem)
  end
  for _, name in ipairs(a.incOrder) do
    local v = a.inc[name]
    if v ~= 0 then redis.call('HINCRBY', key, name, string.format('%.0f', v)) end
  end
  for f, v in pairs(a.lo) do
    local cur = redis.call('HGET', key, loname[f])
    if not cur or dcmp(v, cur) < 0 then redis.call('HSET', key, loname[f], v) end
  end
  for f, v in pairs(a.hi) do
    local cur = redis.call('HGET', key, hiname[f])
    if not cur or dcmp(v, cur) > 0 then redis.call('HSET', key, hiname[f], v) end
  end
end
for _, key in ipairs(skOrder) do
  local list, cmd = sk[key], skCmd[key]
  for i = 1, #list, 500 do
    redis.call(cmd, key, unpack(list, i, math.min(i + 499, #list)))
  end
end
local through = mv[2*L + 1]
if maxid ~= '' and (not through or bytecmp(maxid, through) > 0) then
  redis.call('HSET', meta, 'through', maxid)
end
return {applied}
`)

// applySumScript is the fast path of applyScript for a call whose facts
// the engine summed per base bucket: it applies the sums only when every
// fact is new, none lies before the base level's retention horizon and
// none reaches a sealed coarser bucket (the common case of facts arriving
// once and on time); otherwise it writes nothing and returns -8, and the
// engine sends the facts through applyScript. ARGV: base, version, fp,
// maxID, L, L windows, atLeast (as applyScript), minTs, ndays, per day:
// day, n, n ids; nbuckets, per bucket: member, start, n, ninc, ninc x (field, value), nlo, nlo x
// (field, value), nhi, nhi x (field, value), nsk, nsk x (field, nvals,
// vals).
var applySumScript = redis.NewScript(luaCommon + `
local meta, lock = KEYS[1], KEYS[2]
local base, version, fp, maxid = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local L = tonumber(ARGV[5])
local win = ARGV[6]
local atleast = ARGV[6 + L]
if atleast ~= '' then
  local th = redis.call('HGET', meta, 'through')
  if not th or bytecmp(th, atleast) < 0 then return {-9} end
end
local err = check(meta, lock, base, version, fp, true, base .. ':index:' .. win)
if err then return err end
local p = 7 + L
local minTs = tonumber(ARGV[p]); p = p + 1
local w2 = ''
if L > 1 then w2 = ARGV[7] end
local mv = redis.call('HMGET', meta, 'del:' .. win, 'wm:' .. w2, 'through')
if minTs < tonum(mv[1]) then return {-8} end
if L > 1 and minTs < tonum(mv[2]) then return {-8} end
local nd = tonumber(ARGV[p]); p = p + 1
local days = {}
for d = 1, nd do
  local day, n = ARGV[p], tonumber(ARGV[p + 1])
  local first = p + 2
  p = first + n
  local key = base .. ':seen:' .. day
  for i = first, first + n - 1, 1000 do
    local res = redis.call('SMISMEMBER', key, unpack(ARGV, i, math.min(i + 999, first + n - 1)))
    for k = 1, #res do if res[k] == 1 then return {-8} end end
  end
  days[d] = {key, first, n}
end
local total = 0
for _, d in ipairs(days) do
  for i = d[2], d[2] + d[3] - 1, 1000 do
    redis.call('SADD', d[1], unpack(ARGV, i, math.min(i + 999, d[2] + d[3] - 1)))
  end
  total = total + d[3]
end
local idx = base .. ':index:' .. win
local nb = tonumber(ARGV[p]); p = p + 1
for _ = 1, nb do
  local mem, start, n = ARGV[p], ARGV[p + 1], ARGV[p + 2]
  p = p + 3
  local key = bkey(base, win, mem)
  if redis.call('HINCRBY', key, 'n', n) == tonumber(n) then
    redis.call('ZADD', idx, start, mem)
  end
  local ni = tonumber(ARGV[p]); p = p + 1
  for _ = 1, ni do
    redis.call('HINCRBY', key, ARGV[p], ARGV[p + 1])
    p = p + 2
  end
  local nl = tonumber(ARGV[p]); p = p + 1
  for _ = 1, nl do
    local f, v = ARGV[p], ARGV[p + 1]
    p = p + 2
    local cur = redis.call('HGET', key, f)
    if not cur or dcmp(v, cur) < 0 then redis.call('HSET', key, f, v) end
  end
  local nh = tonumber(ARGV[p]); p = p + 1
  for _ = 1, nh do
    local f, v = ARGV[p], ARGV[p + 1]
    p = p + 2
    local cur = redis.call('HGET', key, f)
    if not cur or dcmp(v, cur) > 0 then redis.call('HSET', key, f, v) end
  end
  local ns = tonumber(ARGV[p]); p = p + 1
  for _ = 1, ns do
    local f, nv = ARGV[p], tonumber(ARGV[p + 1])
    local first = p + 2
    p = first + nv
    local dk = dkey(base, f, win, mem)
    for i = first, first + nv - 1, 500 do
      redis.call('SADD', dk, unpack(ARGV, i, math.min(i + 499, first + nv - 1)))
    end
  end
end
local through = mv[3]
if maxid ~= '' and (not through or bytecmp(maxid, through) > 0) then
  redis.call('HSET', meta, 'through', maxid)
end
return {total}
`)

// sealScript seals one level from wm up to newWm: it merges the numeric
// state of every child bucket with start in [wm, newWm) into its parent
// and stores the parents' sketches, which the engine built from the
// children's distinct values or sketches it read. It first checks that the children are
// exactly those the engine read, unchanged (same set, same fact counts);
// otherwise it writes nothing and returns -7 so that the engine reads
// again. ARGV: base, version, fp, childWin, parentWin, expected wm (” for
// none), newWm, kind (h, d or m), childLen, parentLen, nchildren, then per
// child: member, start, expected n; then nsketches, then per sketch:
// field, parent member, bytes.
var sealScript = redis.NewScript(luaCommon + `
local meta, lock = KEYS[1], KEYS[2]
local base, version, fp = ARGV[1], ARGV[2], ARGV[3]
local cw, pw, expwm, newwm = ARGV[4], ARGV[5], ARGV[6], tonumber(ARGV[7])
local kind, clen, plen = ARGV[8], tonumber(ARGV[9]), tonumber(ARGV[10])
local err = check(meta, lock, base, version, fp, false, nil)
if err then return err end
local wmf = 'wm:' .. pw
local cur = redis.call('HGET', meta, wmf)
if (cur or '') ~= expwm then return {-7} end
local lo = '-inf'
if cur then lo = cur end
local nc = tonumber(ARGV[11])
local cidx = base .. ':index:' .. cw
if redis.call('ZCOUNT', cidx, lo, '(' .. string.format('%.0f', newwm)) ~= nc then return {-7} end
local p = 12
for i = 1, nc do
  if redis.call('HGET', bkey(base, cw, ARGV[p]), 'n') ~= ARGV[p + 2] then return {-7} end
  p = p + 3
end
local function pstart(mem, s)
  if kind == 'h' then return s - s % 3600000 end
  if kind == 'd' then return s - s % 86400000 end
  local dom = tonumber(string.sub(mem, 9, 10))
  return s - (dom - 1) * 86400000
end
local sealed = 0
p = 12
for i = 1, nc do
  local mem, s = ARGV[p], tonumber(ARGV[p + 1])
  p = p + 3
  local ps = pstart(mem, s)
  local pmem = string.sub(mem, 1, plen) .. string.sub(mem, clen + 1)
  local pkey = bkey(base, pw, pmem)
  local h = redis.call('HGETALL', bkey(base, cw, mem))
  for k = 1, #h, 2 do
    local f, v = h[k], h[k + 1]
    local pre = string.sub(f, 1, 3)
    if f == 'n' then
      if redis.call('HINCRBY', pkey, 'n', v) == tonumber(v) then
        sealed = sealed + 1
        redis.call('ZADD', base .. ':index:' .. pw, string.format('%.0f', ps), pmem)
      end
    elseif pre == 'lo|' or pre == 'hi|' then
      local c = redis.call('HGET', pkey, f)
      if not c then redis.call('HSET', pkey, f, v)
      else
        local d = dcmp(v, c)
        if (pre == 'lo|' and d < 0) or (pre == 'hi|' and d > 0) then redis.call('HSET', pkey, f, v) end
      end
    else
      redis.call('HINCRBY', pkey, f, v)
    end
  end
end
local ns = tonumber(ARGV[p]); p = p + 1
for i = 1, ns do
  redis.call('SET', dkey(base, ARGV[p], pw, ARGV[p + 1]), ARGV[p + 2])
  p = p + 3
end
redis.call('HSET', meta, wmf, string.format('%.0f', newwm))
return {nc, sealed}
`)

// retentionScript moves del:<win> to the horizon and deletes up to budget
// buckets below it. ARGV: base, version, fp, win, horizon, budget, ndist,
// dist fields.
var retentionScript = redis.NewScript(luaCommon + `
local meta, lock = KEYS[1], KEYS[2]
local base, version, fp = ARGV[1], ARGV[2], ARGV[3]
local win, h, budget = ARGV[4], ARGV[5], tonumber(ARGV[6])
local nd = tonumber(ARGV[7])
local err = check(meta, lock, base, version, fp, false, nil)
if err then return err end
local cur = redis.call('HGET', meta, 'del:' .. win)
if not cur or tonumber(cur) < tonumber(h) then redis.call('HSET', meta, 'del:' .. win, h) end
local idx = base .. ':index:' .. win
local mems = redis.call('ZRANGEBYSCORE', idx, '-inf', '(' .. h, 'LIMIT', 0, budget)
for _, mem in ipairs(mems) do
  redis.call('DEL', bkey(base, win, mem))
  for k = 1, nd do redis.call('DEL', dkey(base, ARGV[7 + k], win, mem)) end
  redis.call('ZREM', idx, mem)
end
local complete = 0
if #mems < budget then complete = 1 end
return {#mems, complete}
`)

// flipScript switches the format if the lock is still ours. KEYS: meta,
// lock, blob. ARGV: token, version, blob (or ” to delete the blob), then
// field/value pairs to set on meta.
var flipScript = redis.NewScript(`
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
if ARGV[3] == '' then redis.call('DEL', KEYS[3]) else redis.call('SET', KEYS[3], ARGV[3]) end
redis.call('HSET', KEYS[1], 'version', ARGV[2])
for i = 4, #ARGV, 2 do
  if ARGV[i + 1] == '' then redis.call('HDEL', KEYS[1], ARGV[i]) else redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
end
return 1
`)

// unlockScript releases the lock if it is ours; renewScript extends it.
var unlockScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

var renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
`)

var allScripts = []*redis.Script{applyScript, applySumScript, sealScript, retentionScript, flipScript, unlockScript, renewScript}
