package store

import (
	"reflect"
	"testing"
)

func TestTranscriptWithoutCredentials(t *testing.T) {
	tests := []struct {
		name             string
		identity         string
		params           []string
		wantIdentity     string
		wantParams       []string
		wantParamsAbsent bool
	}{
		{"key as user name", "acme-key", []string{"SIZE=10", "AUTH=<acme-key@acme.test>"}, Redacted, []string{"SIZE=10", "AUTH=" + Redacted}, false},
		{"AUTH in lower case", "u", []string{"auth=<u@x.test>"}, Redacted, []string{"AUTH=" + Redacted}, false},
		{"AUTH=<> names no one", "u", []string{"AUTH=<>"}, Redacted, []string{"AUTH=<>"}, false},
		{"already redacted", Redacted, []string{"AUTH=" + Redacted}, Redacted, []string{"AUTH=" + Redacted}, false},
		{"no AUTH", "", []string{"BODY=8BITMIME"}, "", []string{"BODY=8BITMIME"}, false},
		{"no parameters stay none", "", nil, "", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stored := &Transcript{Helo: "h", AuthIdentity: tt.identity, Mail: TranscriptCommand{Address: "a@x.test", Params: tt.params}}
			before := append([]string(nil), tt.params...)
			got := stored.WithoutCredentials()
			if got.AuthIdentity != tt.wantIdentity || !reflect.DeepEqual(got.Mail.Params, tt.wantParams) || (got.Mail.Params == nil) != tt.wantParamsAbsent {
				t.Errorf("got identity %q params %#v, want %q %#v", got.AuthIdentity, got.Mail.Params, tt.wantIdentity, tt.wantParams)
			}
			if got.Helo != "h" || got.Mail.Address != "a@x.test" {
				t.Errorf("got %+v, want the rest as stored", got)
			}
			if stored.AuthIdentity != tt.identity || !reflect.DeepEqual(stored.Mail.Params, before) {
				t.Errorf("the stored transcript was changed: %+v", stored)
			}
		})
	}
	if (*Transcript)(nil).WithoutCredentials() != nil {
		t.Error("nil transcript: want nil")
	}
}
