// Package id generates Factline identifiers of the form <prefix>_<ulid>.
//
// ULIDs sort by creation time, so ids double as stable, time-ordered keys for
// cursor pagination. Generation is safe for concurrent use and monotonic
// within one process even when many ids share a millisecond.
package id

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// Prefixes fixed by the contract (README.md, "The platform API").
const (
	Entity  = "ent"
	Fact    = "fct"
	Config  = "cfg"
	Request = "req"
	APIKey  = "key"
)

var (
	mu      sync.Mutex
	entropy = ulid.Monotonic(rand.Reader, 0)
)

// New returns a fresh identifier with the given prefix, for example
// "fct_01JD3X8Y9Z...".
func New(prefix string) string {
	var text [ulid.EncodedSize]byte
	_ = NewULID(time.Now()).MarshalTextTo(text[:]) // fails only on a short buffer
	var b strings.Builder
	b.Grow(len(prefix) + 1 + len(text))
	b.WriteString(prefix)
	b.WriteByte('_')
	b.Write(text[:])
	return b.String()
}

// NewULID returns a ULID for time t, monotonic within this process.
func NewULID(t time.Time) ulid.ULID {
	mu.Lock()
	defer mu.Unlock()
	u, err := ulid.New(ulid.Timestamp(t), entropy)
	if err != nil {
		// Monotonic entropy overflows only after 2^80 ids in one
		// millisecond; fall back to fresh entropy rather than fail.
		return ulid.Make()
	}
	return u
}

// HasPrefix reports whether s is a well-formed id with the given prefix.
func HasPrefix(s, prefix string) bool {
	rest, ok := strings.CutPrefix(s, prefix+"_")
	if !ok {
		return false
	}
	_, err := ulid.ParseStrict(rest)
	return err == nil
}

// Derive returns a deterministic id with the given prefix for something
// caused by parent (an id such as a fact id) and identified by parts: the
// same inputs always give the same id, so a unique constraint turns a
// repeated effect into a detectable duplicate. The ULID keeps the parent's
// time when the parent is a ULID-based id, so derived ids sort near their
// cause.
func Derive(prefix, parent string, parts ...string) string {
	h := sha256.New()
	h.Write([]byte(parent))
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	sum := h.Sum(nil)
	var u ulid.ULID
	if i := strings.LastIndexByte(parent, '_'); i >= 0 {
		if pu, err := ulid.ParseStrict(parent[i+1:]); err == nil {
			u = pu
		}
	}
	ms := u.Time()
	if ms == 0 {
		ms = binary.BigEndian.Uint64(sum[:8]) & (1<<48 - 1)
	}
	if err := u.SetTime(ms); err != nil {
		_ = u.SetTime(0) // 0 is in range
	}
	copy(u[6:], sum[8:18])
	return prefix + "_" + u.String()
}
