// Package auth issues and checks Factline API keys.
//
// A key is "fl_<mode>_<random>": 32 random bytes in base62 after a readable
// prefix. Only its SHA-256 is stored; a key is high-entropy, so a fast hash
// is as good as a slow one and keeps authentication off the hot path's
// budget. The stored record, not the prefix, decides tenant and mode.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/factline/factline/internal/host/id"
	"github.com/factline/factline/internal/host/store"
)

// Modes a key can have.
const (
	ModeLive  = "live"
	ModeTest  = "test"
	ModeAdmin = "admin"
)

// Modes lists the valid modes.
var Modes = []string{ModeLive, ModeTest, ModeAdmin}

// ErrInvalidKey covers a missing, malformed, unknown or revoked key; callers
// must not tell them apart to clients.
var ErrInvalidKey = errors.New("invalid or missing API key")

var tenantRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$`)

// wellFormed reports whether key has the shape of a key,
// ^[a-z][a-z0-9]*(_[a-z0-9]+)*_[A-Za-z0-9]{16,128}$: lowercase words joined
// by single underscores, then an underscore and 16 to 128 letters and
// digits. It runs on every authenticated request, so it is written out
// rather than matched with a regular expression.
func wellFormed(key string) bool {
	last := strings.LastIndexByte(key, '_')
	if last < 1 {
		return false
	}
	secret := key[last+1:]
	if len(secret) < 16 || len(secret) > 128 {
		return false
	}
	for i := 0; i < len(secret); i++ {
		if c := secret[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	prefix := key[:last]
	if c := prefix[0]; c < 'a' || c > 'z' {
		return false
	}
	for i := 1; i < len(prefix); i++ {
		switch c := prefix[i]; {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '_' && prefix[i-1] != '_' && i < len(prefix)-1:
		default:
			return false
		}
	}
	return true
}

// Principal is the authenticated caller.
type Principal struct {
	TenantID string
	Mode     string
	KeyID    string
}

// IsAdmin reports whether the caller holds an admin key.
func (p *Principal) IsAdmin() bool { return p != nil && p.Mode == ModeAdmin }

// Hash returns the stored form of a key.
func Hash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// randomToken returns n base62 characters from crypto/rand.
func randomToken(n int) (string, error) {
	b := make([]byte, n)
	max := big.NewInt(int64(len(base62)))
	for i := range b {
		x, err := rand.Int(rand.Reader, max)
		if err != nil {
			return "", err
		}
		b[i] = base62[x.Int64()]
	}
	return string(b), nil
}

// ValidTenant reports whether a tenant id is well formed.
func ValidTenant(t string) bool { return tenantRe.MatchString(t) }

// ValidMode reports whether m is a key mode.
func ValidMode(m string) bool { return m == ModeLive || m == ModeTest || m == ModeAdmin }

// CreateKey issues a new key for a tenant and stores its hash. The returned
// key is shown once and cannot be recovered.
func CreateKey(ctx context.Context, ks store.KeyStore, tenant, mode, name string, now time.Time) (string, *store.APIKey, error) {
	if !ValidTenant(tenant) {
		return "", nil, fmt.Errorf("tenant %q: use 1-64 letters, digits, _ . and -", tenant)
	}
	if !ValidMode(mode) {
		return "", nil, fmt.Errorf("mode %q: use live, test or admin", mode)
	}
	tok, err := randomToken(43) // 43 base62 chars carry 256 bits
	if err != nil {
		return "", nil, fmt.Errorf("generate key: %w", err)
	}
	key := "fl_" + mode + "_" + tok
	rec := &store.APIKey{
		ID:        id.New(id.APIKey),
		TenantID:  tenant,
		Mode:      mode,
		Name:      name,
		Prefix:    key[:len("fl_"+mode+"_")+6],
		Hash:      Hash(key),
		CreatedAt: now.UnixMilli(),
	}
	if err := ks.CreateAPIKey(ctx, rec); err != nil {
		return "", nil, fmt.Errorf("store key: %w", err)
	}
	return key, rec, nil
}

// Authenticator checks presented keys against the store, with a small
// cache so a hot key costs no database round trip. A revoked key stops
// working in this process at once and in others within CacheTTL.
type Authenticator struct {
	keys store.KeyStore
	ttl  time.Duration
	now  func() time.Time

	mu    sync.Mutex
	cache map[[sha256.Size]byte]cached // by the key's SHA-256
}

type cached struct {
	p       *Principal // nil: known invalid
	expires time.Time
}

// CacheTTL is how long a key lookup is reused.
const CacheTTL = 10 * time.Second

// negativeTTL is shorter: a key created in another process should work
// soon after a failed attempt with it.
const negativeTTL = time.Second

const maxCached = 10000

// NewAuthenticator returns an Authenticator over a key store.
func NewAuthenticator(keys store.KeyStore) *Authenticator {
	return &Authenticator{keys: keys, ttl: CacheTTL, now: time.Now, cache: map[[sha256.Size]byte]cached{}}
}

// Authenticate returns the principal of a key, or ErrInvalidKey.
func (a *Authenticator) Authenticate(ctx context.Context, key string) (*Principal, error) {
	if !wellFormed(key) {
		return nil, ErrInvalidKey
	}
	sum := sha256.Sum256([]byte(key))
	now := a.now()
	a.mu.Lock()
	c, ok := a.cache[sum]
	a.mu.Unlock()
	if ok && now.Before(c.expires) {
		if c.p == nil {
			return nil, ErrInvalidKey
		}
		return c.p, nil
	}
	rec, err := a.keys.GetAPIKeyByHash(ctx, hex.EncodeToString(sum[:]))
	var p *Principal
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return nil, fmt.Errorf("auth: look up key: %w", err)
	case rec.RevokedAt == nil:
		p = &Principal{TenantID: rec.TenantID, Mode: rec.Mode, KeyID: rec.ID}
	}
	ttl := a.ttl
	if p == nil {
		ttl = negativeTTL
	}
	a.mu.Lock()
	if len(a.cache) >= maxCached {
		clear(a.cache)
	}
	a.cache[sum] = cached{p: p, expires: now.Add(ttl)}
	a.mu.Unlock()
	if p == nil {
		return nil, ErrInvalidKey
	}
	return p, nil
}

// Revoke revokes a key and forgets it in this process's cache.
func (a *Authenticator) Revoke(ctx context.Context, keyID string) error {
	if err := a.keys.RevokeAPIKey(ctx, keyID, a.now().UnixMilli()); err != nil {
		return err
	}
	a.mu.Lock()
	for h, c := range a.cache {
		if c.p != nil && c.p.KeyID == keyID {
			delete(a.cache, h)
		}
	}
	a.mu.Unlock()
	return nil
}

// Recheck authenticates key against the store, not the cache, and leaves
// the answer cached: a caller that must see a revocation made by another
// process at once (a console session, checked on each of its requests)
// uses it. Requests that follow with the same key see the same answer.
func (a *Authenticator) Recheck(ctx context.Context, key string) (*Principal, error) {
	sum := sha256.Sum256([]byte(key))
	a.mu.Lock()
	delete(a.cache, sum)
	a.mu.Unlock()
	return a.Authenticate(ctx, key)
}
