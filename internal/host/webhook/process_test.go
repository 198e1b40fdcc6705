package webhook

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/factline/factline/internal/host/id"
	"github.com/factline/factline/internal/host/ledger"
	"github.com/factline/factline/internal/host/manifest"
	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/host/store/postgres"
	tu "github.com/factline/factline/internal/testutil"
)

// Environment of TestHelperWorker, the worker process the crash and
// multi-process tests start (this test binary, re-executed).
const (
	envHelper   = "FACTLINE_WEBHOOK_HELPER"
	envHelperDB = "FACTLINE_WEBHOOK_HELPER_DB"
	envHelperCA = "FACTLINE_WEBHOOK_HELPER_CA"
	envHelperK  = "FACTLINE_WEBHOOK_HELPER_KEY"
	envHelperSt = "FACTLINE_WEBHOOK_HELPER_STATS"
	envHelperL  = "FACTLINE_WEBHOOK_HELPER_LEASE"
)

// TestHelperWorker is not a test: run as a subprocess with envHelper set,
// it is a webhook worker process (matcher and delivery) on the database
// envHelperDB until it is killed or gets SIGUSR1, when it stops and writes
// how many attempts it recorded to envHelperSt. Run normally it returns at
// once.
func TestHelperWorker(t *testing.T) {
	if os.Getenv(envHelper) != "1" {
		return
	}
	ctx := context.Background()
	st, err := postgres.Open(ctx, os.Getenv(envHelperDB), postgres.Options{MaxConns: 8, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pemBytes, err := os.ReadFile(os.Getenv(envHelperCA))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemBytes)
	lease, err := time.ParseDuration(os.Getenv(envHelperL))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := New(Options{
		Store: st, Logger: quietLogger(), SecretKey: os.Getenv(envHelperK),
		AllowNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
		TLSConfig:     &tls.Config{RootCAs: pool},
		Workers:       32, EndpointConcurrency: 32, ClaimBatch: 64,
		Lease: lease, PollInterval: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1) // testutil.Main owns SIGTERM
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sig:
	case <-time.After(3 * time.Minute):
	}
	stopCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_ = svc.Stop(stopCtx)
	if p := os.Getenv(envHelperSt); p != "" {
		_ = os.WriteFile(p, []byte(strconv.Itoa(int(testutil.ToFloat64(svc.metrics.sent)))), 0o600)
	}
}

// workerProc is a running TestHelperWorker process.
type workerProc struct {
	cmd   *exec.Cmd
	stats string
	done  chan error
}

func startWorker(t *testing.T, dbURL, caFile, key string, lease time.Duration) *workerProc {
	t.Helper()
	stats := filepath.Join(t.TempDir(), "stats")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperWorker$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), envHelper+"=1", envHelperDB+"="+dbURL, envHelperCA+"="+caFile, envHelperK+"="+key, envHelperSt+"="+stats,
		envHelperL+"="+lease.String())
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &workerProc{cmd: cmd, stats: stats, done: make(chan error, 1)}
	go func() { w.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-w.done
	})
	return w
}

// kill sends SIGKILL and waits for the process to be gone.
func (w *workerProc) kill(t *testing.T) {
	t.Helper()
	if err := w.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.done:
	case <-time.After(waitLimit):
		t.Fatal("worker did not die")
	}
	w.done <- nil // for the cleanup
}

// stop sends SIGUSR1, waits, and returns the attempts it recorded.
func (w *workerProc) stop(t *testing.T) int {
	t.Helper()
	if err := w.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-w.done:
		if err != nil {
			t.Errorf("worker exited: %v", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("worker did not stop")
	}
	w.done <- nil
	b, err := os.ReadFile(w.stats)
	if err != nil {
		t.Fatalf("worker stats: %v", err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// procEnv is a Postgres database with a webhook config for a receiver and
// the secret key worker processes share.
type procEnv struct {
	url, caFile, key string
	st               store.Store
	rc               *receiver
}

func newProcEnv(t *testing.T, respond func(n int, r *http.Request) (int, map[string]string, string)) *procEnv {
	t.Helper()
	p := &procEnv{url: tu.Postgres(t)}
	var err error
	p.st, err = postgres.Open(t.Context(), p.url, postgres.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.st.Close() })
	p.rc = newReceiver(t, nil, respond)
	p.caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(p.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.rc.srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	p.key = hex.EncodeToString(k)

	admin, err := New(Options{Store: p.st, Logger: quietLogger(), SecretKey: p.key,
		AllowNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	if err != nil {
		t.Fatal(err)
	}
	domain, err := manifest.LoadDomainFile("testdata/domain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	plat, err := platform.New(platform.Options{Store: p.st, Domain: domain, Ledgers: ledger.Fallback{Static: ledger.Builtin()}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plat.Close)
	admin.RegisterConfigType(plat)
	sec, err := admin.CreateSecret(t.Context(), tenantA)
	if err != nil {
		t.Fatal(err)
	}
	_, err = plat.CreateConfig(t.Context(), tenantA, platform.ConfigInput{Type: ConfigType, Settings: map[string]any{
		"url": p.rc.url("/hook"), "secret_ref": sec.SecretRef, "triggers": []any{"outcome.deal_won"},
		"retry": map[string]any{"backoff_base_seconds": 1, "backoff_max_seconds": 2, "max_attempts": 20, "timeout_seconds": 5},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// emitFacts appends n entity-less outcome.deal_won facts.
func (p *procEnv) emitFacts(t *testing.T, n int) {
	t.Helper()
	for done := 0; done < n; {
		var items []store.Append
		for i := 0; i < 100 && done < n; i++ {
			now := time.Now().UnixMilli()
			items = append(items, store.Append{Fact: store.Fact{ID: id.New(id.Fact), TenantID: tenantA, Type: "outcome", Subtype: "deal_won",
				Timestamp: now, CreatedAt: now, Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, done))}})
			done++
		}
		res, err := p.st.AppendFacts(t.Context(), items)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
	}
}

// waitAllSent waits until n deliveries exist and every one is sent.
func (p *procEnv) waitAllSent(t *testing.T, n int, limit time.Duration) []store.OutboxRow {
	t.Helper()
	var rows []store.OutboxRow
	tu.EventuallyNil(t, limit, func() error {
		var err error
		rows, err = p.st.ListOutbox(t.Context(), store.OutboxFilter{TenantID: tenantA, Limit: n + 100})
		if err != nil {
			return err
		}
		sent := 0
		for _, r := range rows {
			if r.Status == store.OutboxSent {
				sent++
			}
		}
		if len(rows) == n && sent == n {
			return nil
		}
		return fmt.Errorf("%d deliveries, %d sent; want %d sent", len(rows), sent, n)
	})
	return rows
}

// Acceptance: the worker process is killed (SIGKILL) during a run of 1,000
// deliveries and restarted; every delivery reaches sent exactly once from
// the outbox's point of view, the receiver sees every delivery id (a
// duplicate only with the same id), none is lost, and every attempt,
// including those cut short by the kill, has its webhook.sent fact.
func TestCrashRecoverySIGKILL(t *testing.T) {
	t.Parallel()
	const n = 1000
	// Attempts after the 300th are held until the kill: the kill then
	// cuts attempts in flight short, whatever the machine's speed.
	held := make(chan struct{})
	var release sync.Once
	p := newProcEnv(t, func(i int, _ *http.Request) (int, map[string]string, string) {
		if i > 300 {
			<-held
		}
		return http.StatusOK, nil, "ok"
	})
	t.Cleanup(func() { release.Do(func() { close(held) }) })
	p.emitFacts(t, n)

	// A short lease, so the restarted worker takes over soon after the kill.
	w1 := startWorker(t, p.url, p.caFile, p.key, 3*time.Second)
	waitFor(t, "attempts held after 300 deliveries", func() bool { return p.rc.count() > 300 })
	w1.kill(t)
	atKill := p.rc.count()
	release.Do(func() { close(held) })
	if atKill >= n {
		t.Fatalf("the receiver had every delivery (%d) before the kill; the test proves nothing", atKill)
	}

	w2 := startWorker(t, p.url, p.caFile, p.key, 3*time.Second)
	rows := p.waitAllSent(t, n, 90*time.Second)
	w2.stop(t)

	// Exact reconciliation at the receiver: the ids it saw are the
	// outbox's ids, each at least once; more than once only for a delivery
	// whose attempt the kill cut short.
	hits := hitsByDelivery(p.rc.all())
	outbox := map[string]bool{}
	for _, r := range rows {
		outbox[r.DeliveryID] = true
		if len(hits[r.DeliveryID]) == 0 {
			t.Errorf("delivery %s never reached the receiver", r.DeliveryID)
		}
	}
	for id := range hits {
		if !outbox[id] {
			t.Errorf("the receiver got %s, which is no delivery", id)
		}
	}
	sent := checkInvariants(t, p.st, tenantA, hits)
	interrupted, dupes := 0, 0
	for _, r := range rows {
		recs := sent[r.DeliveryID]
		successes := 0
		for i, rec := range recs {
			if int(rec.num("attempt")) != i+1 {
				t.Errorf("delivery %s: record %d is attempt %v (each attempt exactly once)", r.DeliveryID, i, rec.num("attempt"))
			}
			if ok, _ := rec.flag("success"); ok {
				successes++
			}
			if rec.str("error_code") == CodeAttemptInterrupted {
				interrupted++
			}
		}
		if successes != 1 || len(recs) == 0 {
			t.Errorf("delivery %s: %d success records of %d", r.DeliveryID, successes, len(recs))
		} else if ok, _ := recs[len(recs)-1].flag("success"); !ok {
			t.Errorf("delivery %s: the last record is not the success", r.DeliveryID)
		}
		if k := len(hits[r.DeliveryID]); k > 1 {
			dupes++
			if len(recs) < 2 {
				t.Errorf("delivery %s reached the receiver %d times with one attempt recorded", r.DeliveryID, k)
			}
		}
		if r.Attempt != len(recs) {
			t.Errorf("delivery %s: outbox attempt %d, %d records", r.DeliveryID, r.Attempt, len(recs))
		}
	}
	if interrupted == 0 {
		t.Error("no attempt was cut short by the kill; the recovery path was not exercised")
	}
	t.Logf("receiver had %d requests at the kill; %d interrupted attempts recorded after the restart; %d deliveries seen twice",
		atKill, interrupted, dupes)
}

// Acceptance: two worker processes on one Postgres deliver 1,000 webhooks
// and no delivery is sent twice.
func TestTwoWorkerProcesses(t *testing.T) {
	t.Parallel()
	const n = 1000
	p := newProcEnv(t, nil)
	// The default-sized lease: here no worker dies, so nothing may be
	// taken over.
	w1 := startWorker(t, p.url, p.caFile, p.key, 40*time.Second)
	w2 := startWorker(t, p.url, p.caFile, p.key, 40*time.Second)
	p.emitFacts(t, n)
	rows := p.waitAllSent(t, n, 90*time.Second)
	a, b := w1.stop(t), w2.stop(t)

	hits := hitsByDelivery(p.rc.all())
	if len(hits) != n {
		t.Errorf("the receiver saw %d delivery ids, want %d", len(hits), n)
	}
	for id, hs := range hits {
		if len(hs) != 1 {
			t.Errorf("delivery %s was sent %d times", id, len(hs))
		}
	}
	sent := checkInvariants(t, p.st, tenantA, hits)
	for _, r := range rows {
		if recs := sent[r.DeliveryID]; len(recs) != 1 {
			t.Errorf("delivery %s has %d webhook.sent facts; the first: %v", r.DeliveryID, len(recs), recs[0].data)
		}
	}
	if a+b != n || a == 0 || b == 0 {
		t.Errorf("workers recorded %d and %d attempts; want %d in all, shared", a, b, n)
	}
}
