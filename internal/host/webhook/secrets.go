package webhook

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/factline/factline/internal/clock"
	"github.com/factline/factline/internal/host/problem"
	"github.com/factline/factline/internal/host/store"
)

// SecretKeyFile is the name of the key file created in the data dir when
// no key is configured.
const SecretKeyFile = "webhook-secret.key"

// SecretLifetimeAfterRotation is how long a rotated-out secret still signs
// the deliveries pinned to the config versions that reference it.
const SecretLifetimeAfterRotation = 7 * 24 * time.Hour

// secretCacheTTL bounds how long a decrypted secret is kept in memory
// before it is read again (so an expiry set by another process applies).
const secretCacheTTL = 30 * time.Second

var (
	errSecretNotFound = errors.New("secret not found")
	errSecretExpired  = errors.New("secret expired")
)

// ParseSecretKey decodes a 32-byte key given as base64 (standard or URL
// alphabet, padded or not) or hex, as FACTLINE_SECRET_KEY holds it.
func ParseSecretKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if len(s) == 64 {
		if k, err := hex.DecodeString(s); err == nil {
			return k, nil
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(s); err == nil && len(k) == 32 {
			return k, nil
		}
	}
	return nil, errors.New("webhook: the secret key must be 32 bytes, base64 or hex encoded (for example `openssl rand -base64 32`)")
}

// LoadSecretKey returns the key that encrypts webhook secrets at rest: the
// configured value (FACTLINE_SECRET_KEY) when set, otherwise the key file
// in dataDir, created with 32 random bytes and mode 0600 on first use.
// Processes sharing a database must share the key.
func LoadSecretKey(value, dataDir string) ([]byte, error) {
	if value != "" {
		return ParseSecretKey(value)
	}
	if dataDir == "" {
		return nil, errors.New("webhook: no secret key: set FACTLINE_SECRET_KEY or a data dir for the key file")
	}
	path := filepath.Join(dataDir, SecretKeyFile)
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("webhook: key file: %w", err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		_, werr := f.WriteString(hex.EncodeToString(key) + "\n")
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			os.Remove(path)
			return nil, fmt.Errorf("webhook: write key file: %w", werr)
		}
		return key, nil
	case !errors.Is(err, fs.ErrExist):
		return nil, fmt.Errorf("webhook: create key file: %w", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("webhook: key file: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("webhook: key file %s is readable by other users (mode %o); run chmod 600 on it", path, fi.Mode().Perm())
	}
	// Another process may be writing it right now.
	for range 50 {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("webhook: read key file: %w", err)
		}
		if s := strings.TrimSpace(string(b)); s != "" {
			k, err := ParseSecretKey(s)
			if err != nil {
				return nil, fmt.Errorf("webhook: key file %s: %w", path, err)
			}
			return k, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil, fmt.Errorf("webhook: key file %s is empty", path)
}

// secretStore keeps signing secrets encrypted with AES-256-GCM. Each
// ciphertext is bound to its tenant and reference (additional data), so a
// row copied to another reference does not decrypt.
type secretStore struct {
	st    store.WebhookStore
	aead  cipher.AEAD
	keyID string
	clock clock.Clock

	mu    sync.Mutex
	cache map[string]cachedSecret
}

type cachedSecret struct {
	value     string
	expiresAt *int64
	loadedAt  time.Time
}

func newSecretStore(st store.WebhookStore, key []byte, clk clock.Clock) (*secretStore, error) {
	if len(key) != 32 {
		return nil, errors.New("webhook: the secret key must be 32 bytes")
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(append([]byte("factline webhook secret key\x00"), key...))
	return &secretStore{st: st, aead: aead, keyID: hex.EncodeToString(sum[:8]), clock: clk, cache: map[string]cachedSecret{}}, nil
}

func aad(tenant, ref string) []byte { return []byte(tenant + "\x00" + ref) }

// newSecretValue returns a fresh secret in the Standard Webhooks form,
// whsec_ and the base64 of 32 random bytes.
func newSecretValue() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(b), nil
}

// create stores a new secret for the tenant and returns its reference and
// value; the value is never readable through the API again.
func (s *secretStore) create(ctx context.Context, tenant string) (ref, value string, createdAt int64, err error) {
	value, err = newSecretValue()
	if err != nil {
		return "", "", 0, err
	}
	now := s.clock.Now()
	ref = newSecretRef(now)
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", "", 0, err
	}
	ct := s.aead.Seal(nonce, nonce, []byte(value), aad(tenant, ref))
	rec := &store.WebhookSecret{TenantID: tenant, Ref: ref, Ciphertext: ct, KeyID: s.keyID, CreatedAt: now.UnixMilli()}
	if err := s.st.CreateWebhookSecret(ctx, rec); err != nil {
		if errors.Is(err, store.ErrSecretKeyMismatch) {
			// Another process with another key wrote the first secret
			// after this one started: a secret stored now could not be
			// read by the others.
			id, _ := s.st.WebhookSecretKeyID(ctx)
			return "", "", 0, problem.Wrap(problem.Unavailable,
				"This server's webhook secret key is not the one the database's secrets use; "+
					"every process sharing the database needs the same FACTLINE_SECRET_KEY", keyMismatch(s.keyID, id))
		}
		return "", "", 0, err
	}
	return ref, value, rec.CreatedAt, nil
}

// get returns the secret's value, errSecretNotFound or errSecretExpired.
func (s *secretStore) get(ctx context.Context, tenant, ref string) (string, error) {
	now := s.clock.Now()
	k := tenant + "\x00" + ref
	s.mu.Lock()
	c, ok := s.cache[k]
	s.mu.Unlock()
	if !ok || now.Sub(c.loadedAt) > secretCacheTTL || now.Before(c.loadedAt) {
		rec, err := s.st.GetWebhookSecret(ctx, tenant, ref)
		if errors.Is(err, store.ErrNotFound) {
			return "", errSecretNotFound
		}
		if err != nil {
			return "", err
		}
		if rec.KeyID != s.keyID {
			return "", fmt.Errorf("secret %s was encrypted with another key (%s, this process has %s): "+
				"every process must use the same FACTLINE_SECRET_KEY: %w", ref, rec.KeyID, s.keyID, store.ErrSecretKeyMismatch)
		}
		nonceSize := s.aead.NonceSize()
		if len(rec.Ciphertext) < nonceSize {
			return "", fmt.Errorf("secret %s: ciphertext too short", ref)
		}
		plain, err := s.aead.Open(nil, rec.Ciphertext[:nonceSize], rec.Ciphertext[nonceSize:], aad(tenant, ref))
		if err != nil {
			return "", fmt.Errorf("secret %s does not decrypt: %w", ref, err)
		}
		c = cachedSecret{value: string(plain), expiresAt: rec.ExpiresAt, loadedAt: now}
		s.mu.Lock()
		s.cache[k] = c
		s.mu.Unlock()
	}
	if c.expiresAt != nil && now.UnixMilli() >= *c.expiresAt {
		return "", errSecretExpired
	}
	return c.value, nil
}

// keyMismatch explains a key that is not the database's to an operator.
func keyMismatch(process, database string) error {
	return fmt.Errorf("webhook: this process's secret key (key id %s) is not the key that encrypts the database's "+
		"webhook secrets (key id %s): start every process sharing the database with the same FACTLINE_SECRET_KEY "+
		"(--secret-key); without one, each process creates its own key file in its data dir: %w",
		process, database, store.ErrSecretKeyMismatch)
}

// checkKey fails with keyMismatch when the database's secrets are recorded
// as encrypted with another key than s's.
func (s *secretStore) checkKey(ctx context.Context) error {
	id, err := s.st.WebhookSecretKeyID(ctx)
	if err != nil {
		return fmt.Errorf("webhook: check the secret key: %w", err)
	}
	if id != "" && id != s.keyID {
		return keyMismatch(s.keyID, id)
	}
	return nil
}

// expire sets a secret's expiry and forgets the cached copy.
func (s *secretStore) expire(ctx context.Context, tenant, ref string, at int64) error {
	s.mu.Lock()
	delete(s.cache, tenant+"\x00"+ref)
	s.mu.Unlock()
	return s.st.ExpireWebhookSecret(ctx, tenant, ref, at)
}
