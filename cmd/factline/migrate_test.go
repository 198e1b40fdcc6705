package main_test

import (
	"bytes"
	"context"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/factline/factline/internal/testutil"
)

// storeArgs returns the flags selecting a fresh store of each kind.
func storeArgs(t *testing.T) map[string][]string {
	return map[string][]string{
		"sqlite": {"--data-dir", t.TempDir()},
		// Local state (serve's webhook key file) goes to a temp dir too,
		// not to ./data in the package directory.
		"postgres": {"--database-url", testutil.Postgres(t), "--data-dir", t.TempDir()},
	}
}

var migrationLine = regexp.MustCompile(`(?m)^\d+\s+\d{4}_\S+\.sql\s+(applied|pending)\s`)

// migrationStates runs migrate status and returns the state of each
// migration it lists.
func migrationStates(t *testing.T, args []string) []string {
	t.Helper()
	out, errOut, code := cli(t, nil, append([]string{"migrate", "status"}, args...)...)
	if code != 0 {
		t.Fatalf("migrate status: exit %d\n%s%s", code, out, errOut)
	}
	var states []string
	for _, m := range migrationLine.FindAllStringSubmatch(out, -1) {
		states = append(states, m[1])
	}
	if len(states) == 0 {
		t.Fatalf("migrate status listed no migration:\n%s", out)
	}
	return states
}

func TestMigrateStatusFreshAndMigrated(t *testing.T) {
	t.Parallel()
	for name, args := range storeArgs(t) {
		t.Run(name, func(t *testing.T) {
			// A data dir without a store has nothing to list
			// (TestCommandsNeedAnExistingStore); a fresh Postgres
			// database has every migration pending.
			if name == "postgres" {
				for _, s := range migrationStates(t, args) {
					if s != "pending" {
						t.Fatalf("fresh database: a migration is %s", s)
					}
				}
			}
			out, errOut, code := cli(t, nil, append([]string{"migrate", "up"}, args...)...)
			if code != 0 || !strings.Contains(out, "applied 0001_init.sql") {
				t.Fatalf("migrate up: exit %d\n%s%s", code, out, errOut)
			}
			for _, s := range migrationStates(t, args) {
				if s != "applied" {
					t.Fatalf("migrated database: a migration is %s", s)
				}
			}
			out, _, code = cli(t, nil, append([]string{"migrate", "up"}, args...)...)
			if code != 0 || !strings.Contains(out, "nothing to apply") {
				t.Fatalf("second migrate up: exit %d\n%s", code, out)
			}
		})
	}
}

// TestConcurrentMigrateUpSaysWhatEachApplied: two migrate up at once on
// one Postgres database apply each migration once between them, and each
// prints only the migrations it applied.
func TestConcurrentMigrateUpSaysWhatEachApplied(t *testing.T) {
	t.Parallel()
	args := []string{"migrate", "up", "--database-url", testutil.Postgres(t)}
	outs := make(chan string, 2)
	for range 2 {
		go func() {
			cmd := exec.Command(binary, args...)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Run(); err != nil {
				out.WriteString("exit: " + err.Error())
			}
			outs <- out.String()
		}()
	}
	applied := map[string]int{}
	for range 2 {
		out := <-outs
		if strings.Contains(out, "exit:") {
			t.Fatalf("migrate up failed:\n%s", out)
		}
		for _, m := range regexp.MustCompile(`(?m)^applied (\S+)$`).FindAllStringSubmatch(out, -1) {
			applied[m[1]]++
		}
	}
	states := migrationStates(t, args[2:])
	if len(applied) != len(states) {
		t.Errorf("the two runs printed %d distinct migrations, the binary has %d: %v", len(applied), len(states), applied)
	}
	for name, n := range applied {
		if n != 1 {
			t.Errorf("%s printed as applied %d times", name, n)
		}
	}
}

func TestMigrateStatusFailsWhenTheDatabaseIsDown(t *testing.T) {
	t.Parallel()
	_, errOut, code := cli(t, nil, "migrate", "status", "--database-url", "postgres://factline@127.0.0.1:1/none?connect_timeout=2")
	if code == 0 || !strings.Contains(errOut, "connect") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

func TestServeWithoutMigrateRefusesPendingMigrations(t *testing.T) {
	t.Parallel()
	for name, args := range storeArgs(t) {
		t.Run(name, func(t *testing.T) {
			serve := append([]string{"serve", "--addr", "127.0.0.1:0", "--migrate=false", "--plugin-cache-dir", pluginCache}, args...)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, binary, serve...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			code, errOut := cmd.ProcessState.ExitCode(), stderr.String()
			if ctx.Err() != nil {
				t.Fatalf("serve --migrate=false on a fresh database started: %v\n%s", err, errOut)
			}
			if code == 0 || !strings.Contains(errOut, "pending") || !strings.Contains(errOut, "factline migrate up") {
				t.Fatalf("serve --migrate=false on a fresh database: exit %d\n%s", code, errOut)
			}
			if _, errOut, code := cli(t, nil, append([]string{"migrate", "up"}, args...)...); code != 0 {
				t.Fatalf("migrate up: exit %d\n%s", code, errOut)
			}
			s := startServer(t, append([]string{"--migrate=false"}, args...)...)
			if code, _ := s.do(t, "GET", "/health", "", ""); code != 200 {
				t.Fatalf("serve --migrate=false on a migrated database: /health %d", code)
			}
			s.stop(t)
		})
	}
}
