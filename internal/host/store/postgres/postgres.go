package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/factline/factline/internal/host/store"
)

// Pool sizing when Options.MaxConns is zero. A connection is held for a
// round trip while its goroutine waits, not for CPU, so the pool grows
// with the cores that issue requests: ConnsPerCPU per GOMAXPROCS, at
// least DefaultMaxConns. It takes at most a quarter of the connections
// the server accepts (max_connections less superuser_reserved_connections),
// leaving room for three more processes, their listeners and tools.
const (
	DefaultMaxConns = 10
	ConnsPerCPU     = 16
)

// AutoMaxConns is the pool size chosen when Options.MaxConns is zero, for
// procs (GOMAXPROCS) and a server accepting available connections (zero
// or less: unknown, no cap).
func AutoMaxConns(procs, available int) int32 {
	n := max(DefaultMaxConns, ConnsPerCPU*procs)
	if available > 0 {
		n = min(n, max(1, available/4))
	}
	return int32(n)
}

// Options configure a Store. The zero value is valid.
type Options struct {
	// MaxConns caps the connection pool; zero sizes it with AutoMaxConns
	// from GOMAXPROCS and the server's max_connections. The
	// SubscribeFacts listener and the stall guard's probe use one more
	// connection each outside the pool.
	MaxConns int32
	// Hooks are test seams; production code leaves them zero.
	Hooks store.Hooks
	// Logger receives migration and listener messages; nil means
	// slog.Default().
	Logger *slog.Logger
	// ListenHeartbeat is how long the LISTEN connection may stay quiet
	// before it is pinged; a ping unanswered for twice that counts as a
	// lost connection. Zero means DefaultListenHeartbeat.
	ListenHeartbeat time.Duration
	// SkipMigrations leaves the schema alone: Open fails with a
	// *store.PendingError when the database lacks a migration.
	SkipMigrations bool
	// Applied, when set, is told each migration this Open applied (not
	// one another process applied meanwhile).
	Applied func(store.Migration)
	// ConnectTimeout bounds opening one connection, the server's answer
	// included, when the URL has no connect_timeout (which wins). Zero
	// means DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// StallTimeout is how long the database may leave the store's probe
	// (once a second, on a connection of its own) unanswered before every
	// statement fails with store.ErrUnavailable until it answers again
	// (see stallGuard). Zero means DefaultStallTimeout.
	StallTimeout time.Duration
}

// DefaultConnectTimeout bounds opening a connection. pgx waits for ever
// by default: a firewalled or frozen server hung `serve`, `migrate` and
// `keys` with no word instead of failing.
const DefaultConnectTimeout = 10 * time.Second

// DefaultListenHeartbeat bounds how long a LISTEN connection that died
// without a word (a dropped route, a frozen server) goes unnoticed: about
// three times this.
const DefaultListenHeartbeat = time.Second

// Store is the PostgreSQL implementation of [store.Store]. It is safe for
// concurrent use.
type Store struct {
	pool   db // the pool, errors classified
	rpool  db // the keyed entity reads' pool (entityread.go)
	hooks  store.Hooks
	logger *slog.Logger
	facts  *listener
	reads  *entityReads // GetEntity calls gathered into statements
	guard  *stallGuard
	writes writeProbe // Ping's check that writes are taken

	closeOnce sync.Once
}

var _ store.Store = (*Store)(nil)

// ErrInvalidURL: a database URL that is neither a postgres:// URL nor a
// key=value connection string. Its text never quotes the URL, which may
// hold a password.
var ErrInvalidURL = errors.New("postgres: open: invalid connection URL")

// CheckURL reports whether url is a connection URL Open can use, without
// connecting: for a command line to check before it opens anything.
func CheckURL(url string) error {
	if _, err := pgxpool.ParseConfig(url); err != nil || url == "" {
		return ErrInvalidURL
	}
	return nil
}

// Open connects to the database at url (a postgres:// URL or a key=value
// connection string), applies pending schema migrations and returns the
// Store.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	if url == "" {
		return nil, errors.New("postgres: open: empty URL")
	}
	if opts.MaxConns < 0 {
		return nil, fmt.Errorf("postgres: open: MaxConns %d is negative", opts.MaxConns)
	}
	if opts.ListenHeartbeat < 0 {
		return nil, fmt.Errorf("postgres: open: ListenHeartbeat %v is negative", opts.ListenHeartbeat)
	}
	if opts.ListenHeartbeat == 0 {
		opts.ListenHeartbeat = DefaultListenHeartbeat
	}
	if opts.StallTimeout < 0 {
		return nil, fmt.Errorf("postgres: open: StallTimeout %v is negative", opts.StallTimeout)
	}
	if opts.StallTimeout == 0 {
		opts.StallTimeout = DefaultStallTimeout
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// The message of a parse error may quote the password; keep it out.
		return nil, ErrInvalidURL
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = opts.ConnectTimeout
		if cfg.ConnConfig.ConnectTimeout <= 0 {
			cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
		}
	}
	cfg.MaxConns = opts.MaxConns
	if cfg.MaxConns == 0 {
		cfg.MaxConns = AutoMaxConns(runtime.GOMAXPROCS(0), 0)
	}
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = "factline"
	}
	// pgx prepares every statement once per connection. After five runs
	// PostgreSQL may switch a prepared statement to a generic plan and keep
	// it until the table is next analyzed; a plan made while a table was
	// young (a seq scan of a few pages) then stays in use as the table
	// grows, and AppendFacts holds the global lock while it runs. Plan
	// every execution with the current size and the actual parameters
	// instead; the statements are simple, so planning is cheap. The keyed
	// entity reads, where planning is not, have a pool of their own
	// (openReadPool). A plan_cache_mode in the URL wins.
	urlPlanMode := cfg.ConnConfig.RuntimeParams["plan_cache_mode"] != ""
	if !urlPlanMode {
		cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_custom_plan"
	}
	// The listener and the guard's probe reach the server on connections
	// of their own, which the guard does not cut.
	plainConfig := cfg.ConnConfig.Copy()
	guard := newStallGuard(plainConfig.Copy(), opts.StallTimeout, logger)
	cfg.ConnConfig.Tracer = guard
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	if opts.MaxConns == 0 {
		// The pool cannot shrink: open it again when the server's
		// connection limit is below what the cores ask for.
		if n := AutoMaxConns(runtime.GOMAXPROCS(0), availableConns(ctx, pool)); n < cfg.MaxConns {
			pool.Close()
			cfg.MaxConns = n
			if pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
				return nil, fmt.Errorf("postgres: open: %w", err)
			}
		}
	}
	if opts.SkipMigrations {
		err = checkMigrated(ctx, pool, migrationFS)
	} else {
		err = migrate(ctx, pool, migrationFS, logger, opts.Applied)
	}
	if err != nil {
		pool.Close()
		return nil, err
	}
	rpool, err := openReadPool(ctx, cfg, urlPlanMode)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s := &Store{pool: db{pool, guard}, rpool: db{rpool, guard}, hooks: opts.Hooks, logger: logger, guard: guard}
	s.reads = newEntityReads(s.getEntity, s.getEntities)
	s.facts = newListener(plainConfig, logger, opts.ListenHeartbeat)
	guard.start()
	return s, nil
}

// availableConns is the number of connections the server accepts from
// ordinary roles, or 0 when it does not say (a proxy, for example).
func availableConns(ctx context.Context, pool *pgxpool.Pool) int {
	var n int
	err := pool.QueryRow(ctx, `SELECT current_setting('max_connections')::int - current_setting('superuser_reserved_connections')::int`).Scan(&n)
	if err != nil {
		return 0
	}
	return n
}

// MaxConns is the size of the store's connection pool.
func (s *Store) MaxConns() int32 { return s.pool.Config().MaxConns }

// Backend returns "postgres".
func (s *Store) Backend() string { return "postgres" }

// Ping checks that the database answers and takes writes (writeProbe).
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("postgres: ping: %w", err)
	}
	if err := s.probeWrites(ctx); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	return nil
}

// Close stops the fact listener, closes every subscription and the pool. It
// waits for connections in use to be returned. Calling it again is a no-op.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.guard.stop()
		s.facts.close()
		s.rpool.Close()
		s.pool.Close()
	})
	return nil
}

// inTx runs fn in a transaction and commits when fn returns nil.
func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		// A no-op after Commit. It must run even when ctx is cancelled,
		// but not hang on a dead connection.
		rbCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = tx.Rollback(rbCtx)
	}()
	if err := fn(tx); err != nil {
		return s.guard.classify(err)
	}
	if err := tx.Commit(ctx); err != nil {
		err = s.guard.classify(err)
		if commitUnconfirmed(err) {
			err = fmt.Errorf("%w: %w", store.ErrOutcomeUnknown, err)
		}
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// commitUnconfirmed reports whether a failed COMMIT, or a statement that
// commits by itself, may have committed all the same. Only three failures
// say it did not: the server's error answer of severity ERROR (the
// transaction was rolled back), a connection that could not be made, and
// a context that ended before the request was sent. pgconn.SafeToRetry
// alone does not: a connection lost while the answer was read reports
// "conn closed" as safe to retry, though the request went out. A FATAL
// answer ends a session that may have committed (one terminated while it
// waited for a synchronous standby has committed locally).
func commitUnconfirmed(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		sev := pgErr.SeverityUnlocalized
		if sev == "" {
			sev = pgErr.Severity
		}
		return sev == "FATAL" || sev == "PANIC"
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return false
	}
	notSent := pgconn.SafeToRetry(err) && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
	return !notSent
}

// inDoubt marks err, the failure of a write that commits by itself (one
// statement, no transaction), with store.ErrOutcomeUnknown when the write
// may be stored all the same (commitUnconfirmed).
func inDoubt(err error) error {
	if err == nil || errors.Is(err, pgx.ErrNoRows) || !commitUnconfirmed(err) {
		return err
	}
	return fmt.Errorf("%w: %w", store.ErrOutcomeUnknown, err)
}

// Helpers for optional columns: empty strings and absent JSON are stored as
// NULL.

// nullString maps "" to NULL.
func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// nullJSON maps absent JSON to NULL. The value is sent as text and cast to
// jsonb by the statement.
func nullJSON(j json.RawMessage) *string {
	if len(j) == 0 {
		return nil
	}
	s := string(j)
	return &s
}

// objectOrEmpty returns j, or "{}" when j is empty, for NOT NULL JSON columns
// that default to the empty object.
func objectOrEmpty(j json.RawMessage) string {
	if len(j) == 0 {
		return "{}"
	}
	return string(j)
}

// jsonOrNil turns a scanned jsonb column into a RawMessage, nil for NULL.
func jsonOrNil(b []byte) json.RawMessage {
	if b == nil {
		return nil
	}
	return json.RawMessage(b)
}

// limitArg maps a non-positive limit to NULL, which LIMIT reads as no limit.
func limitArg(n int) *int64 {
	if n <= 0 {
		return nil
	}
	v := int64(n)
	return &v
}
