package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// The checks of one email (GET /v1/emails/{id}/checks/...). Each is run on
// the first request and kept with the email; refresh runs it again.

// HTMLCheck is an email's HTML checked against email clients (the
// caniemail data).
type HTMLCheck struct {
	// Warnings are the features some client lacks or supports in part,
	// the worst first.
	Warnings []HTMLWarning `json:"warnings"`
	Total    struct {
		CheckScore
		Nodes    int `json:"nodes"`
		Features int `json:"features"`
		Clients  int `json:"clients"`
	} `json:"total"`
	Data struct {
		Source  string `json:"source"`
		Updated string `json:"updated"`
	} `json:"data"`
	CheckedAt time.Time `json:"checkedAt"`
}

// CheckScore is a split of email clients in percent.
type CheckScore struct {
	Supported   float64 `json:"supported"`
	Partial     float64 `json:"partial"`
	Unsupported float64 `json:"unsupported"`
}

// HTMLWarning is one feature of the HTML, by its caniemail slug
// (Feature, e.g. "css-display-flex").
type HTMLWarning struct {
	Feature     string          `json:"feature"`
	Title       string          `json:"title"`
	Category    string          `json:"category"`
	URL         string          `json:"url"`
	Occurrences int             `json:"occurrences"`
	Score       CheckScore      `json:"score"`
	Unsupported []ClientSupport `json:"unsupported"`
	Partial     []ClientSupport `json:"partial"`
	Notes       *string         `json:"notes"`
}

// ClientSupport is an email client family on one platform.
type ClientSupport struct {
	Family       string   `json:"family"`
	FamilyName   string   `json:"familyName"`
	Platform     string   `json:"platform"`
	PlatformName string   `json:"platformName"`
	Version      string   `json:"version"`
	Notes        []string `json:"notes"`
}

// LinkCheck is what an email's links and images answered.
type LinkCheck struct {
	Items []LinkStatus `json:"items"`
	// Omitted counts the URLs past the first 100, not fetched.
	Omitted   int       `json:"omitted"`
	CheckedAt time.Time `json:"checkedAt"`
}

// LinkStatus is one URL's answer: Status is nil when there was none, and
// Error says why (a refused target, a timeout).
type LinkStatus struct {
	URL       string  `json:"url"`
	Kind      string  `json:"kind"` // "link" or "image"
	Status    *int    `json:"status"`
	FinalURL  *string `json:"finalUrl"`
	Redirects int     `json:"redirects"`
	Method    string  `json:"method"`
	TimeMs    int64   `json:"timeMs"`
	Error     *string `json:"error"`
}

// SpamCheck is SpamAssassin's score of an email.
type SpamCheck struct {
	Score     float64    `json:"score"`
	Threshold float64    `json:"threshold"`
	IsSpam    bool       `json:"isSpam"`
	Rules     []SpamRule `json:"rules"`
	// Truncated is set when only the first ScoredBytes (500 KB) were
	// scored.
	ScoredBytes int       `json:"scoredBytes"`
	Truncated   bool      `json:"truncated"`
	CheckedAt   time.Time `json:"checkedAt"`
}

// SpamRule is a SpamAssassin rule that hit.
type SpamRule struct {
	Name        string  `json:"name"`
	Score       float64 `json:"score"`
	Description string  `json:"description"`
}

// AuthCheck is an email's authentication. Results are "pass", "fail",
// "softfail", "neutral", "none", "temperror" or "permerror".
type AuthCheck struct {
	DKIM []struct {
		Domain   string `json:"domain"`
		Selector string `json:"selector"`
		Result   string `json:"result"`
		Reason   string `json:"reason"`
	} `json:"dkim"`
	DKIMIgnored int `json:"dkimIgnored"`
	SPF         struct {
		Result   string `json:"result"`
		Domain   string `json:"domain"`
		ClientIP string `json:"clientIp"`
		Helo     string `json:"helo"`
		MailFrom string `json:"mailFrom"`
		Reason   string `json:"reason"`
	} `json:"spf"`
	DMARC struct {
		Result       string `json:"result"`
		Domain       string `json:"domain"`
		PolicyDomain string `json:"policyDomain"`
		Policy       string `json:"policy"`
		DKIMAligned  bool   `json:"dkimAligned"`
		SPFAligned   bool   `json:"spfAligned"`
		Reason       string `json:"reason"`
	} `json:"dmarc"`
	CheckedAt time.Time `json:"checkedAt"`
}

// HTMLCheck returns the email's HTML compatibility check.
func (c *Client) HTMLCheck(ctx context.Context, id string, refresh bool) (*HTMLCheck, error) {
	return check[HTMLCheck](ctx, c, id, "html", refresh)
}

// LinkCheck fetches the email's links and images (or returns the kept
// result) and returns what each answered.
func (c *Client) LinkCheck(ctx context.Context, id string, refresh bool) (*LinkCheck, error) {
	return check[LinkCheck](ctx, c, id, "links", refresh)
}

// SpamCheck returns the email's spam score. The server answers 409 when it
// has no spamd (MAILSINK_SPAMD_ADDR) and 502 when spamd fails.
func (c *Client) SpamCheck(ctx context.Context, id string, refresh bool) (*SpamCheck, error) {
	return check[SpamCheck](ctx, c, id, "spam", refresh)
}

// AuthCheck returns the email's DKIM, SPF and DMARC results.
func (c *Client) AuthCheck(ctx context.Context, id string, refresh bool) (*AuthCheck, error) {
	return check[AuthCheck](ctx, c, id, "auth", refresh)
}

func check[T any](ctx context.Context, c *Client, id, name string, refresh bool) (*T, error) {
	var q url.Values
	if refresh {
		q = url.Values{"refresh": {"1"}}
	}
	out := new(T)
	if err := c.do(ctx, http.MethodGet, "/v1/emails/"+url.PathEscape(id)+"/checks/"+name, q, nil, out); err != nil {
		return nil, err
	}
	return out, nil
}
