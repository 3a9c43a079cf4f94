package mailparse

import (
	"bytes"
	"strings"
	"time"
)

// parseDate parses a Date header (RFC 5322 section 3.3, including the
// obsolete forms: comments and white space anywhere, two-digit years,
// named zones) and the asctime form some programs write. The parts are
// recognised by their shape rather than by position, so a missing weekday
// or a different order does not matter. It reports false for anything
// without a valid day, month, year and time.
func parseDate(v []byte) (time.Time, bool) {
	if len(v) > 1000 {
		return time.Time{}, false // not a date, and not worth the scan
	}
	toks := dateTokens(v)
	var (
		day, month, year     = -1, -1, -1
		hour, minute, second = -1, -1, 0
		offset               = 0
		zoneSeen             = false
	)
	for _, t := range toks {
		switch {
		case bytes.IndexByte(t, ':') >= 0 && hour < 0:
			h, m, s, ok := clock(t)
			if !ok {
				return time.Time{}, false
			}
			hour, minute, second = h, m, s
		case (t[0] == '+' || t[0] == '-') && len(t) > 1 && hour >= 0 && !zoneSeen:
			off, ok := numericZone(t[1:])
			if !ok {
				continue
			}
			if t[0] == '-' {
				off = -off
			}
			offset, zoneSeen = off, true
		case isDigits(t):
			if len(t) > 4 {
				return time.Time{}, false
			}
			n := atoi(t)
			switch {
			case day < 0 && len(t) <= 2 && year < 0:
				day = n
			case year < 0 && len(t) <= 4:
				year = n
				switch {
				case len(t) == 2 && n < 50:
					year += 2000
				case len(t) <= 3:
					year += 1900
				}
			case day < 0 && len(t) <= 2:
				day = n
			default:
				return time.Time{}, false
			}
		case isLetters(t):
			if m := monthNumber(t); m > 0 && month < 0 {
				month = m
				continue
			}
			if hour >= 0 && !zoneSeen {
				offset, zoneSeen = namedZone(t), true
			}
			// Anything else before the time is a weekday, or noise.
		}
	}
	if day < 1 || month < 1 || year < 1 || year > 9999 || hour < 0 {
		return time.Time{}, false
	}
	if second == 60 { // a leap second
		second = 59
	}
	loc := time.UTC
	if offset != 0 {
		loc = time.FixedZone("", offset)
	}
	t := time.Date(year, time.Month(month), day, hour, minute, second, 0, loc)
	if t.Day() != day {
		return time.Time{}, false // 31 April
	}
	return t, true
}

// dateTokens splits a date into tokens separated by white space and commas,
// with comments removed and white space around ':' squeezed out, so
// "09 (x) :  55 : 06" becomes "09:55:06".
func dateTokens(v []byte) [][]byte {
	clean := make([]byte, 0, len(v))
	for i := 0; i < len(v); {
		c := v[i]
		switch c {
		case '(':
			i = skipComment(v, i)
			clean = append(clean, ' ')
			continue
		case '\t', '\r', '\n', ',':
			c = ' '
		case ':':
			clean = bytes.TrimRight(clean, " ")
			clean = append(clean, ':')
			i++
			for i < len(v) && (v[i] == ' ' || v[i] == '\t' || v[i] == '\r' || v[i] == '\n') {
				i++
			}
			continue
		}
		clean = append(clean, c)
		i++
	}
	return bytes.Fields(clean)
}

// clock parses hh:mm or hh:mm:ss.
func clock(t []byte) (h, m, s int, ok bool) {
	if len(t) > len("00:00:00") {
		return 0, 0, 0, false
	}
	parts := bytes.Split(t, []byte(":"))
	if len(parts) < 2 || len(parts) > 3 {
		return 0, 0, 0, false
	}
	var n [3]int
	for i, p := range parts {
		if len(p) == 0 || len(p) > 2 || !isDigits(p) {
			return 0, 0, 0, false
		}
		n[i] = atoi(p)
	}
	if n[0] > 23 || n[1] > 59 || n[2] > 60 {
		return 0, 0, 0, false
	}
	return n[0], n[1], n[2], true
}

// numericZone parses hhmm (or hh:mm) into seconds east of UTC.
func numericZone(t []byte) (int, bool) {
	if len(t) == 5 && t[2] == ':' {
		t = append(append([]byte(nil), t[:2]...), t[3:]...)
	}
	if len(t) != 4 || !isDigits(t) {
		return 0, false
	}
	h, m := atoi(t[:2]), atoi(t[2:])
	if h > 23 || m > 59 {
		return 0, false
	}
	return (h*60 + m) * 60, true
}

// namedZone returns the offset of an RFC 5322 obsolete zone name. Other
// names, military zones included, mean an unknown zone: UTC.
func namedZone(t []byte) int {
	const hour = 3600
	switch lowerASCII(t) {
	case "edt":
		return -4 * hour
	case "est", "cdt":
		return -5 * hour
	case "cst", "mdt":
		return -6 * hour
	case "mst", "pdt":
		return -7 * hour
	case "pst":
		return -8 * hour
	}
	return 0
}

var months = [...]string{"january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"}

// monthNumber returns 1-12 for an English month name or its three-letter
// abbreviation (a trailing dot allowed), or 0.
func monthNumber(t []byte) int {
	l := strings.TrimSuffix(lowerASCII(t), ".")
	if len(l) < 3 {
		return 0
	}
	for i, m := range months {
		if l == m || l == m[:3] || l == "sept" && i == 8 {
			return i + 1
		}
	}
	return 0
}

func isDigits(t []byte) bool {
	if len(t) == 0 {
		return false
	}
	for _, c := range t {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func isLetters(t []byte) bool {
	for _, c := range t {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '.') {
			return false
		}
	}
	return len(t) > 0
}

// atoi converts a short string of digits; callers check isDigits and length.
func atoi(t []byte) int {
	n := 0
	for _, c := range t {
		n = n*10 + int(c-'0')
	}
	return n
}
