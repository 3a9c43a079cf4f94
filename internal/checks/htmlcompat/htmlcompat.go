// Package htmlcompat checks an email's HTML against the email clients it
// may land in: it finds the HTML elements, attributes, CSS properties and
// values, at-rules, selectors, units and image formats the HTML part uses,
// and looks each up in the caniemail data set (caniemail.com, MIT; the
// snapshot in caniemail/ and its date are bundled with the binary, and
// `make caniemail` refreshes it from the npm package `caniemail`).
//
// The answer lists, for each feature that some client does not support or
// supports only in part, those clients (the latest version the data has of
// each client family and platform) with the data's notes, and a summary in
// percent computed the way Mailpit computes its own: each feature's share
// of unsupported (and partly supported) clients, weighted by the share of
// the document's elements that use it; the largest of these is the
// message's, and what is left is supported.
//
// Finding the features is linear in the HTML's length: one pass of the
// tokenizer of golang.org/x/net/html, and one of a small CSS scanner over
// each style attribute and style element. It keeps a count per feature,
// not the document.
package htmlcompat

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
)

//go:embed caniemail/caniemail.json
var caniemailJSON []byte

// Source names the data set in answers.
const Source = "caniemail.com (MIT licence)"

// Report is the answer of a check.
type Report struct {
	// Warnings are the features the HTML uses that some client does not
	// support or supports only in part, the worst first.
	Warnings []Warning `json:"warnings"`
	Total    Total     `json:"total"`
	Data     DataInfo  `json:"data"`
}

// Warning is one feature of the data set that the HTML uses.
type Warning struct {
	// Feature is the data set's slug, e.g. "css-display-flex".
	Feature  string `json:"feature"`
	Title    string `json:"title"`
	Category string `json:"category"`
	URL      string `json:"url"`
	// Occurrences counts the places the HTML uses it.
	Occurrences int `json:"occurrences"`
	// Score is the share of clients, in percent, that support it, support
	// it in part, and do not support it.
	Score Score `json:"score"`
	// Unsupported and Partial are those clients.
	Unsupported []Client `json:"unsupported"`
	Partial     []Client `json:"partial"`
	// Notes is the data's note on the feature as a whole, if any.
	Notes *string `json:"notes"`
}

// Client is one client family on one platform, at the latest version the
// data set has tested.
type Client struct {
	Family       string   `json:"family"`
	FamilyName   string   `json:"familyName"`
	Platform     string   `json:"platform"`
	PlatformName string   `json:"platformName"`
	Version      string   `json:"version"`
	Notes        []string `json:"notes"`
}

// Score is a split of clients in percent.
type Score struct {
	Supported   float64 `json:"supported"`
	Partial     float64 `json:"partial"`
	Unsupported float64 `json:"unsupported"`
}

// Total sums up the message.
type Total struct {
	// Nodes counts the HTML's elements; Features the features of the data
	// set it uses, supported everywhere or not; Clients the clients
	// (family and platform) the data set knows.
	Nodes    int `json:"nodes"`
	Features int `json:"features"`
	Clients  int `json:"clients"`
	Score
}

// DataInfo says which data the answer comes from.
type DataInfo struct {
	Source  string `json:"source"`
	Updated string `json:"updated"`
}

// Checker checks HTML against the bundled data set. It is safe for
// concurrent use.
type Checker struct {
	features map[string]*feature
	// values are the features that are a property's value, whose title
	// says "property:value" ("display:flex").
	values  map[string]bool
	updated string
	clients int
}

// feature is one entry of the data set, with the latest support of each
// client.
type feature struct {
	slug, title, category, url string
	notes                      *string
	support                    []support
}

type support struct {
	client Client
	// level is 'y', 'a' (partial) or 'n'.
	level byte
}

// New parses the bundled data set.
func New() (*Checker, error) {
	return parse(caniemailJSON)
}

// Updated is the date of the bundled data set (caniemail's
// last_update_date).
func (c *Checker) Updated() string { return c.updated }

type rawData struct {
	LastUpdate string `json:"last_update_date"`
	Nicenames  struct {
		Family   map[string]string `json:"family"`
		Platform map[string]string `json:"platform"`
	} `json:"nicenames"`
	Data []struct {
		Slug       string            `json:"slug"`
		Title      string            `json:"title"`
		Category   string            `json:"category"`
		URL        string            `json:"url"`
		Notes      *string           `json:"notes"`
		NotesByNum map[string]string `json:"notes_by_num"`
		Stats      json.RawMessage   `json:"stats"`
	} `json:"data"`
}

// noteRef is a reference to a numbered note in a support value: "a #1".
var noteRef = regexp.MustCompile(`#(\d+)`)

func parse(data []byte) (*Checker, error) {
	var raw rawData
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("caniemail data: %w", err)
	}
	if len(raw.Data) == 0 {
		return nil, errors.New("caniemail data: no features")
	}
	c := &Checker{features: make(map[string]*feature, len(raw.Data)), values: map[string]bool{}, updated: raw.LastUpdate}
	if len(c.updated) >= len("2006-01-02") {
		c.updated = c.updated[:len("2006-01-02")]
	}
	clients := map[string]bool{}
	for _, f := range raw.Data {
		latest, err := latestVersions(f.Stats)
		if err != nil {
			return nil, fmt.Errorf("caniemail data: %s: %w", f.Slug, err)
		}
		ft := &feature{slug: f.Slug, title: f.Title, category: f.Category, url: f.URL, notes: f.Notes}
		for _, l := range latest {
			clients[l.family+"/"+l.platform] = true
			level := l.value[0]
			if level != 'y' && level != 'a' && level != 'n' {
				continue // "u": not known
			}
			cl := Client{Family: l.family, FamilyName: nice(raw.Nicenames.Family, l.family),
				Platform: l.platform, PlatformName: nice(raw.Nicenames.Platform, l.platform),
				Version: l.version, Notes: []string{}}
			for _, m := range noteRef.FindAllStringSubmatch(l.value, -1) {
				if n, ok := f.NotesByNum[m[1]]; ok {
					cl.Notes = append(cl.Notes, n)
				}
			}
			ft.support = append(ft.support, support{client: cl, level: level})
		}
		c.features[f.Slug] = ft
		if strings.HasPrefix(f.Slug, "css-") && strings.Contains(f.Title, ":") && !strings.HasPrefix(f.Title, ":") {
			c.values[f.Slug] = true
		}
	}
	c.clients = len(clients)
	return c, nil
}

func nice(names map[string]string, key string) string {
	if n, ok := names[key]; ok {
		return n
	}
	return key
}

// tested is the latest version of one client in a feature's stats.
type tested struct {
	family, platform, version, value string
}

// latestVersions reads a feature's stats, {family: {platform: {version:
// value}}}, keeping the last version of each platform: the data set lists
// versions oldest first, which only the JSON's order tells.
func latestVersions(stats json.RawMessage) ([]tested, error) {
	var out []tested
	d := json.NewDecoder(bytes.NewReader(stats))
	err := object(d, func(family string) error {
		return object(d, func(platform string) error {
			var last tested
			err := object(d, func(version string) error {
				var v string
				if err := d.Decode(&v); err != nil {
					return err
				}
				last = tested{family, platform, version, strings.TrimSpace(v)}
				return nil
			})
			if err == nil && last.value != "" {
				out = append(out, last)
			}
			return err
		})
	})
	return out, err
}

// object reads a JSON object from d, calling member for each key with d
// before its value, which member must read.
func object(d *json.Decoder, member func(key string) error) error {
	t, err := d.Token()
	if err != nil {
		return err
	}
	if t != json.Delim('{') {
		return fmt.Errorf("want an object, got %v", t)
	}
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return err
		}
		key, ok := t.(string)
		if !ok {
			return fmt.Errorf("want a key, got %v", t)
		}
		if err := member(key); err != nil {
			return err
		}
	}
	_, err = d.Token() // '}'
	return err
}

// Check finds the features htmlPart uses and reports them. It returns
// ctx's error when ctx ends first.
func (c *Checker) Check(ctx context.Context, htmlPart string) (*Report, error) {
	found, nodes, err := detect(ctx, htmlPart, c.has, func(slug string) bool { return c.values[slug] })
	if err != nil {
		return nil, err
	}
	r := &Report{Warnings: []Warning{}, Total: Total{Nodes: nodes, Features: len(found), Clients: c.clients},
		Data: DataInfo{Source: Source, Updated: c.updated}}
	weight := func(occ int) float64 { return math.Min(1, float64(occ)/float64(max(nodes, 1))) }
	var partial, unsupported float64
	for slug, occ := range found {
		f := c.features[slug]
		w := Warning{Feature: slug, Title: f.title, Category: f.category, URL: f.url, Occurrences: occ, Notes: f.notes,
			Unsupported: []Client{}, Partial: []Client{}}
		var y, a, n int
		for _, s := range f.support {
			switch s.level {
			case 'y':
				y++
			case 'a':
				a++
				w.Partial = append(w.Partial, s.client)
			case 'n':
				n++
				w.Unsupported = append(w.Unsupported, s.client)
			}
		}
		if a+n == 0 {
			continue
		}
		all := float64(y + a + n)
		w.Score = Score{Supported: percent(float64(y) / all), Partial: percent(float64(a) / all), Unsupported: percent(float64(n) / all)}
		partial = math.Max(partial, w.Score.Partial*weight(occ))
		unsupported = math.Max(unsupported, w.Score.Unsupported*weight(occ))
		r.Warnings = append(r.Warnings, w)
	}
	r.Total.Partial, r.Total.Unsupported = round(partial), round(unsupported)
	r.Total.Supported = round(math.Max(0, 100-partial-unsupported))
	sort.Slice(r.Warnings, func(i, j int) bool {
		a, b := r.Warnings[i], r.Warnings[j]
		wa := (a.Score.Unsupported + a.Score.Partial/2) * weight(a.Occurrences)
		wb := (b.Score.Unsupported + b.Score.Partial/2) * weight(b.Occurrences)
		if wa != wb {
			return wa > wb
		}
		return a.Feature < b.Feature
	})
	return r, nil
}

func (c *Checker) has(slug string) bool {
	_, ok := c.features[slug]
	return ok
}

// percent turns a share into a percentage with two decimals.
func percent(share float64) float64 { return round(share * 100) }

func round(v float64) float64 { return math.Round(v*100) / 100 }
