package boltv4

import (
	"encoding/binary"

	"github.com/mailsink/mailsink/store"
)

// Key layout. Every key of an account starts with the account prefix,
// uvarint(len(accountID)) | accountID, so no account id (whatever bytes it
// holds) is a prefix of another's keys.
//
//	emails   account | id                                  -> email record (no body, no id or account)
//	index    account | kind | [value] | time | id          -> empty
//	bodies   bodyID (8 bytes, big-endian)                  -> body record
//	bodyrefs bodyID                                        -> uvarint count of emails sharing it, when more than one
//	stats    account                                       -> varint email count | varint sum of RawSize
//	checks   account | id | 0x00 | name                    -> check result (checks.go)
//	meta     "version"                                     -> schema version
//	meta     "wal"                                         -> last write-ahead log number applied (uint64, big-endian)
//
// A stats record is updated in the transaction of every create and delete,
// so it is always exact; an account without emails has none. Schema version
// 2 added the stats bucket: Open rebuilds it once from the emails of a
// version 1 file, and a build that reads only version 1 refuses the file, so
// an older build can never write emails the totals do not count. Version 3
// added email format 2, body format 4 (compressed raw sources, codec.go)
// and bodies without a reference count (one email); it reads every record
// of version 2 as it is, and Compact rewrites them in the new formats. A
// build that reads only version 2 refuses a version 3 file. Version 4 added
// the write-ahead log (wal.go) and changed no record: a build that reads
// only version 3 would ignore what a crash left in the log, so it refuses
// a version 4 file.
//
// Index kinds are 'a' (every email of the account, no value), 'r' recipient,
// 's' sender and 't' status; value is uvarint(len) | bytes, addresses lower
// case. time is receivedAt in Unix milliseconds with the sign bit flipped,
// big-endian, so that byte order is time order, including before 1970. Within
// one index and value, keys sort by (receivedAt, id) ascending, so a reverse
// cursor scan yields list order: newest first, then id descending.
var (
	bucketEmails = []byte("emails")
	bucketIndex  = []byte("index")
	bucketBodies = []byte("bodies")
	bucketRefs   = []byte("bodyrefs")
	bucketStats  = []byte("stats")
	bucketMeta   = []byte("meta")
	// bucketEvents holds nothing: its sequence numbers the events in
	// commit order (nextEvents).
	bucketEvents = []byte("events")
	// bucketFaults holds a bucket per account: rule id -> the rule as
	// JSON (faults.go).
	bucketFaults = []byte("faults")
	// bucketChecks holds the results of emails' checks; a file without
	// it gets it on open, and a build without it ignores it.
	bucketChecks = []byte("checks")

	allBuckets = [][]byte{bucketEmails, bucketIndex, bucketBodies, bucketRefs, bucketStats, bucketMeta, bucketEvents, bucketFaults, bucketChecks}
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

func appendAccount(dst []byte, accountID string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(accountID)))
	return append(dst, accountID...)
}

func emailKey(accountID, id string) []byte {
	k := make([]byte, 0, 2+len(accountID)+len(id))
	return append(appendAccount(k, accountID), id...)
}

// indexPrefix returns the part of an index key before the time: all entries
// of one kind and value in one account share it.
func indexPrefix(accountID string, kind byte, value string) []byte {
	k := make([]byte, 0, 4+len(accountID)+len(value)+timeLen+36)
	k = appendAccount(k, accountID)
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

func bodyKey(id uint64) []byte { return binary.BigEndian.AppendUint64(nil, id) }

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
