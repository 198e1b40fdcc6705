package webhook

import (
	"crypto/rand"
	"crypto/sha256"
	"strconv"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
)

// triggeredFactID derives the id of the webhook.triggered fact for one
// (triggering fact, config, config version): a valid fct_<ULID> whose time
// is the triggering fact's (from its ULID, else fallbackMS) and whose
// entropy is a hash of the three. Matching the same fact again (the stream
// delivers at least once, and several processes may match) yields the same
// id, which the store's unique fact id refuses, so no delivery is created
// twice.
func triggeredFactID(sourceFactID, configID string, configVersion, fallbackMS int64) string {
	ms := uint64(max(fallbackMS, 0))
	if rest, ok := strings.CutPrefix(sourceFactID, "fct_"); ok {
		if u, err := ulid.ParseStrict(rest); err == nil {
			ms = u.Time()
		}
	}
	h := sha256.Sum256([]byte(sourceFactID + "\x00" + configID + "\x00" + strconv.FormatInt(configVersion, 10)))
	var u ulid.ULID
	_ = u.SetTime(min(ms, ulid.MaxTime()))
	_ = u.SetEntropy(h[:10])
	return "fct_" + u.String()
}

// deliveryID is the contract's delivery id:
// del_<triggered_fact_id>_<webhook_config_id>_<unix_seconds>.
func deliveryID(triggeredFactID, configID string, unixSeconds int64) string {
	return "del_" + triggeredFactID + "_" + configID + "_" + strconv.FormatInt(unixSeconds, 10)
}

// newULID returns a random ULID at t.
func newULID(t time.Time) ulid.ULID {
	u, err := ulid.New(ulid.Timestamp(t), rand.Reader)
	if err != nil {
		return ulid.Make()
	}
	return u
}

// newFactID returns a fresh fct_ id at t.
func newFactID(t time.Time) string { return "fct_" + newULID(t).String() }

// newDLQMessageID returns a fresh dead-letter message id.
func newDLQMessageID(t time.Time) string { return "dlq_" + newULID(t).String() }

// newSecretRef returns a fresh reference, webhook_secret_ followed by a
// lowercase ULID.
func newSecretRef(t time.Time) string {
	return "webhook_secret_" + strings.ToLower(newULID(t).String())
}
