package redisstore

import "github.com/redis/go-redis/v9"

// The Lua scripts below run atomically on the node that owns the account's
// slot. Redis does not undo the writes of a script that fails halfway, so
// each write script checks everything it depends on before its first write
// and cannot fail after it: a reader sees either all of a change or none of
// it. Keys a script computes (the older layout's metadata keys named after
// ids, body keys named after body ids) carry the account's hash tag like
// the declared KEYS, so they live in the same slot.

// An email is stored in one of two layouts (see the package comment): the
// current one, a record in the account's records hash (packRecord: the
// values of fields joined by "\n", then the size added to the stats), or
// the older one, a metadata hash per email with the fields
//
//	HMGET key m st subj notes labels upd
//
// and "sb". Every script that reads emails reads both, the records hash
// first. Status indexes are passed as three KEYS, for received, processed
// and archived, and picked by the stored status.

// publishFn defines publish(target, message), which the write scripts use to
// announce an event: target is "" (do not publish) or a command and a
// channel separated by a space, "PUBLISH <channel>" for a single Redis's
// one channel, or "SPUBLISH <channel>" for an account's sharded channel in a
// cluster (see events.go).
const publishFn = `
local function publish(target, msg)
  if target == '' then return end
  local sp = string.find(target, ' ', 1, true)
  redis.call(string.sub(target, 1, sp - 1), string.sub(target, sp + 1), msg)
end
`

// recordFns defines split(record), which returns the parts of a record of
// the records hash: the 6 values of fields and the size added to the stats;
// part(record, k), which returns its k-th part alone; and ofBody(record,
// bodyID), which reports whether the record's fixed part names the body:
// it starts {"b":"<bodyID>", as record.values writes it.
const recordFns = `
local function split(v)
  local t, i = {}, 1
  while true do
    local j = string.find(v, '\n', i, true)
    if not j then
      t[#t + 1] = string.sub(v, i)
      return t
    end
    t[#t + 1] = string.sub(v, i, j - 1)
    i = j + 1
  end
end
local function part(v, k)
  local i = 1
  for _ = 2, k do
    i = string.find(v, '\n', i, true) + 1
  end
  local j = string.find(v, '\n', i, true)
  if j then return string.sub(v, i, j - 1) end
  return string.sub(v, i)
end
local function ofBody(v, bodyID)
  local p = '{"b":"' .. bodyID .. '"'
  return string.sub(v, 1, #p) == p
end
`

// dropBodyFn defines dropBody(refs, body, bodyID, n), which releases n
// references to a body of the current layout: the body refs hash refs
// holds the count of a body that more than one email shares, a body
// without an entry has one. The body key is removed with its last
// reference.
const dropBodyFn = `
local function dropBody(refs, body, bodyID, n)
  local had = redis.call('HGET', refs, bodyID)
  local left = tonumber(had or '1') - n
  if left <= 0 then
    if had then redis.call('HDEL', refs, bodyID) end
    redis.call('UNLINK', body)
  elseif left == 1 then
    redis.call('HDEL', refs, bodyID)
  else
    redis.call('HSET', refs, bodyID, left)
  end
end
`

// createScript stores the emails of one body, in the current layout, and
// adds their raw sizes to the account's stats. The body itself is not
// passed through the script: the caller writes it to its key with SET and
// an expiry (the create's deadline, else bodyTTL) just before, in the same
// pipeline, and the script makes it permanent (PERSIST) with the emails,
// so a body whose script never ran or wrote nothing disappears on its own.
// A body whose expiry is the deadline gets "0" as ARGV[2]: a script that
// runs past the deadline finds no body, which costs no TIME call (ack.go).
//
// KEYS[1] the account's "all" index, KEYS[2] the body key, KEYS[3] the
// account's stats key, KEYS[4] its records hash, KEYS[5] its body refs
// hash, KEYS[6] its UID counter, KEYS[7] its UID index (uid.go), then for
// email i (from 0) KEYS[8+3i], KEYS[9+3i], KEYS[10+3i] its recipient,
// sender and status indexes, and last the account's event stream.
// ARGV[1] the body's id, ARGV[2] the deadline in Unix milliseconds ("0" for
// none), ARGV[3] the prefix of the account's tombstone keys, ARGV[4] the
// prefix of the older layout's metadata keys, ARGV[5] the stream's length
// bound, ARGV[6] the publish target (publishFn), then for email i
// ARGV[7+4i] its id, ARGV[8+4i] its score, ARGV[9+4i] its raw size (a
// decimal integer) and ARGV[10+4i] its record (packRecord), then one
// email.created event payload per email, appended to the stream and,
// unless the target is "" (replica acknowledgement publishes them after
// WAIT, see ack.go), published (see events.go) in the same script, so a
// create costs one round trip.
//
// It writes nothing (and removes the body key) and returns -1 when Redis's
// clock has reached the deadline, an id has a tombstone (fenceScript) or
// the body key is missing, so that a create that lands after its caller
// gave up stores nothing. Past the deadline it first looks for the records
// of this very call (an earlier attempt whose answer was lost, see
// Store.create): they are stored, so it answers success like a retry below,
// rather than removing the body they refer to and answering a failure. It returns the 1-based position of an email whose
// id already exists in either layout, writing nothing, except that an
// email this very call wrote (same body id: go-redis retried the pipeline
// after a lost answer) answers as a success. On success it returns the
// stream ids of the events, or {} for such a retry.
//
// The records are written with HSETNX, which is also the test that the id
// is free; on a taken id the records already written by this call are
// removed again before the script returns, so nobody sees them (a script
// runs alone) and it still writes nothing in the end.
var createScript = redis.NewScript(publishFn + recordFns + `
local n = (#KEYS - 8) / 3
local bodyID, deadline, fence, old = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local e = 7 + 4 * n
if deadline > 0 then
  local t = redis.call('TIME')
  if tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) >= deadline then
    for i = 0, n - 1 do
      local v = redis.call('HGET', KEYS[4], ARGV[7 + 4 * i])
      if v and ofBody(v, bodyID) then
        redis.call('PERSIST', KEYS[2])
        return {}
      end
    end
    redis.call('UNLINK', KEYS[2])
    return -1
  end
end
local probe = {}
for i = 0, n - 1 do
  probe[#probe + 1] = fence .. ARGV[7 + 4 * i]
  probe[#probe + 1] = old .. ARGV[7 + 4 * i]
end
if redis.call('EXISTS', unpack(probe)) > 0 then
  for i = 0, n - 1 do
    if redis.call('EXISTS', fence .. ARGV[7 + 4 * i]) == 1 then
      redis.call('UNLINK', KEYS[2])
      return -1
    end
  end
  for i = 0, n - 1 do
    if redis.call('EXISTS', old .. ARGV[7 + 4 * i]) == 1 then
      redis.call('UNLINK', KEYS[2])
      return i + 1
    end
  end
end
for i = 0, n - 1 do
  local id = ARGV[7 + 4 * i]
  if redis.call('HSETNX', KEYS[4], id, ARGV[10 + 4 * i]) == 0 then
    for j = 0, i - 1 do
      redis.call('HDEL', KEYS[4], ARGV[7 + 4 * j])
    end
    if ofBody(redis.call('HGET', KEYS[4], id), bodyID) then
      redis.call('PERSIST', KEYS[2])
      return {}
    end
    redis.call('UNLINK', KEYS[2])
    return i + 1
  end
end
if redis.call('PERSIST', KEYS[2]) == 0 then
  for i = 0, n - 1 do
    redis.call('HDEL', KEYS[4], ARGV[7 + 4 * i])
  end
  return -1
end
if n > 1 then
  redis.call('HSET', KEYS[5], bodyID, n)
end
local all, bytes = {}, 0
for i = 0, n - 1 do
  local a = 7 + 4 * i
  local id, score = ARGV[a], ARGV[a + 1]
  all[#all + 1] = score
  all[#all + 1] = id
  bytes = bytes + tonumber(ARGV[a + 2])
  redis.call('ZADD', KEYS[8 + 3 * i], score, id)
  redis.call('ZADD', KEYS[9 + 3 * i], score, id)
  redis.call('ZADD', KEYS[10 + 3 * i], score, id)
  redis.call('ZADD', KEYS[7], redis.call('HINCRBY', KEYS[6], 'n', 1), id)
end
redis.call('ZADD', KEYS[1], unpack(all))
if bytes > 0 then
  redis.call('HINCRBY', KEYS[3], 'bytes', string.format('%d', bytes))
end
local ids = {}
for i = 0, n - 1 do
  local id = redis.call('XADD', KEYS[#KEYS], 'MAXLEN', '~', ARGV[5], '*', 'e', ARGV[e + i])
  publish(ARGV[6], id .. ' ' .. ARGV[e + i])
  ids[#ids + 1] = id
end
return ids
`)

// fenceScript makes sure the emails of a create whose outcome is unknown
// stay unstored (see ack.go): it leaves a tombstone per id, which
// createScript obeys, and removes the emails if that create stored them.
//
// KEYS are createScript's. ARGV[1] the prefix of the tombstone keys,
// ARGV[2] the create's body id, ARGV[3] the tombstones' time to live in
// seconds, ARGV[4] the stream's length bound, ARGV[5] the publish target
// (publishFn), ARGV[6] the prefix of the status indexes, then for email
// i ARGV[7+2i] its id and ARGV[8+2i] its email.deleted event, and last the
// prefix of the emails' check results keys (a check, or search's digest,
// may have landed on an email before its fence).
//
// An email is removed only when its record names the create's body, so an
// unrelated email is never touched; each removal appends (and publishes) an
// email.deleted event, since a create without replica acknowledgement has
// already announced its emails. When it removes none, no email refers to
// the create's body (its key is the create's own), and the body key is
// removed too, should the create's SET have landed. It returns how many
// emails it removed.
var fenceScript = redis.NewScript(publishFn + recordFns + dropBodyFn + `
local n = (#KEYS - 8) / 3
local removed, bytes = 0, 0
for i = 0, n - 1 do
  local id, ev = ARGV[7 + 2 * i], ARGV[8 + 2 * i]
  redis.call('SET', ARGV[1] .. id, '1', 'EX', ARGV[3])
  local v = redis.call('HGET', KEYS[4], id)
  if v and ofBody(v, ARGV[2]) then
    local f = split(v)
    redis.call('HDEL', KEYS[4], id)
    redis.call('ZREM', KEYS[1], id)
    redis.call('ZREM', KEYS[7], id)
    redis.call('ZREM', KEYS[8 + 3 * i], id)
    redis.call('ZREM', KEYS[9 + 3 * i], id)
    redis.call('ZREM', ARGV[6] .. f[2], id)
    redis.call('UNLINK', ARGV[7 + 2 * n] .. id)
    bytes = bytes + (tonumber(f[7]) or 0)
    removed = removed + 1
    local sid = redis.call('XADD', KEYS[#KEYS], 'MAXLEN', '~', ARGV[4], '*', 'e', ev)
    publish(ARGV[5], sid .. ' ' .. ev)
  end
end
if removed == 0 then
  redis.call('UNLINK', KEYS[2])
  return 0
end
dropBody(KEYS[5], KEYS[2], ARGV[2], removed)
if redis.call('ZCARD', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[3])
elseif bytes > 0 then
  redis.call('HINCRBY', KEYS[3], 'bytes', string.format('%d', -bytes))
end
return removed
`)

// updateScript sets some of an email's mutable fields and, when the status
// changes, moves the id between status indexes. An email of the older
// layout stays in it.
//
// KEYS[1] the records hash, KEYS[2] the "all" index, KEYS[3..5] the status
// indexes, KEYS[6] the account's event stream, KEYS[7] the email's
// metadata key of the older layout. ARGV[1] the id, ARGV[2] the stream's
// length bound, ARGV[3] the publish target (publishFn), ARGV[4] the account
// id, then field and value pairs to set, named as in fields.
//
// It appends and publishes an email.updated event that carries the fields
// after the update (decodeEvent reads them), in the same script so that
// events are in commit order. It returns the email's fields after the
// update, or nil when it does not exist.
var updateScript = redis.NewScript(publishFn + recordFns + `
local v = redis.call('HGET', KEYS[1], ARGV[1])
local f
if v then
  f = split(v)
elseif redis.call('EXISTS', KEYS[7]) == 0 then
  return false
end
local st = {received = KEYS[3], processed = KEYS[4], archived = KEYS[5]}
for i = 5, #ARGV, 2 do
  if ARGV[i] == 'st' then
    local old, new = nil, ARGV[i + 1]
    if f then old = f[2] else old = redis.call('HGET', KEYS[7], 'st') end
    if old ~= new then
      local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
      if not st[old] or not st[new] or not score then
        return redis.error_reply('ERR email ' .. ARGV[1] .. ' has an unknown status or no index entry')
      end
      redis.call('ZREM', st[old], ARGV[1])
      redis.call('ZADD', st[new], score, ARGV[1])
    end
  end
end
local rd
if f then
  local pos = {st = 2, subj = 3, notes = 4, labels = 5, upd = 6, rd = 8}
  for i = 5, #ARGV, 2 do
    f[pos[ARGV[i]]] = ARGV[i + 1]
  end
  if #ARGV > 4 then
    redis.call('HSET', KEYS[1], ARGV[1], table.concat(f, '\n'))
  end
  rd = f[8] or '0'
  f = {f[1], f[2], f[3], f[4], f[5], f[6]}
else
  if #ARGV > 4 then
    redis.call('HSET', KEYS[7], unpack(ARGV, 5))
  end
  f = redis.call('HMGET', KEYS[7], 'm', 'st', 'subj', 'notes', 'labels', 'upd')
  rd = redis.call('HGET', KEYS[7], 'rd') or '0'
end
-- The read flag travels beside the six fields older releases decode.
local payload = cjson.encode({type = 'email.updated', accountId = ARGV[4], emailId = ARGV[1], fields = f, read = rd})
local id = redis.call('XADD', KEYS[6], 'MAXLEN', '~', ARGV[2], '*', 'e', payload)
publish(ARGV[3], id .. ' ' .. payload)
f[7] = rd
return f
`)

// deleteScript removes an email with its index entries, and its body when no
// other email refers to it, and subtracts its raw size from the account's
// stats.
//
// KEYS[1] the records hash, KEYS[2..4] the all, recipient and sender
// indexes, KEYS[5..7] the status indexes, KEYS[8] the body key, KEYS[9] the
// account's stats key, KEYS[10] the account's event stream, KEYS[11] the
// email's metadata key of the older layout, KEYS[12] the body refs hash,
// KEYS[13] the email's check results (checks.go), KEYS[14] the account's
// UID index (uid.go). ARGV[1] the fixed metadata the caller read to name the keys, ARGV[2] the
// id, ARGV[3] the stream's length bound, ARGV[4] the publish target
// (publishFn), ARGV[5] the email.deleted event to append and publish,
// ARGV[6] "1" when the caller read the email from the records hash, "0"
// from the older layout, ARGV[7] the body's id.
//
// The size is subtracted as a string (the record's last part, or "sb" in
// the older layout, with its sign flipped), since a Lua number would reach
// Redis in a float format HINCRBY refuses. When the account has no email
// left its stats key is removed.
//
// It returns 1 when done, 0 when the email does not exist, and -1 when it is
// no longer the email the caller read (deleted and created again).
var deleteScript = redis.NewScript(publishFn + recordFns + dropBodyFn + `
local st = {received = KEYS[5], processed = KEYS[6], archived = KEYS[7]}
local sk, sb
if ARGV[6] == '1' then
  local v = redis.call('HGET', KEYS[1], ARGV[2])
  if not v then return 0 end
  local f = split(v)
  if f[1] ~= ARGV[1] then return -1 end
  sk, sb = st[f[2]], f[7]
  redis.call('HDEL', KEYS[1], ARGV[2])
  dropBody(KEYS[12], KEYS[8], ARGV[7], 1)
else
  local m = redis.call('HGET', KEYS[11], 'm')
  if not m then return 0 end
  if m ~= ARGV[1] then return -1 end
  sk = st[redis.call('HGET', KEYS[11], 'st')]
  sb = redis.call('HGET', KEYS[11], 'sb')
  redis.call('DEL', KEYS[11])
  if redis.call('HINCRBY', KEYS[8], 'refs', -1) <= 0 then
    redis.call('UNLINK', KEYS[8])
  end
end
if sb and string.sub(sb, 1, 1) == '-' then
  sb = string.sub(sb, 2)
elseif sb and sb ~= '0' and sb ~= '' then
  sb = '-' .. sb
else
  sb = nil
end
for i = 2, 4 do
  redis.call('ZREM', KEYS[i], ARGV[2])
end
if sk then
  redis.call('ZREM', sk, ARGV[2])
end
if redis.call('ZCARD', KEYS[2]) == 0 then
  redis.call('DEL', KEYS[9])
elseif sb then
  redis.call('HINCRBY', KEYS[9], 'bytes', sb)
end
redis.call('UNLINK', KEYS[13])
redis.call('ZREM', KEYS[14], ARGV[2])
local id = redis.call('XADD', KEYS[10], 'MAXLEN', '~', ARGV[3], '*', 'e', ARGV[5])
publish(ARGV[4], id .. ' ' .. ARGV[5])
return 1
`)

// bodyScript finds the body of an email.
//
// KEYS[1] the records hash, KEYS[2] the email's metadata key of the older
// layout. ARGV[1] the account's body key prefix, ARGV[2] the email's id.
//
// It returns {the body value (encodeBodyValue)} for an email of the
// current layout whose body is a string (under largeBody bytes), {"h", the
// body hash's key} for a large body or one of the older layout, which
// GetBody reads with HMGET outside the script (a 25 MB field passed
// through Lua held Redis up for 60-84 ms, HMGET for at most 10), or nil
// when the email does not exist.
var bodyScript = redis.NewScript(`
local v = redis.call('HGET', KEYS[1], ARGV[2])
if v then
  local b = string.match(v, '^{"b":"([^"]*)"')
  if not b then return redis.error_reply('ERR email record names no body') end
  local key = ARGV[1] .. b
  if redis.call('TYPE', key).ok == 'hash' then return {'h', key} end
  local body = redis.call('GET', key)
  if not body then return false end
  return {body}
end
local m = redis.call('HGET', KEYS[2], 'm')
if not m then return false end
return {'h', ARGV[1] .. cjson.decode(m).b}
`)

// cursorRank defines the Lua functions the list scripts share: after, which
// compares members as sorted sets order members with equal scores, and
// rankAfter, which returns the rank, counted from the newest, of the first
// entry of an index that comes after a cursor (score cs, id cid) in list
// order, whether or not the cursor's id is in the index (or still exists).
const cursorRank = `
-- after reports whether a sorts after b byte by byte, as sorted sets order
-- members with equal scores (Lua's < follows the server's locale).
local function after(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x > y end
  end
  return #a > #b
end
local function rankAfter(idx, cs, cid)
  local r = redis.call('ZREVRANK', idx, cid)
  local sc = r and redis.call('ZSCORE', idx, cid)
  if r and tonumber(sc) == tonumber(cs) then
    return r + 1
  end
  local start = redis.call('ZCOUNT', idx, '(' .. cs, '+inf')
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', idx, cs, cs)) do
    if after(m, cid) then start = start + 1 end
  end
  return start
end
`

// indexRange defines the Lua function pageScript and countScript share:
// rankRange returns the ranks, counted from the newest, of the entries of
// index KEYS[1] that come after the cursor (ARGV[3], ARGV[4], both "" for
// none) and have a score above the bound ARGV[2] (or "-inf"): the first of
// them and one past the last.
const indexRange = cursorRank + `
local function rankRange()
  local total
  if ARGV[2] == '-inf' then
    total = redis.call('ZCARD', KEYS[1])
  else
    total = redis.call('ZCOUNT', KEYS[1], '(' .. ARGV[2], '+inf')
  end
  local start = 0
  if ARGV[4] ~= '' then start = rankAfter(KEYS[1], ARGV[3], ARGV[4]) end
  return start, total
end
`

// pageScript loads one page of an index: the ids at ranks offset to
// offset+limit-1, newest first, among those after a cursor and with a score
// above a bound, with their records. Ranks make its cost O(log N + limit)
// (plus the emails received in the cursor's millisecond).
//
// KEYS[1] the index. ARGV[1] the account's older metadata key prefix,
// ARGV[2] the exclusive lower score bound or "-inf", ARGV[3] and ARGV[4]
// the score and id of the cursor (both "" for none), ARGV[5] the offset,
// ARGV[6] the limit, ARGV[7] the account's records hash.
//
// It returns {id1, the record of id1, id2, ...} (see loadItems).
//
// Without a bound or a cursor it asks ZREVRANGE for the ranks alone, which
// stops at the end of the index by itself, and skips counting the index.
// ListEmails reads such pages with plain commands (plainPage) and runs the
// script for them only when those cannot give the script's answer.
var pageScript = redis.NewScript(indexRange + `
local off, lim = tonumber(ARGV[5]), tonumber(ARGV[6])
local last = off + lim - 1
if ARGV[2] ~= '-inf' or ARGV[4] ~= '' then
  local start, total = rankRange()
  off = start + off
  if off >= total then return {} end
  last = math.min(off + lim, total) - 1
end
local ids = redis.call('ZREVRANGE', KEYS[1], string.format('%d', off), string.format('%d', last))
local rk = ARGV[7]
` + loadItems)

// countScript counts the entries of an index after a cursor and with a score
// above a bound, in O(log N) (plus the emails received in the cursor's
// millisecond).
//
// KEYS[1] the index. ARGV[2] the exclusive lower score bound or "-inf",
// ARGV[3] and ARGV[4] the score and id of the cursor (both "" for none);
// ARGV[1] is unused, so that the arguments line up with pageScript's.
var countScript = redis.NewScript(indexRange + `
local start, total = rankRange()
return math.max(total - start, 0)
`)

// loadFn defines load(rk, ep, id), which returns the record of email id
// from the records hash rk or, for an email of the older layout, its
// metadata hash under the key prefix ep, joined into a record (with an
// empty size part, and its read flag, which updateScript keeps there as
// "rd"), or nil when there is no such email.
const loadFn = `
local function loadOld(ep, id)
  local o = redis.call('HMGET', ep .. id, 'm', 'st', 'subj', 'notes', 'labels', 'upd', 'rd')
  if not o[1] then return nil end
  for j = 2, 6 do o[j] = o[j] or 'null' end
  local rd = o[7] or '0'
  o[7] = nil
  return table.concat(o, '\n') .. '\n\n' .. rd
end
local function load(rk, ep, id)
  return redis.call('HGET', rk, id) or loadOld(ep, id)
end
`

// loadItems ends the scripts that answer a page of emails: it loads the
// records of ids from the records hash rk with one HMGET, those of the
// older layout from their metadata hashes (under the key prefix ARGV[1]),
// and returns {id1, the record of id1, id2, ...}, leaving out ids whose
// email is gone.
const loadItems = loadFn + `
local res = {}
if #ids > 0 then
  local vs = redis.call('HMGET', rk, unpack(ids))
  for i, id in ipairs(ids) do
    local v = vs[i] or loadOld(ARGV[1], id)
    if v then
      res[#res + 1] = id
      res[#res + 1] = v
    end
  end
end
return res
`

// scanScript examines one bounded batch of an index, newest first, starting
// after a cursor, and keeps the ids that are also members of every other
// index given (the AND of the filters that have indexes), that carry the
// label filter when one is given and, when a subject filter is given, may
// match it.
//
// KEYS[1..n] the indexes. ARGV[1] the account's older metadata key prefix, ARGV[2]
// the position in KEYS of the index to walk, or 0 to pick the smallest,
// ARGV[3] and ARGV[4] the score and id of the cursor (both "" to start at the
// newest), ARGV[5] the exclusive lower score bound or "-inf", ARGV[6] the
// batch size, ARGV[7] how many matches to skip, ARGV[8] how many to return,
// ARGV[9] the subject filter in lower case, or "", ARGV[10] the label
// filter, or "", ARGV[11] the account's records hash.
//
// The subject test here only drops emails that certainly do not match: those
// without a subject, and those whose subject is ASCII and, lower-cased, does
// not contain the filter. Lua's lower-casing is ASCII only, so a subject with
// other characters is kept for the caller to test; the caller tests every
// email it gets and does the skipping itself when a subject filter is given.
// The label test is exact: labels compare byte for byte.
//
// It returns {position walked, done (1 when the index is exhausted), cursor
// score, cursor id, matches skipped, id1, the record of id1, id2, ...}
// (see loadItems).
// The cursor is the last id examined; passing it back continues after it even
// if it has been deleted meanwhile, so concurrent writes never make a caller
// see an email twice.
var scanScript = redis.NewScript(cursorRank + recordFns + loadFn + `
local pos = tonumber(ARGV[2])
if pos == 0 then
  pos = 1
  local best = -1
  if #KEYS > 1 then
    for i = 1, #KEYS do
      local c = redis.call('ZCARD', KEYS[i])
      if best < 0 or c < best then
        best, pos = c, i
      end
    end
  end
end
local idx = KEYS[pos]
local cs, cid = ARGV[3], ARGV[4]
local start = 0
if cid ~= '' then
  start = rankAfter(idx, cs, cid)
end
local n = tonumber(ARGV[6])
local bound = nil
if ARGV[5] ~= '-inf' then bound = tonumber(ARGV[5]) end
local skip, want, needle, label = tonumber(ARGV[7]), tonumber(ARGV[8]), ARGV[9], ARGV[10]
local items = redis.call('ZREVRANGE', idx, start, start + n - 1, 'WITHSCORES')
local done = 0
if #items < 2 * n then done = 1 end
local skipped, found = 0, 0
local res = {pos, 0, cs, cid, 0}
for i = 1, #items, 2 do
  local id, score = items[i], items[i + 1]
  if bound and tonumber(score) <= bound then
    done = 1
    break
  end
  res[3], res[4] = score, id
  local ok = true
  for j = 1, #KEYS do
    if j ~= pos and not redis.call('ZSCORE', KEYS[j], id) then
      ok = false
      break
    end
  end
  local v = nil
  if ok and (label ~= '' or needle ~= '') then
    v = load(ARGV[11], ARGV[1], id)
    if not v then ok = false end
  end
  if ok and label ~= '' then
    ok = false
    local labels = cjson.decode(part(v, 5))
    if type(labels) == 'table' then
      for _, l in ipairs(labels) do
        if l == label then
          ok = true
          break
        end
      end
    end
  end
  if ok and needle ~= '' then
    local subj = cjson.decode(part(v, 3))
    if subj == cjson.null then
      ok = false
    elseif not string.find(subj, '[\128-\255]') and not string.find(string.lower(subj), needle, 1, true) then
      ok = false
    end
  end
  if ok then
    if skipped < skip then
      skipped = skipped + 1
    else
      v = v or load(ARGV[11], ARGV[1], id)
      if v then
        res[#res + 1] = id
        res[#res + 1] = v
        found = found + 1
      end
      if found >= want then
        if i + 1 < #items then done = 0 end
        break
      end
    end
  end
end
res[2], res[5] = done, skipped
return res
`)

// statsScript reads an account's totals.
//
// KEYS[1] the account's "all" index, KEYS[2] its stats key.
//
// It returns {the number of emails, the sum of their raw sizes as a decimal
// string}.
var statsScript = redis.NewScript(`
return {redis.call('ZCARD', KEYS[1]), redis.call('HGET', KEYS[2], 'bytes') or '0'}
`)

// oldestScript loads the oldest emails of an account, leaving out its newest
// ones: ranks 0 to n-1 of the "all" index, where n is the limit or the
// count less keep, whichever is smaller, with their metadata. The count and
// the range are read together, so what it returns is beyond the newest keep
// at one instant.
//
// KEYS[1] the account's "all" index. ARGV[1] the account's older metadata
// key prefix, ARGV[2] keep, ARGV[3] the limit, ARGV[4] how many of the
// oldest to step over first, ARGV[5] the account's records hash.
//
// It returns {id1, the record of id1, id2, ...}, oldest first (see
// loadItems).
var oldestScript = redis.NewScript(`
local skip = tonumber(ARGV[4])
local n = math.min(tonumber(ARGV[3]), redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[2]) - skip)
if n <= 0 then return {} end
local ids = redis.call('ZRANGE', KEYS[1], string.format('%d', skip), string.format('%d', skip + n - 1))
local rk = ARGV[5]
` + loadItems)
