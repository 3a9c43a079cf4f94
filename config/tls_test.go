package config

import (
	"strings"
	"testing"
)

// TestTLSSettingsMustFitTogether checks that TLS settings without what they
// need stop start-up with an error naming the setting.
func TestTLSSettingsMustFitTogether(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"MAILSINK_SMTP_TLS_CERT": "c.pem"}, "MAILSINK_SMTP_TLS_KEY"},
		{map[string]string{"MAILSINK_SMTP_TLS_KEY": "k.pem"}, "MAILSINK_SMTP_TLS_CERT"},
		{map[string]string{"MAILSINK_SMTP_TLS_CERT": "c.pem", "MAILSINK_SMTP_TLS_KEY": "k.pem", "MAILSINK_SMTP_TLS_AUTO": "a.test"}, "MAILSINK_SMTP_TLS_AUTO"},
		{map[string]string{"MAILSINK_SMTPS_ADDR": ":1465"}, "MAILSINK_SMTPS_ADDR needs a certificate"},
		{map[string]string{"MAILSINK_HTTPS_ADDR": ":8443"}, "MAILSINK_HTTPS_ADDR needs a certificate"},
		{map[string]string{"MAILSINK_SMTP_REQUIRE_TLS": "true"}, "MAILSINK_SMTP_REQUIRE_TLS needs a certificate"},
		{map[string]string{"MAILSINK_IMAP_ADDR": ":1143", "MAILSINK_SMTP_AUTH_ALLOW_INSECURE": "false"}, "MAILSINK_IMAP_ADDR with MAILSINK_SMTP_AUTH_ALLOW_INSECURE=false needs a certificate"},
		{map[string]string{"MAILSINK_POP3_ADDR": ":1110", "MAILSINK_SMTP_AUTH_ALLOW_INSECURE": "false"}, "MAILSINK_POP3_ADDR with MAILSINK_SMTP_AUTH_ALLOW_INSECURE=false needs a certificate"},
		{map[string]string{"MAILSINK_SMTP_TLS_AUTO": "mailsink", "MAILSINK_IMAPS_ADDR": ":1993"}, "MAILSINK_IMAPS_ADDR is set but MAILSINK_IMAP_ADDR is not"},
		{map[string]string{"MAILSINK_SMTP_TLS_AUTO": "mailsink", "MAILSINK_POP3S_ADDR": ":1995"}, "MAILSINK_POP3S_ADDR is set but MAILSINK_POP3_ADDR is not"},
		{map[string]string{"MAILSINK_SMTP_TLS_AUTO": "bad name!"}, "MAILSINK_SMTP_TLS_AUTO"},
		{map[string]string{"MAILSINK_SMTP_TLS_AUTO": " , "}, "MAILSINK_SMTP_TLS_AUTO"},
		{map[string]string{"MAILSINK_SMTPS_ADDR": "x"}, "MAILSINK_SMTPS_ADDR"},
	} {
		tc.env["MAILSINK_API_KEY"] = "k"
		_, err := load(t, tc.env)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.env, err, tc.want)
		}
	}
	c, err := load(t, map[string]string{"MAILSINK_API_KEY": "k", "MAILSINK_SMTP_TLS_AUTO": "mailsink, mailsink.test,10.0.0.5,my_mailsink",
		"MAILSINK_SMTPS_ADDR": ":1465", "MAILSINK_HTTPS_ADDR": ":8443", "MAILSINK_SMTP_REQUIRE_TLS": "true",
		"MAILSINK_IMAP_ADDR": ":1143", "MAILSINK_POP3_ADDR": ":1110", "MAILSINK_SMTP_AUTH_ALLOW_INSECURE": "false"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.TLS.AutoHosts, ","); got != "mailsink,mailsink.test,10.0.0.5,my_mailsink" || !c.TLS.Enabled() || !c.SMTP.RequireTLS ||
		c.SMTP.TLSAddr != ":1465" || c.HTTP.TLSAddr != ":8443" {
		t.Errorf("got %+v %+v %+v", c.TLS, c.SMTP, c.HTTP)
	}
}
