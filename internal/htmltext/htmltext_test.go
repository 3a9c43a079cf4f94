package htmltext

import "testing"

func TestText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"<p>Bonjour&nbsp;<b>Zoé</b></p>", "\nBonjour Zoé\n"},
		{"<b>Hello</b> world", "Hello world"},
		{"a<i>b</i>c", "abc"},
		{"<table><tr><td>1</td><td>2</td></tr></table>", "\n1 2\n"},
		{"<style>p { color: red }</style><script>x()</script><p>seen</p>", "\nseen\n"},
		{"line<br>next", "line\nnext"},
	}
	for _, tt := range tests {
		if got := Text(tt.in); got != tt.want {
			t.Errorf("Text(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
