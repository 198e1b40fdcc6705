package sqlite

import (
	"context"
	"database/sql"
	"sync"
)

// maxReadStatements bounds the statements a read pool keeps. The store's
// reads are a few dozen texts (a listing's text varies with its filters),
// so the bound is only reached by unusual filter combinations; the pool
// then starts over.
const maxReadStatements = 256

// readPool is the query-only connections together with the statements they
// have compiled. SQLite compiles a statement's text before every run
// unless it is kept prepared, and compiling costs more than running most
// of the store's reads; a kept *sql.Stmt is prepared once per connection
// that runs it.
type readPool struct {
	db *sql.DB

	mu    sync.Mutex
	stmts map[string]*readStmt
}

// readStmt is a kept statement and the calls about to run it: a statement
// dropped from the pool is closed once none is left (rows already open
// keep it alive on their own).
type readStmt struct {
	stmt    *sql.Stmt
	users   int
	dropped bool
}

func newReadPool(db *sql.DB) *readPool {
	return &readPool{db: db, stmts: make(map[string]*readStmt)}
}

// QueryContext runs query on a kept statement.
func (p *readPool) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	s, err := p.acquire(ctx, query)
	if err != nil {
		return nil, err
	}
	defer p.release(s)
	return s.stmt.QueryContext(ctx, args...)
}

// QueryRowContext runs query on a kept statement. A statement that fails
// to compile is run unprepared, so the error reaches Scan as it would
// from sql.DB.
func (p *readPool) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	s, err := p.acquire(ctx, query)
	if err != nil {
		return p.db.QueryRowContext(ctx, query, args...)
	}
	defer p.release(s)
	return s.stmt.QueryRowContext(ctx, args...)
}

// PingContext checks that a read connection answers.
func (p *readPool) PingContext(ctx context.Context) error { return p.db.PingContext(ctx) }

// Close closes the kept statements and the connections.
func (p *readPool) Close() error {
	p.mu.Lock()
	for q, s := range p.stmts {
		p.drop(q, s)
	}
	p.mu.Unlock()
	return p.db.Close()
}

// kept is how many statements the pool keeps (for tests).
func (p *readPool) kept() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.stmts)
}

// acquire returns the kept statement of query, preparing it on first use.
func (p *readPool) acquire(ctx context.Context, query string) (*readStmt, error) {
	p.mu.Lock()
	if s, ok := p.stmts[query]; ok {
		s.users++
		p.mu.Unlock()
		return s, nil
	}
	p.mu.Unlock()

	stmt, err := p.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.stmts[query]; ok { // prepared meanwhile by another call
		_ = stmt.Close()
		s.users++
		return s, nil
	}
	if len(p.stmts) >= maxReadStatements {
		for q, s := range p.stmts {
			p.drop(q, s)
		}
	}
	s := &readStmt{stmt: stmt, users: 1}
	p.stmts[query] = s
	return s, nil
}

// release ends a call's use of s.
func (p *readPool) release(s *readStmt) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s.users--
	if s.dropped && s.users == 0 {
		_ = s.stmt.Close()
	}
}

// drop removes s from the pool, closing it unless a call is about to run
// it. The caller holds p.mu.
func (p *readPool) drop(query string, s *readStmt) {
	delete(p.stmts, query)
	s.dropped = true
	if s.users == 0 {
		_ = s.stmt.Close()
	}
}
