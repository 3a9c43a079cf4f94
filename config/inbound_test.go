package config

import (
	"strings"
	"testing"
)

func TestAccountInbound(t *testing.T) {
	accs, err := ParseAccounts([]byte(`
accounts:
  - slug: acme
    name: Acme
    apiKeys: [k1]
    inbound:
      mailgunSigningKey: "key-abc"
      snsTopicArns: ["arn:aws:sns:us-east-1:123456789012:inbound-mail", "arn:aws-cn:sns:cn-north-1:123456789012:mail.fifo"]
      sendgridVerificationKey: MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEmgmjvPAR/Lmwn2teL2WJUDIx35PqsnLKjPhPbrKkfMg6vK4NZQB1VeFSKbV7whQbEJRFHjF8+1zJxsXRP1GbWw==
  - slug: plain
    name: Plain
    apiKeys: [k2]
`))
	if err != nil {
		t.Fatal(err)
	}
	in := accs[0].Inbound
	if in.MailgunSigningKey != "key-abc" || len(in.SNSTopicArns) != 2 {
		t.Errorf("inbound = %+v", in)
	}
	if in.SendGridKey == nil || in.SendGridKey.Curve.Params().Name != "P-256" {
		t.Errorf("sendgridVerificationKey not read: %v", in.SendGridKey)
	}
	if accs[1].Inbound.MailgunSigningKey != "" || accs[1].Inbound.SNSTopicArns != nil {
		t.Errorf("an account without inbound got %+v", accs[1].Inbound)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"inbound: {mailgunKey: x}", "accounts[0].inbound.mailgunKey: unknown key; the keys here are mailgunSigningKey, snsTopicArns, sendgridVerificationKey"},
		{"inbound: {snsTopicArns: [arn:aws:s3:::bucket]}", "is not an SNS topic ARN"},
		{"inbound: {snsTopicArns: arn:aws:sns:us-east-1:123456789012:x}", "must be a list"},
		{`inbound: {mailgunSigningKey: " key "}`, "surrounding spaces"},
		{`inbound: {sendgridVerificationKey: "not base64!"}`, "sendgridVerificationKey: is not base64"},
		{`inbound: {sendgridVerificationKey: "aGVsbG8="}`, "is not a public key"},
	} {
		_, err := ParseAccounts([]byte("accounts:\n  - slug: a\n    name: A\n    apiKeys: [k]\n    " + tc.yaml + "\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
