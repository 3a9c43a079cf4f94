package config

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the table of settings of docs/configuration.md from Settings")

const (
	tableBegin = "<!-- The table is made from config.Settings: go test ./config -run DocsSettingsTable -update -->\n"
	tableEnd   = "<!-- end of the settings table -->\n"
)

// markdownTable renders Settings as the table of docs/configuration.md.
func markdownTable() string {
	var b strings.Builder
	b.WriteString("\n| variable | default | meaning |\n|---|---|---|\n")
	for _, s := range Settings() {
		def := "unset"
		if s.Default != "" {
			def = "`" + s.Default + "`"
		}
		b.WriteString("| `" + s.Name + "` | " + def + " | " + s.Help + " |\n")
	}
	b.WriteString("\n")
	return b.String()
}

// TestDocsSettingsTable fails when the table of docs/configuration.md
// differs from Settings in any name, default or meaning; -update rewrites it.
func TestDocsSettingsTable(t *testing.T) {
	const path = "../docs/configuration.md"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	before, rest, ok1 := strings.Cut(readme, tableBegin)
	got, after, ok2 := strings.Cut(rest, tableEnd)
	if !ok1 || !ok2 {
		t.Fatalf("%s has no %q ... %q section", path, tableBegin, tableEnd)
	}
	want := markdownTable()
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(before+tableBegin+want+tableEnd+after), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	gotRows, wantRows := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(gotRows) || i < len(wantRows); i++ {
		var g, w string
		if i < len(gotRows) {
			g = gotRows[i]
		}
		if i < len(wantRows) {
			w = wantRows[i]
		}
		if g != w {
			t.Errorf("%s's settings table, row %d:\n got: %s\nwant: %s", path, i+1, g, w)
		}
	}
	t.Log("go test ./config -run DocsSettingsTable -update rewrites the table from config.Settings")
}

// TestSettingsHaveDefaultsThatParse checks the table itself: one entry per
// name, every name MAILSINK_*, every default accepted by its own parser.
func TestSettingsHaveDefaultsThatParse(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Settings() {
		if !strings.HasPrefix(s.Name, "MAILSINK_") || seen[s.Name] || s.Help == "" {
			t.Errorf("setting %q: duplicate, unprefixed or without help", s.Name)
		}
		seen[s.Name] = true
		if s.Default != "" {
			if err := s.set(&Config{}, s.Default); err != nil {
				t.Errorf("%s: default %q does not parse: %v", s.Name, s.Default, err)
			}
		}
	}
}
