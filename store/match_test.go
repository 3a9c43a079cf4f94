package store

import (
	"testing"
	"time"
)

func TestMatcher(t *testing.T) {
	t.Parallel()
	subject := "Your Code"
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	e := &Email{Labels: []string{"signup", "Q3"}, Recipient: "New.User@Acme.test", Sender: "app@example.com", Subject: &subject, Status: StatusReceived, ReceivedAt: at}
	for _, tt := range []struct {
		name string
		q    ListQuery
		want bool
	}{
		{"no filter", ListQuery{}, true},
		{"recipient any case", ListQuery{Recipient: "new.user@acme.TEST"}, true},
		{"other recipient", ListQuery{Recipient: "old.user@acme.test"}, false},
		{"sender", ListQuery{Sender: "APP@example.com"}, true},
		{"other sender", ListQuery{Sender: "x@example.com"}, false},
		{"status", ListQuery{Status: StatusReceived}, true},
		{"other status", ListQuery{Status: StatusArchived}, false},
		{"subject contains", ListQuery{Subject: "r co"}, true},
		{"subject missing", ListQuery{Subject: "invoice"}, false},
		{"since before", ListQuery{Since: at.Add(-time.Millisecond)}, true},
		{"since equal", ListQuery{Since: at}, false},
		{"label", ListQuery{Label: "Q3"}, true},
		{"label is exact", ListQuery{Label: "q3"}, false},
		{"all at once", ListQuery{Recipient: "new.user@acme.test", Sender: "app@example.com", Status: StatusReceived, Subject: "code"}, true},
	} {
		if got := NewMatcher(tt.q).Match(e); got != tt.want {
			t.Errorf("%s: Match = %v, want %v", tt.name, got, tt.want)
		}
	}
	if NewMatcher(ListQuery{Subject: "x"}).Match(&Email{}) {
		t.Error("a subject filter matched an email without subject")
	}
}
