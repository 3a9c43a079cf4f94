package redisstore

import "github.com/redis/go-redis/v9"

// The Lua scripts below run atomically on the node that owns the account's
// slot. Redis does not undo the writes of a script that fails halfway, so
// each write script checks everything it depends on before its first write
// and cannot fail after it: a reader sees either all of a change or none of
// it. Keys a script computes (metadata and body keys named after ids)
// carry the account's hash tag like the declared KEYS, so they live in the
// same slot.

// Every script that reads an email's metadata hash reads these fields, in
// this order, which is the order of fields in record.go:
//
//	HMGET key m st subj notes labels upd
//
// Status indexes are passed as three KEYS, for received, processed and
// archived, and picked by the stored status.

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

// createScript stores a body and the emails sharing it, and adds their raw
// sizes to the account's stats.
//
// KEYS[1] the account's "all" index, KEYS[2] the body key, KEYS[3] the
// account's stats key, then for email i (from 0) KEYS[4+4i] its metadata key
// and KEYS[5+4i], KEYS[6+4i], KEYS[7+4i] its recipient, sender and status
// indexes.
// ARGV[1] the body's parsed-content JSON, ARGV[2] the raw source, then for
// email i ARGV[3+9i] its id, ARGV[4+9i] its score, ARGV[5+9i] its raw size
// (a decimal integer) and ARGV[6+9i..11+9i] the values of its metadata
// fields.
//
// Each email's metadata hash also gets "sb", the size added to the stats, so
// that deleteScript subtracts exactly what was added: emails stored before
// the stats existed have none and are not subtracted.
//
// The last key is the account's event stream: after ARGV's email values come
// the stream's length bound, the publish target (publishFn) and one email.created event
// payload per email, appended to the stream and, unless the target is ""
// (replica acknowledgement publishes them after WAIT, see ack.go),
// published (see events.go) in the same script, so a create costs one
// round trip. Then come the body's id, the deadline in Unix milliseconds
// ("0" for none) and the prefix of the account's tombstone keys.
//
// It writes nothing and returns -1 when Redis's clock has reached the
// deadline or an id has a tombstone (fenceScript), so that a create that
// lands after its caller gave up stores nothing. It returns the 1-based
// position of an email whose id already exists, writing nothing, except
// that an email this very call wrote (same body id: go-redis retried the
// script after a lost answer) answers as a success. On success it returns
// the stream ids of the events, or {} for such a retry.
var createScript = redis.NewScript(publishFn + `
local n = (#KEYS - 4) / 4
local e = 3 + 9 * n
local bodyID, deadline, fence = ARGV[e + 2 + n], tonumber(ARGV[e + 3 + n]), ARGV[e + 4 + n]
if deadline > 0 then
  local t = redis.call('TIME')
  if tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) >= deadline then
    return -1
  end
end
for i = 0, n - 1 do
  if redis.call('EXISTS', fence .. ARGV[3 + 9 * i]) == 1 then
    return -1
  end
end
for i = 0, n - 1 do
  local m = redis.call('HGET', KEYS[4 + 4 * i], 'm')
  if m then
    if cjson.decode(m).b == bodyID then return {} end
    return i + 1
  end
end
redis.call('HSET', KEYS[2], 'raw', ARGV[2], 'meta', ARGV[1], 'refs', n)
for i = 0, n - 1 do
  local a = 3 + 9 * i
  local id, score, size = ARGV[a], ARGV[a + 1], ARGV[a + 2]
  redis.call('HSET', KEYS[4 + 4 * i], 'm', ARGV[a + 3], 'st', ARGV[a + 4], 'subj', ARGV[a + 5],
    'notes', ARGV[a + 6], 'labels', ARGV[a + 7], 'upd', ARGV[a + 8], 'sb', size)
  redis.call('ZADD', KEYS[1], score, id)
  redis.call('ZADD', KEYS[5 + 4 * i], score, id)
  redis.call('ZADD', KEYS[6 + 4 * i], score, id)
  redis.call('ZADD', KEYS[7 + 4 * i], score, id)
  redis.call('HINCRBY', KEYS[3], 'bytes', size)
end
local ids = {}
for i = 0, n - 1 do
  local id = redis.call('XADD', KEYS[#KEYS], 'MAXLEN', '~', ARGV[e], '*', 'e', ARGV[e + 2 + i])
  publish(ARGV[e + 1], id .. ' ' .. ARGV[e + 2 + i])
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
// i ARGV[7+2i] its id and ARGV[8+2i] its email.deleted event.
//
// An email is removed only when its metadata names the create's body, so an
// unrelated email is never touched; each removal appends (and publishes) an
// email.deleted event, since a create without replica acknowledgement has
// already announced its emails. It returns how many emails it removed.
var fenceScript = redis.NewScript(publishFn + `
local n = (#KEYS - 4) / 4
local removed = 0
for i = 0, n - 1 do
  local id, ev = ARGV[7 + 2 * i], ARGV[8 + 2 * i]
  redis.call('SET', ARGV[1] .. id, '1', 'EX', ARGV[3])
  local k = KEYS[4 + 4 * i]
  local m = redis.call('HGET', k, 'm')
  if m and cjson.decode(m).b == ARGV[2] then
    local v = redis.call('HMGET', k, 'st', 'sb')
    redis.call('DEL', k)
    redis.call('ZREM', KEYS[1], id)
    redis.call('ZREM', KEYS[5 + 4 * i], id)
    redis.call('ZREM', KEYS[6 + 4 * i], id)
    if v[1] then redis.call('ZREM', ARGV[6] .. v[1], id) end
    if v[2] and tonumber(v[2]) then
      redis.call('HINCRBY', KEYS[3], 'bytes', string.format('%d', -tonumber(v[2])))
    end
    removed = removed + 1
    local sid = redis.call('XADD', KEYS[#KEYS], 'MAXLEN', '~', ARGV[4], '*', 'e', ev)
    publish(ARGV[5], sid .. ' ' .. ev)
  end
end
if removed > 0 then
  if redis.call('HINCRBY', KEYS[2], 'refs', -removed) <= 0 then
    redis.call('UNLINK', KEYS[2])
  end
  if redis.call('ZCARD', KEYS[1]) == 0 then
    redis.call('DEL', KEYS[3])
  end
end
return removed
`)

// updateScript sets some of an email's mutable fields and, when the status
// changes, moves the id between status indexes.
//
// KEYS[1] the metadata key, KEYS[2] the "all" index, KEYS[3..5] the status
// indexes, KEYS[6] the account's event stream. ARGV[1] the id, ARGV[2] the
// stream's length bound, ARGV[3] the publish target (publishFn), ARGV[4] the account id,
// then field and value pairs to set.
//
// It appends and publishes an email.updated event that carries the fields
// after the update (decodeEvent reads them), in the same script so that
// events are in commit order. It returns the email's fields after the
// update, or nil when it does not exist.
var updateScript = redis.NewScript(publishFn + `
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local st = {received = KEYS[3], processed = KEYS[4], archived = KEYS[5]}
for i = 5, #ARGV, 2 do
  if ARGV[i] == 'st' then
    local old, new = redis.call('HGET', KEYS[1], 'st'), ARGV[i + 1]
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
if #ARGV > 4 then
  redis.call('HSET', KEYS[1], unpack(ARGV, 5))
end
local f = redis.call('HMGET', KEYS[1], 'm', 'st', 'subj', 'notes', 'labels', 'upd')
local payload = cjson.encode({type = 'email.updated', accountId = ARGV[4], emailId = ARGV[1], fields = f})
local id = redis.call('XADD', KEYS[6], 'MAXLEN', '~', ARGV[2], '*', 'e', payload)
publish(ARGV[3], id .. ' ' .. payload)
return f
`)

// deleteScript removes an email with its index entries, and its body when no
// other email refers to it, and subtracts its raw size from the account's
// stats.
//
// KEYS[1] the metadata key, KEYS[2..4] the all, recipient and sender
// indexes, KEYS[5..7] the status indexes, KEYS[8] the body key, KEYS[9] the
// account's stats key, KEYS[10] the account's event stream. ARGV[1] the
// fixed metadata the caller read to name the keys, ARGV[2] the id, ARGV[3]
// the stream's length bound, ARGV[4] the publish target (publishFn),
// ARGV[5] the email.deleted event to append and publish.
//
// The size is subtracted as a string ("sb", written by createScript, with
// its sign flipped), since a Lua number would reach Redis in a float format
// HINCRBY refuses. When the account has no email left its stats key is
// removed.
//
// It returns 1 when done, 0 when the email does not exist, and -1 when it is
// no longer the email the caller read (deleted and created again).
var deleteScript = redis.NewScript(publishFn + `
local m = redis.call('HGET', KEYS[1], 'm')
if not m then return 0 end
if m ~= ARGV[1] then return -1 end
local st = {received = KEYS[5], processed = KEYS[6], archived = KEYS[7]}
local sk = st[redis.call('HGET', KEYS[1], 'st')]
local sb = redis.call('HGET', KEYS[1], 'sb')
if sb and string.sub(sb, 1, 1) == '-' then
  sb = string.sub(sb, 2)
elseif sb and sb ~= '0' then
  sb = '-' .. sb
else
  sb = nil
end
redis.call('DEL', KEYS[1])
for i = 2, 4 do
  redis.call('ZREM', KEYS[i], ARGV[2])
end
if sk then
  redis.call('ZREM', sk, ARGV[2])
end
if redis.call('HINCRBY', KEYS[8], 'refs', -1) <= 0 then
  redis.call('UNLINK', KEYS[8])
end
if redis.call('ZCARD', KEYS[2]) == 0 then
  redis.call('DEL', KEYS[9])
elseif sb then
  redis.call('HINCRBY', KEYS[9], 'bytes', sb)
end
local id = redis.call('XADD', KEYS[10], 'MAXLEN', '~', ARGV[3], '*', 'e', ARGV[5])
publish(ARGV[4], id .. ' ' .. ARGV[5])
return 1
`)

// bodyScript loads the body of an email.
//
// KEYS[1] the metadata key. ARGV[1] the account's body key prefix.
//
// It returns {raw, parsed-content JSON}, or nil when the email does not exist.
var bodyScript = redis.NewScript(`
local m = redis.call('HGET', KEYS[1], 'm')
if not m then return false end
local b = cjson.decode(m).b
local v = redis.call('HMGET', ARGV[1] .. b, 'raw', 'meta')
if not v[1] or not v[2] then return false end
return v
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
// above a bound, with their metadata. Ranks make its cost O(log N + limit)
// (plus the emails received in the cursor's millisecond).
//
// KEYS[1] the index. ARGV[1] the account's metadata key prefix, ARGV[2] the
// exclusive lower score bound or "-inf", ARGV[3] and ARGV[4] the score and
// id of the cursor (both "" for none), ARGV[5] the offset, ARGV[6] the
// limit.
//
// It returns {id1, the 6 metadata fields of id1, id2, ...}.
var pageScript = redis.NewScript(indexRange + `
local start, total = rankRange()
local off, lim = start + tonumber(ARGV[5]), tonumber(ARGV[6])
if off >= total then return {} end
local last = math.min(off + lim, total) - 1
local ids = redis.call('ZREVRANGE', KEYS[1], string.format('%d', off), string.format('%d', last))
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

// loadItems ends the scripts that answer a page of emails: it loads the
// metadata of ids (under the key prefix ARGV[1]) and returns {id1, its 6
// fields, id2, ...}, leaving out ids whose email is gone.
const loadItems = `
local res = {}
for _, id in ipairs(ids) do
  local v = redis.call('HMGET', ARGV[1] .. id, 'm', 'st', 'subj', 'notes', 'labels', 'upd')
  if v[1] then
    res[#res + 1] = id
    for j = 1, 6 do res[#res + 1] = v[j] end
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
// KEYS[1..n] the indexes. ARGV[1] the account's metadata key prefix, ARGV[2]
// the position in KEYS of the index to walk, or 0 to pick the smallest,
// ARGV[3] and ARGV[4] the score and id of the cursor (both "" to start at the
// newest), ARGV[5] the exclusive lower score bound or "-inf", ARGV[6] the
// batch size, ARGV[7] how many matches to skip, ARGV[8] how many to return,
// ARGV[9] the subject filter in lower case, or "", ARGV[10] the label
// filter, or "".
//
// The subject test here only drops emails that certainly do not match: those
// without a subject, and those whose subject is ASCII and, lower-cased, does
// not contain the filter. Lua's lower-casing is ASCII only, so a subject with
// other characters is kept for the caller to test; the caller tests every
// email it gets and does the skipping itself when a subject filter is given.
// The label test is exact: labels compare byte for byte.
//
// It returns {position walked, done (1 when the index is exhausted), cursor
// score, cursor id, matches skipped, id1, the 6 metadata fields of id1,
// id2, ...}.
// The cursor is the last id examined; passing it back continues after it even
// if it has been deleted meanwhile, so concurrent writes never make a caller
// see an email twice.
var scanScript = redis.NewScript(cursorRank + `
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
  if ok and label ~= '' then
    ok = false
    local labels = cjson.decode(redis.call('HGET', ARGV[1] .. id, 'labels') or 'null')
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
    local subj = cjson.decode(redis.call('HGET', ARGV[1] .. id, 'subj') or 'null')
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
      local v = redis.call('HMGET', ARGV[1] .. id, 'm', 'st', 'subj', 'notes', 'labels', 'upd')
      if v[1] then
        res[#res + 1] = id
        for j = 1, 6 do res[#res + 1] = v[j] end
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
// KEYS[1] the account's "all" index. ARGV[1] the account's metadata key
// prefix, ARGV[2] keep, ARGV[3] the limit, ARGV[4] how many of the oldest
// to step over first.
//
// It returns {id1, the 6 metadata fields of id1, id2, ...}, oldest first.
var oldestScript = redis.NewScript(`
local skip = tonumber(ARGV[4])
local n = math.min(tonumber(ARGV[3]), redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[2]) - skip)
if n <= 0 then return {} end
local ids = redis.call('ZRANGE', KEYS[1], string.format('%d', skip), string.format('%d', skip + n - 1))
` + loadItems)
