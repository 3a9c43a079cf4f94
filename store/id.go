package store

import (
	"strings"

	"github.com/google/uuid"
)

// ValidID reports whether s matches the UUID pattern of the API (api/openapi.yaml):
// hyphenated hex, case-insensitive, version 1 to 8 and variant 8, 9, a or b;
// the all-zero and all-f UUIDs are accepted too.
func ValidID(s string) bool {
	if len(s) != 36 {
		return false
	}
	if l := strings.ToLower(s); l == "00000000-0000-0000-0000-000000000000" || l == "ffffffff-ffff-ffff-ffff-ffffffffffff" {
		return true
	}
	for i := 0; i < 36; i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		case 14:
			if c < '1' || c > '8' {
				return false
			}
		case 19:
			if !strings.ContainsRune("89abAB", rune(c)) {
				return false
			}
		default:
			if !isHex(c) {
				return false
			}
		}
	}
	return true
}

// NewID returns a new email id: a lower-case UUIDv7, so ids sort by creation
// time. It panics only if the system's random source fails.
func NewID() string {
	return uuid.Must(uuid.NewV7()).String()
}

// NormalizeID returns the form in which ids are stored and looked up.
func NormalizeID(s string) string { return strings.ToLower(s) }

func isHex(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }
