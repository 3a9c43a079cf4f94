package pop3d

import (
	"bufio"
	"bytes"
	"strings"
	"testing"
)

// FuzzServedSize: the size a message is announced with is what RETR
// sends of it before dot-stuffing, whatever its line ends.
func FuzzServedSize(f *testing.F) {
	for _, s := range []string{"", "a", "a\r", "a\n", "a\r\n", "\r", "\n.\n", ".a\r\nb", "a\rb\r\r\n", "\r\n\r\n", "..\r\n."} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var b bytes.Buffer
		w := bufio.NewWriter(&b)
		writeMessage(w, raw, -1)
		w.Flush()
		out := strings.TrimSuffix(b.String(), ".\r\n")
		stuffed := 0 // every line sent with a dot first had one doubled
		for _, line := range strings.SplitAfter(out, "\r\n") {
			if strings.HasPrefix(line, ".") {
				stuffed++
			}
		}
		if got, want := servedSize(raw), int64(len(out)-stuffed); got != want {
			t.Fatalf("servedSize(%q) = %d, but RETR sends %d bytes before dot-stuffing: %q", raw, got, want, out)
		}
	})
}
