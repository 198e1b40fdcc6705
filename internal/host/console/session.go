package console

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/factline/factline/internal/host/auth"
	"github.com/factline/factline/internal/host/store"
)

// CookieName is the session cookie.
const CookieName = "factline_console"

// errNoSession: no cookie, an unknown or expired session, or a session
// whose key no longer authenticates.
var errNoSession = errors.New("console: no session")

// session is a signed-in session, its key opened.
type session struct {
	id        string // SHA-256 of the cookie token
	key       string
	csrf      string
	principal *auth.Principal
	expires   time.Time
}

// sealer seals API keys with a key derived from the process's secret
// key, bound to the session id, so a row copied to another id opens to
// nothing.
type sealer struct{ aead cipher.AEAD }

func newSealer(secret []byte) (*sealer, error) {
	if len(secret) < 32 {
		return nil, errors.New("console: the secret key must be 32 bytes")
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("factline console session key v1"))
	block, err := aes.NewCipher(mac.Sum(nil))
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead}, nil
}

func (s *sealer) seal(id, key string) ([]byte, error) {
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return s.aead.Seal(nonce, nonce, []byte(key), []byte(id)), nil
}

func (s *sealer) open(id string, sealed []byte) (string, error) {
	n := s.aead.NonceSize()
	if len(sealed) < n {
		return "", errors.New("console: sealed key too short")
	}
	plain, err := s.aead.Open(nil, sealed[:n], sealed[n:], []byte(id))
	if err != nil {
		return "", fmt.Errorf("console: open session key: %w", err)
	}
	return string(plain), nil
}

// randomToken returns 256 random bits, base64url.
func randomToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("console: random token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func sessionID(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// create signs a key in: it checks the key like the API does and stores
// a new session. It returns the cookie token.
func (c *Console) create(ctx context.Context, key string) (string, *session, error) {
	p, err := c.opts.Auth.Recheck(ctx, key)
	if err != nil {
		return "", nil, err
	}
	token, err := randomToken()
	if err != nil {
		return "", nil, err
	}
	csrf, err := randomToken()
	if err != nil {
		return "", nil, err
	}
	id := sessionID(token)
	sealed, err := c.sealer.seal(id, key)
	if err != nil {
		return "", nil, err
	}
	now := c.opts.Clock.Now()
	exp := now.Add(c.opts.SessionTTL)
	rec := &store.Session{ID: id, TenantID: p.TenantID, Mode: p.Mode, KeyID: p.KeyID, Key: sealed, CSRF: csrf,
		CreatedAt: now.UnixMilli(), ExpiresAt: exp.UnixMilli()}
	if err := c.opts.Store.CreateSession(ctx, rec); err != nil {
		return "", nil, fmt.Errorf("console: store session: %w", err)
	}
	return token, &session{id: id, key: key, csrf: csrf, principal: p, expires: exp}, nil
}

// load returns the session of a cookie token, its key rechecked against
// the store: a revoked key ends the session at once, in every process.
func (c *Console) load(ctx context.Context, token string) (*session, error) {
	if token == "" {
		return nil, errNoSession
	}
	id := sessionID(token)
	rec, err := c.opts.Store.GetSession(ctx, id, c.opts.Clock.Now().UnixMilli())
	if errors.Is(err, store.ErrNotFound) {
		return nil, errNoSession
	}
	if err != nil {
		return nil, err
	}
	key, err := c.sealer.open(id, rec.Key)
	if err != nil {
		// Sealed with another secret key: the session cannot be used.
		c.end(ctx, id)
		return nil, errNoSession
	}
	p, err := c.opts.Auth.Recheck(ctx, key)
	if errors.Is(err, auth.ErrInvalidKey) || (err == nil && p.KeyID != rec.KeyID) {
		c.end(ctx, id)
		return nil, errNoSession
	}
	if err != nil {
		return nil, err
	}
	return &session{id: id, key: key, csrf: rec.CSRF, principal: p, expires: time.UnixMilli(rec.ExpiresAt)}, nil
}

// end deletes a session; a failure only leaves a row that expires.
func (c *Console) end(ctx context.Context, id string) {
	if err := c.opts.Store.DeleteSession(ctx, id); err != nil {
		c.opts.Logger.Warn("console: end session", "err", err)
	}
}

// validCSRF compares a presented token with the session's in constant time.
func (s *session) validCSRF(token string) bool {
	return token != "" && subtle.ConstantTimeCompare([]byte(token), []byte(s.csrf)) == 1
}
