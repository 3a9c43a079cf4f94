package inbound_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mailsink/mailsink/internal/inbound"
	"github.com/mailsink/mailsink/internal/inbound/inboundtest"
	"github.com/mailsink/mailsink/internal/mailparse"
)

func str(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

var lim = inbound.Limits{MaxMessageBytes: 1 << 20}

func wantRefusal(t *testing.T, err error, reason inbound.Reason, contains string) {
	t.Helper()
	var e *inbound.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v, want an *inbound.Error (%s)", err, reason)
	}
	if e.Reason != reason || !strings.Contains(e.Msg, contains) {
		t.Errorf("refusal = %s %q, want %s containing %q", e.Reason, e.Msg, reason, contains)
	}
}

func TestMailgunParsedIsComposed(t *testing.T) {
	t.Parallel()
	f := inboundtest.LoadForm(t, "mailgun-parsed.json")
	f.SignMailgun("key-test", "tok-1", time.Now())
	body, ct := f.Multipart(t)
	d, err := inbound.Mailgun(ct, body, "key-test", time.Now(), lim)
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != "mailgun:tok-1" || d.Sender != "bob@example.com" || len(d.Recipients) != 1 || d.Recipients[0] != "support@acme.test" {
		t.Errorf("delivery = %q %q %v", d.ID, d.Sender, d.Recipients)
	}
	m, err := mailparse.Parse(d.Raw)
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject == nil || *m.Subject != "Re: your ticket" || m.MessageID == nil || *m.MessageID != "reply-1@example.com" {
		t.Errorf("subject, message id = %v, %v", m.Subject, m.MessageID)
	}
	if m.Body.Text == nil || !strings.Contains(*m.Body.Text, "see the log attached") || m.Body.HTML == nil || !strings.Contains(*m.Body.HTML, "cid:logo@example.com") {
		t.Errorf("text, html = %v, %v", m.Body.Text, m.Body.HTML)
	}
	if len(m.Body.Attachments) != 2 {
		t.Fatalf("attachments = %+v, want 2\n%s", m.Body.Attachments, d.Raw)
	}
	a := m.Body.Attachments[1]
	if str(a.Filename) != "logo.png" || str(a.ContentType) != "image/png" || str(a.ContentID) != "logo@example.com" {
		t.Errorf("inline attachment = %+v", a)
	}
	// The same parts compose the same bytes: a retry has the same digest.
	again, _ := inbound.Mailgun(ct, body, "key-test", time.Now(), lim)
	if !bytes.Equal(again.Raw, d.Raw) || again.Digest() != d.Digest() {
		t.Error("composing the same request twice gave different messages")
	}
}

func TestMailgunMIMEKeepsRawExact(t *testing.T) {
	t.Parallel()
	f := inboundtest.LoadForm(t, "mailgun-mime.json")
	body, ct := f.Multipart(t)
	d, err := inbound.Mailgun(ct, body, "", time.Now(), lim)
	if err != nil {
		t.Fatal(err)
	}
	if string(d.Raw) != f.Fields["body-mime"] {
		t.Errorf("raw is not body-mime byte for byte:\n%q", d.Raw)
	}
}

func TestMailgunSignature(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, tc := range []struct {
		name   string
		sign   func(f *inboundtest.Form)
		reason inbound.Reason
	}{
		{"missing", func(*inboundtest.Form) {}, inbound.BadSign},
		{"wrong key", func(f *inboundtest.Form) { f.SignMailgun("other-key", "t", now) }, inbound.BadSign},
		{"tampered token", func(f *inboundtest.Form) { f.SignMailgun("key-test", "t", now); f.Fields["token"] = "u" }, inbound.BadSign},
		{"not hex", func(f *inboundtest.Form) { f.SignMailgun("key-test", "t", now); f.Fields["signature"] = "zz" }, inbound.BadSign},
		{"too old", func(f *inboundtest.Form) { f.SignMailgun("key-test", "t", now.Add(-13*time.Hour)) }, inbound.Replayed},
		{"future", func(f *inboundtest.Form) { f.SignMailgun("key-test", "t", now.Add(2*time.Hour)) }, inbound.Replayed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := inboundtest.LoadForm(t, "mailgun-mime.json")
			tc.sign(f)
			body, ct := f.Multipart(t)
			_, err := inbound.Mailgun(ct, body, "key-test", now, lim)
			wantRefusal(t, err, tc.reason, "")
		})
	}
	// Eight hours late (Mailgun's last retry) still verifies.
	f := inboundtest.LoadForm(t, "mailgun-mime.json")
	f.SignMailgun("key-test", "t", now.Add(-8*time.Hour))
	body, ct := f.Multipart(t)
	if _, err := inbound.Mailgun(ct, body, "key-test", now, lim); err != nil {
		t.Errorf("an 8-hour-old retry: %v", err)
	}
}

func TestMailgunBadInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, ct, body, contains string }{
		{"not a form", "application/json", `{}`, "not a form"},
		{"no boundary", "multipart/form-data", "x", "boundary"},
		{"broken multipart", "multipart/form-data; boundary=b", "--b\r\nbroken", "does not decode"},
		{"no message", "application/x-www-form-urlencoded", "recipient=a%40acme.test", "neither body-mime nor"},
		{"bad headers", "application/x-www-form-urlencoded", "from=a%40b.test&message-headers=%5B1", "message-headers"},
		{"missing attachment", "application/x-www-form-urlencoded", "from=a%40b.test&attachment-count=2", "attachment-count"},
		{"too many fields", "application/x-www-form-urlencoded", strings.Repeat("a=1&", 1001), "fields"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := inbound.Mailgun(tc.ct, []byte(tc.body), "", time.Now(), lim)
			wantRefusal(t, err, inbound.Malformed, tc.contains)
		})
	}
}

func TestSendGrid(t *testing.T) {
	t.Parallel()
	raw := inboundtest.LoadForm(t, "sendgrid-raw.json")
	body, ct := raw.Multipart(t)
	d, err := inbound.SendGrid(ct, body, nil, inbound.SendGridSignature{}, time.Now(), lim)
	if err != nil {
		t.Fatal(err)
	}
	if string(d.Raw) != raw.Fields["email"] || d.Sender != "alice@example.com" || d.ID != "" {
		t.Errorf("raw delivery = %q %q %q", d.Raw, d.Sender, d.ID)
	}
	parsed := inboundtest.LoadForm(t, "sendgrid-parsed.json")
	body, ct = parsed.Multipart(t)
	if d, err = inbound.SendGrid(ct, body, nil, inbound.SendGridSignature{}, time.Now(), lim); err != nil {
		t.Fatal(err)
	}
	m, _ := mailparse.Parse(d.Raw)
	if m.MessageID == nil || *m.MessageID != "sg-1@example.com" || len(m.Cc) != 1 || len(m.Body.Attachments) != 1 ||
		str(m.Body.Attachments[0].Filename) != "invoice.pdf" || str(m.Body.Attachments[0].ContentType) != "application/pdf" {
		t.Errorf("parsed delivery composed %+v\n%s", m, d.Raw)
	}
	// Text fields in another charset are converted to UTF-8.
	latin := inboundtest.LoadForm(t, "sendgrid-parsed.json")
	delete(latin.Fields, "headers") // else its Subject is the message's
	latin.Fields["subject"] = "Caf\xe9"
	latin.Fields["charsets"] = `{"subject":"iso-8859-1","text":"UTF-8"}`
	body, ct = latin.Multipart(t)
	if d, err = inbound.SendGrid(ct, body, nil, inbound.SendGridSignature{}, time.Now(), lim); err != nil {
		t.Fatal(err)
	}
	if m, _ := mailparse.Parse(d.Raw); m.Subject == nil || *m.Subject != "Café" {
		t.Errorf("subject = %q, want Café", str(m.Subject))
	}
	if _, err := inbound.SendGrid("application/x-www-form-urlencoded", []byte("a=b"), nil, inbound.SendGridSignature{}, time.Now(), lim); err == nil {
		t.Error("a urlencoded body was accepted")
	}
	parsed.Fields["envelope"] = "{not json"
	body, ct = parsed.Multipart(t)
	_, err = inbound.SendGrid(ct, body, nil, inbound.SendGridSignature{}, time.Now(), lim)
	wantRefusal(t, err, inbound.Malformed, "envelope")
}

func TestPostmark(t *testing.T) {
	t.Parallel()
	d, err := inbound.Postmark(inboundtest.Fixture(t, "postmark-parsed.json"), lim)
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != "postmark:73e6d360-66eb-11e1-8e72-a8904824019b" || d.Sender != "bounces@postmarkapp.com" || d.Recipients[0] != "inbox@acme.test" {
		t.Errorf("delivery = %q %q %v", d.ID, d.Sender, d.Recipients)
	}
	m, _ := mailparse.Parse(d.Raw)
	if len(m.Body.Attachments) != 2 || str(m.Body.Attachments[1].ContentID) != "logo@postmarkapp.com" || m.Subject == nil || *m.Subject != "Test subject" {
		t.Errorf("composed %+v\n%s", m.Body.Attachments, d.Raw)
	}
	raw, err := inbound.Postmark(inboundtest.Fixture(t, "postmark-raw.json"), lim)
	if err != nil || !strings.HasPrefix(string(raw.Raw), "From: Postmarkapp Support") {
		t.Errorf("raw: %v %q", err, raw.Raw)
	}
	var obj map[string]any
	json.Unmarshal(inboundtest.Fixture(t, "postmark-parsed.json"), &obj)
	obj["Attachments"].([]any)[0].(map[string]any)["Content"] = "not base64!"
	bad, _ := json.Marshal(obj)
	_, err = inbound.Postmark(bad, lim)
	wantRefusal(t, err, inbound.Malformed, "not base64")
	_, err = inbound.Postmark([]byte(`{"MessageID": "x"}`), lim)
	wantRefusal(t, err, inbound.Malformed, "neither RawEmail")
	_, err = inbound.Postmark([]byte(`[`), lim)
	wantRefusal(t, err, inbound.Malformed, "not Postmark")
}

const topic = "arn:aws:sns:us-east-1:123456789012:inbound-mail"

func TestSES(t *testing.T) {
	t.Parallel()
	srv := inboundtest.NewSNS(t)
	v := inbound.NewSNS(srv.Client(), nil)
	ctx := context.Background()
	received := string(inboundtest.Fixture(t, "ses-received.json"))
	for _, version := range []string{"1", "2"} {
		m := inboundtest.Notification(topic, "msg-"+version, received)
		m.SignatureVersion = version
		res, err := v.SES(ctx, "Notification", srv.Sign(t, m), []string{topic}, lim)
		if err != nil {
			t.Fatalf("SignatureVersion %s: %v", version, err)
		}
		d := res.Delivery
		if d == nil || d.ID != "sns:msg-"+version || d.Sender != "carol@example.com" || d.Recipients[0] != "ops@acme.test" || !strings.Contains(string(d.Raw), "Disk 93% full") {
			t.Errorf("delivery = %+v", d)
		}
	}
	// base64 content.
	var n map[string]any
	json.Unmarshal([]byte(received), &n)
	n["content"] = base64.StdEncoding.EncodeToString([]byte(n["content"].(string)))
	n["receipt"].(map[string]any)["action"].(map[string]any)["encoding"] = "BASE64"
	b64, _ := json.Marshal(n)
	res, err := v.SES(ctx, "", srv.Sign(t, inboundtest.Notification(topic, "b64", string(b64))), []string{topic}, lim)
	if err != nil || !strings.Contains(string(res.Delivery.Raw), "Disk 93% full") {
		t.Errorf("base64 content: %v", err)
	}
	// A subscription is confirmed by fetching SubscribeURL.
	res, err = v.SES(ctx, "SubscriptionConfirmation", srv.Sign(t, inboundtest.Confirmation(topic, "2336412f37f")), []string{topic}, lim)
	if err != nil || res.Delivery != nil || srv.Confirmed.Load() != 1 {
		t.Errorf("confirmation: %v, confirmed %d times", err, srv.Confirmed.Load())
	}
}

func TestSESRefusals(t *testing.T) {
	t.Parallel()
	srv := inboundtest.NewSNS(t)
	v := inbound.NewSNS(srv.Client(), nil)
	ctx := context.Background()
	received := string(inboundtest.Fixture(t, "ses-received.json"))
	signed := func(edit func(m *inboundtest.Message)) []byte {
		m := inboundtest.Notification(topic, "id", received)
		edit(m)
		return srv.Sign(t, m)
	}
	n := map[string]any{}
	json.Unmarshal([]byte(received), &n)
	n["content"] = "%%%"
	n["receipt"].(map[string]any)["action"].(map[string]any)["encoding"] = "BASE64"
	badBase64, _ := json.Marshal(n)
	for _, tc := range []struct {
		name     string
		body     []byte
		topics   []string
		reason   inbound.Reason
		contains string
	}{
		{"unknown topic", signed(func(*inboundtest.Message) {}), []string{"arn:aws:sns:us-east-1:123456789012:other"}, inbound.Refused, "snsTopicArns"},
		{"no topics listed", signed(func(*inboundtest.Message) {}), nil, inbound.Refused, "snsTopicArns"},
		{"tampered", bytes.Replace(signed(func(*inboundtest.Message) {}), []byte("Disk 93"), []byte("Disk 94"), 1), []string{topic}, inbound.BadSign, "does not verify"},
		{"cert on another host", signed(func(m *inboundtest.Message) { m.SigningCertURL = "https://evil.example.com/cert.pem" }), []string{topic}, inbound.BadSign, "SigningCertURL"},
		{"cert over http", signed(func(m *inboundtest.Message) { m.SigningCertURL = "http://" + inboundtest.SNSHost + "/c.pem" }), []string{topic}, inbound.BadSign, "SigningCertURL"},
		{"lookalike host", signed(func(m *inboundtest.Message) {
			m.SigningCertURL = "https://sns.us-east-1.amazonaws.com.evil.example/c.pem"
		}), []string{topic}, inbound.BadSign, "SigningCertURL"},
		{"bad version", signed(func(m *inboundtest.Message) { m.SignatureVersion = "3" }), []string{topic}, inbound.BadSign, "SignatureVersion"},
		{"S3 action", signed(func(m *inboundtest.Message) { m.Message = string(inboundtest.Fixture(t, "ses-s3-action.json")) }), []string{topic}, inbound.Refused, "use the SNS action"},
		{"bad base64", signed(func(m *inboundtest.Message) { m.Message = string(badBase64) }), []string{topic}, inbound.Malformed, "not base64"},
		{"not JSON", []byte("{"), []string{topic}, inbound.Malformed, "not an SNS message"},
		{"message not SES", signed(func(m *inboundtest.Message) { m.Message = "hello" }), []string{topic}, inbound.Malformed, "not an SES"},
		{"subscribe elsewhere", srv.Sign(t, func() *inboundtest.Message {
			m := inboundtest.Confirmation(topic, "2336412f37f")
			m.SubscribeURL = "https://169.254.169.254/latest/meta-data"
			return m
		}()), []string{topic}, inbound.BadSign, "SubscribeURL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v.SES(ctx, "", tc.body, tc.topics, lim)
			wantRefusal(t, err, tc.reason, tc.contains)
		})
	}
	if srv.Confirmed.Load() != 0 {
		t.Error("a SubscribeURL was fetched for a refused message")
	}
}

// TestSESCertificateOverride: with MAILSINK_SNS_SIGNING_CERT_FILE's
// certificate nothing is fetched, and a message signed by another key is
// refused.
func TestSESCertificateOverride(t *testing.T) {
	t.Parallel()
	srv, other := inboundtest.NewSNS(t), inboundtest.NewSNS(t)
	v := inbound.NewSNS(other.Client(), srv.Cert) // would fetch other's certificate
	received := string(inboundtest.Fixture(t, "ses-received.json"))
	m := inboundtest.Notification(topic, "id", received)
	m.SigningCertURL = "https://elsewhere.example/cert.pem"
	if _, err := v.SES(context.Background(), "", srv.Sign(t, m), []string{topic}, lim); err != nil {
		t.Errorf("signed by the override's key: %v", err)
	}
	_, err := v.SES(context.Background(), "", other.Sign(t, inboundtest.Notification(topic, "id", received)), []string{topic}, lim)
	wantRefusal(t, err, inbound.BadSign, "does not verify")
}

// TestSESRedirectNotFollowed: SNS answering the certificate's or the
// SubscribeURL's GET with a redirect is an error (SNS will retry), and
// its target is never fetched.
func TestSESRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	srv := inboundtest.NewSNS(t)
	v := inbound.NewSNS(srv.Client(), nil)
	ctx := context.Background()
	received := string(inboundtest.Fixture(t, "ses-received.json"))

	// The server answers /redirect/<cert> with 302 to the certificate
	// itself: a client that followed it would verify the message.
	m := inboundtest.Notification(topic, "redirected-cert", received)
	m.SigningCertURL = "https://" + inboundtest.SNSHost + "/redirect/SimpleNotificationService-test.pem"
	_, err := v.SES(ctx, "", srv.Sign(t, m), []string{topic}, lim)
	if !errors.Is(err, inbound.ErrUnreachable) || !strings.Contains(err.Error(), "status 302, a redirect") {
		t.Errorf("certificate behind a redirect: %v, want an ErrUnreachable naming the redirect", err)
	}
	if n := srv.Redirected.Load(); n != 1 {
		t.Errorf("the server redirected %d times, want 1", n)
	}

	c := inboundtest.Confirmation(topic, "redirected-token")
	c.SubscribeURL = "https://" + inboundtest.SNSHost + "/redirect/confirm?Action=ConfirmSubscription&TopicArn=" + topic + "&Token=redirected-token"
	_, err = v.SES(ctx, "", srv.Sign(t, c), []string{topic}, lim)
	if !errors.Is(err, inbound.ErrUnreachable) || !strings.Contains(err.Error(), "status 302, a redirect") {
		t.Errorf("SubscribeURL behind a redirect: %v, want an ErrUnreachable naming the redirect", err)
	}
	if n := srv.Redirected.Load(); n != 2 {
		t.Errorf("the server redirected %d times, want 2", n)
	}
	if n := srv.ConfirmedToken("redirected-token"); n != 0 {
		t.Errorf("the redirect's target (the confirmation) was fetched %d times, want 0", n)
	}

	// The same messages with the URLs SNS gives are verified and
	// confirmed by the same client: only the redirect failed.
	if _, err := v.SES(ctx, "", srv.Sign(t, inboundtest.Notification(topic, "direct", received)), []string{topic}, lim); err != nil {
		t.Errorf("direct certificate: %v", err)
	}
	if _, err := v.SES(ctx, "", srv.Sign(t, inboundtest.Confirmation(topic, "direct-token")), []string{topic}, lim); err != nil || srv.ConfirmedToken("direct-token") != 1 {
		t.Errorf("direct confirmation: %v, confirmed %d times", err, srv.ConfirmedToken("direct-token"))
	}
}

func TestSendGridSignature(t *testing.T) {
	t.Parallel()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	body, ct := inboundtest.LoadForm(t, "sendgrid-raw.json").Multipart(t)
	good := inboundtest.SignSendGrid(t, key, body)
	d, err := inbound.SendGrid(ct, body, &key.PublicKey, good, time.Now(), lim)
	if err != nil {
		t.Fatalf("a signed request: %v", err)
	}
	// The delivery id is the signed content: the same request again has
	// it (a retry), the same body signed at another time does not.
	if !strings.HasPrefix(d.ID, "sendgrid:") || len(d.ID) != len("sendgrid:")+64 {
		t.Errorf("delivery id %q, want sendgrid: and a SHA-256 in hex", d.ID)
	}
	if again, err := inbound.SendGrid(ct, body, &key.PublicKey, good, time.Now(), lim); err != nil || again.ID != d.ID {
		t.Errorf("the same request again: id %q (%v), want %q", again.ID, err, d.ID)
	}
	signedAt, _ := strconv.ParseInt(good.Timestamp, 10, 64)
	later := inboundtest.SignSendGridAt(t, key, body, strconv.FormatInt(signedAt+1, 10))
	if resigned, err := inbound.SendGrid(ct, body, &key.PublicKey, later, time.Now(), lim); err != nil || resigned.ID == d.ID {
		t.Errorf("signed a second later: id %q (%v), want one other than %q", resigned.ID, err, d.ID)
	}
	if unsigned, err := inbound.SendGrid(ct, body, nil, inbound.SendGridSignature{}, time.Now(), lim); err != nil || unsigned.ID != "" {
		t.Errorf("without a key: id %q (%v), want none", unsigned.ID, err)
	}
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for _, tc := range []struct {
		name string
		sig  inbound.SendGridSignature
		body []byte
	}{
		{"unsigned", inbound.SendGridSignature{}, body},
		{"other key", inboundtest.SignSendGrid(t, other, body), body},
		{"tampered body", good, bytes.Replace(body, []byte("Raw body"), []byte("Raw bodY"), 1)},
		{"other timestamp", inbound.SendGridSignature{Signature: good.Signature, Timestamp: good.Timestamp + "1"}, body},
		{"not base64", inbound.SendGridSignature{Signature: "%%", Timestamp: good.Timestamp}, body},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := inbound.SendGrid(ct, tc.body, &key.PublicKey, tc.sig, time.Now(), lim)
			wantRefusal(t, err, inbound.BadSign, "")
		})
	}
}

// TestSendGridTimestampWindow: a signed request is accepted only within
// SendGridMaxAge of its timestamp, either way; a signature over a
// timestamp that is not Unix seconds is refused as unsigned.
func TestSendGridTimestampWindow(t *testing.T) {
	t.Parallel()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	body, ct := inboundtest.LoadForm(t, "sendgrid-raw.json").Multipart(t)
	now := time.Unix(1_767_225_600, 0) // 2026-01-01
	unix := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).Unix(), 10) }
	for _, tc := range []struct {
		name, ts string
		reason   inbound.Reason // "" when accepted
		contains string
	}{
		{"now", unix(0), "", ""},
		{"a second short of the window, past", unix(-inbound.SendGridMaxAge + time.Second), "", ""},
		{"a second short of the window, future", unix(inbound.SendGridMaxAge - time.Second), "", ""},
		{"a second too old", unix(-inbound.SendGridMaxAge - time.Second), inbound.Replayed, "outside the 5m0s"},
		{"a second too far ahead", unix(inbound.SendGridMaxAge + time.Second), inbound.Replayed, "outside the 5m0s"},
		{"dated 1970", "0", inbound.Replayed, "1970-01-01T00:00:00Z"},
		{"not Unix seconds", "2026-01-01T00:00:00Z", inbound.BadSign, "not Unix seconds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sig := inboundtest.SignSendGridAt(t, key, body, tc.ts)
			d, err := inbound.SendGrid(ct, body, &key.PublicKey, sig, now, lim)
			if tc.reason == "" {
				if err != nil || d.ID == "" {
					t.Errorf("timestamp %s: %v, want a delivery with an id", tc.ts, err)
				}
				return
			}
			wantRefusal(t, err, tc.reason, tc.contains)
		})
	}
}
