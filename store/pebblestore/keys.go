package pebblestore

import (
	"encoding/binary"

	"github.com/mailsink/mailsink/store"
)

// Key layout. Every key starts with a byte that says what it holds. The
// keys of an account start with 'a' and the account prefix,
// uvarint(len(accountID)) | accountID, so that no account id (whatever
// bytes it holds) is a prefix of another's keys, and an account's keys
// are one range:
//
//	'v'                                      -> schema version (schemaVersion)
//	'W' account                              -> empty: the account has (or had) webhooks
//	'a' account 'e' id                       -> email record (codec.go; no body, id or account)
//	'a' account 'i' kind [value] time id     -> an index entry: the email record, or empty (indexValue)
//	'a' account 'b' bodyID                   -> body record
//	'a' account 'c' bodyID                   -> uvarint count of the emails sharing the body, when more than one
//	'a' account 's'                          -> varint email count | varint sum of RawSize
//	'a' account 'f' ruleID                   -> fault rule, JSON
//	'a' account 'k' 'r' sha256(key)          -> idempotency reservation (idempotency.go)
//	'a' account 'k' 'x' expiry sha256(key)   -> empty: reservations by expiry
//	'a' account 'u' sessionID                -> dashboard session (sessions.go)
//	'a' account 'w' ...                      -> webhooks and their deliveries (webhooks.go)
//	'a' account 'x' id 0x00 name             -> an email's check result (checks.go)
//
// A body's id is the id of the first email of the create that stored it,
// so bodies, like emails and index entries, are written in key order. The
// letters not listed are free for what later versions keep per account;
// a version that adds a key another version would misread raises
// schemaVersion (pebblestore.go).
//
// Index kinds are 'a' (every email of the account, no value part), 'r'
// recipient, 's' sender and 't' status; value is uvarint(len) | bytes,
// addresses lower case. time is receivedAt in Unix milliseconds with the
// sign bit flipped, big-endian, so that byte order is time order, including
// before 1970. Within one index and value, keys sort by (receivedAt, id)
// ascending, so a reverse scan yields list order: newest first, then id
// descending.
//
// An index entry holds a copy of the email's record (indexValue), so that
// a list reads a page from the index it walks, in one range, rather than
// looking each email up: every write of a record writes its four entries
// too. An entry of schema version 1, or of a record longer than
// maxCovered, is empty, and the list looks that email up.
const (
	tagVersion  byte = 'v'
	tagWebhooks byte = 'W'
	tagAccount  byte = 'a'
)

// Parts of an account's keys.
const (
	partEmail       byte = 'e'
	partIndex       byte = 'i'
	partBody        byte = 'b'
	partRefs        byte = 'c'
	partStats       byte = 's'
	partFault       byte = 'f'
	partIdempotency byte = 'k'
	partSession     byte = 'u'
	partWebhook     byte = 'w'
	partCheck       byte = 'x'
)

// Index kinds.
const (
	kindAll       byte = 'a'
	kindRecipient byte = 'r'
	kindSender    byte = 's'
	kindStatus    byte = 't'
)

// timeLen is the length of the time part of an index key.
const timeLen = 8

// maxCovered is the longest record an index entry holds a copy of. Records
// are about 100 bytes; long notes or labels make one longer, and four more
// copies of it would cost more to write than its lookup costs a list.
const maxCovered = 512

// The copies stay in the tables, next to their keys, where a list reads
// them: a value of separateValues bytes or more would go to a blob file.
var _ [separateValues - maxCovered - 1]struct{}

// indexValue returns what the index entries of the email whose record is
// rec hold: rec itself, unless it is longer than maxCovered.
func indexValue(rec []byte) []byte {
	if len(rec) > maxCovered {
		return nil
	}
	return rec
}

// accountKey returns the account's prefix followed by part.
func accountKey(accountID string, part byte, extra int) []byte {
	k := make([]byte, 0, 2+binary.MaxVarintLen16+len(accountID)+extra)
	k = append(k, tagAccount)
	k = binary.AppendUvarint(k, uint64(len(accountID)))
	k = append(k, accountID...)
	return append(k, part)
}

// accountOf returns the account id that key begins with, and the rest of
// the key after it and its part byte. Both share key's memory, so that
// decoding a list's keys (one per email) allocates nothing for them.
func accountOf(key []byte) (accountID, rest []byte, ok bool) {
	if len(key) < 2 || key[0] != tagAccount {
		return nil, nil, false
	}
	n, size := binary.Uvarint(key[1:])
	if size <= 0 || n >= uint64(len(key)-1-size) {
		return nil, nil, false
	}
	start := 1 + size
	return key[start : start+int(n)], key[start+int(n)+1:], true
}

func emailKey(accountID, id string) []byte {
	return append(accountKey(accountID, partEmail, len(id)), id...)
}

func bodyKey(accountID, bodyID string) []byte {
	return append(accountKey(accountID, partBody, len(bodyID)), bodyID...)
}

func refsKey(accountID, bodyID string) []byte {
	return append(accountKey(accountID, partRefs, len(bodyID)), bodyID...)
}

func statsKey(accountID string) []byte { return accountKey(accountID, partStats, 0) }

// indexPrefix returns the part of an index key before the time: all entries
// of one kind and value in one account share it.
func indexPrefix(accountID string, kind byte, value string) []byte {
	k := accountKey(accountID, partIndex, 2+len(value)+timeLen+36)
	k = append(k, kind)
	if kind != kindAll {
		k = binary.AppendUvarint(k, uint64(len(value)))
		k = append(k, value...)
	}
	return k
}

func appendTime(dst []byte, ms int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(ms)^(1<<63))
}

func decodeTime(b []byte) int64 {
	return int64(binary.BigEndian.Uint64(b) ^ (1 << 63))
}

func indexKey(prefix []byte, ms int64, id string) []byte {
	k := make([]byte, 0, len(prefix)+timeLen+len(id))
	k = append(k, prefix...)
	k = appendTime(k, ms)
	return append(k, id...)
}

// indexKeys returns the four index keys of an email.
func indexKeys(e *store.Email) [4][]byte {
	ms := e.ReceivedAt.UnixMilli()
	return [4][]byte{
		indexKey(indexPrefix(e.AccountID, kindAll, ""), ms, e.ID),
		indexKey(indexPrefix(e.AccountID, kindRecipient, store.NormalizeAddress(e.Recipient)), ms, e.ID),
		indexKey(indexPrefix(e.AccountID, kindSender, store.NormalizeAddress(e.Sender)), ms, e.ID),
		statusKey(e, e.Status),
	}
}

func statusKey(e *store.Email, s store.Status) []byte {
	return indexKey(indexPrefix(e.AccountID, kindStatus, string(s)), e.ReceivedAt.UnixMilli(), e.ID)
}

// prefixEnd returns the smallest key greater than every key that starts with
// prefix, or nil when there is none (prefix is all 0xff).
func prefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
