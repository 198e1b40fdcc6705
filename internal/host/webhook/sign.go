package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"strings"
)

// Headers of a delivery (the contract's, and the optional Standard
// Webhooks ones).
const (
	HeaderSignature     = "X-Svc-Signature"
	HeaderTimestamp     = "X-Svc-Timestamp"
	HeaderDeliveryID    = "X-Svc-Delivery-Id"
	HeaderConfigVersion = "X-Svc-Config-Version"
	HeaderAttempt       = "X-Svc-Attempt"
	UserAgent           = "svc-webhooks/1.0"

	HeaderStandardID        = "webhook-id"
	HeaderStandardTimestamp = "webhook-timestamp"
	HeaderStandardSignature = "webhook-signature"
)

// Sign returns the X-Svc-Signature value: "sha256=" and the lowercase hex
// HMAC-SHA256, keyed with the secret, of "<timestamp>.<body>".
func Sign(secret []byte, timestamp int64, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(strconv.FormatInt(timestamp, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// SignStandard returns the Standard Webhooks webhook-signature value,
// "v1," and the base64 HMAC-SHA256 of "<id>.<timestamp>.<body>". The key is
// the secret's base64 part after "whsec_", as that specification says;
// a secret not of that form is used as it is.
func SignStandard(secret string, id string, timestamp int64, body []byte) string {
	key := []byte(secret)
	if rest, ok := strings.CutPrefix(secret, "whsec_"); ok {
		if k, err := base64.StdEncoding.DecodeString(rest); err == nil {
			key = k
		}
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(strconv.FormatInt(timestamp, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}
