package smtpd

import (
	"testing"

	"github.com/mailsink/mailsink/store"
)

// TestFaultReplyEnhancedCode checks how a rule's text becomes a reply.
func TestFaultReplyEnhancedCode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		code       int
		text, want string
	}{
		{451, "4.3.2 Later", "451 4.3.2 Later"},
		{451, "5.3.2 Wrong class", "451 4.0.0 5.3.2 Wrong class"},
		{550, "Plain text", "550 5.0.0 Plain text"},
		{421, "", "421 4.0.0 Fault injected by mailsink"},
		{554, "5.7.1", "554 5.0.0 5.7.1"},
	}
	for _, tt := range tests {
		if got := replyText(faultReply(&store.FaultReply{Code: tt.code, Text: tt.text})); got != tt.want {
			t.Errorf("%d %q: got %q, want %q", tt.code, tt.text, got, tt.want)
		}
	}
}
