package webhooks

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
)

// secretPrefix starts every webhook secret, as Standard Webhooks does.
const secretPrefix = "whsec_"

// NewSecret returns a new webhook secret: "whsec_" and the base64 of 32
// random bytes.
func NewSecret() string {
	b := make([]byte, 32)
	rand.Read(b)
	return secretPrefix + base64.StdEncoding.EncodeToString(b)
}

// Sign returns the webhook-signature header of a delivery: "v1," and the
// base64 of HMAC-SHA256 over "id.timestamp.body", keyed with the decoded
// secret (the Standard Webhooks scheme).
func Sign(secret, id string, timestamp int64, body []byte) (string, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, secretPrefix))
	if err != nil {
		return "", errors.New("webhooks: secret is not whsec_ and base64")
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(strconv.FormatInt(timestamp, 10)))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)), nil
}
