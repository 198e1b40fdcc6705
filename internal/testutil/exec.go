package testutil

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// aptLockName is the file under os.TempDir() whose flock serialises
// apt-get runs of concurrently running test binaries.
const aptLockName = "factline-testutil-apt.lock"

// ensureInstalled returns the result of find, installing the Debian package
// pkg first when find fails and the process runs as root.
func ensureInstalled[T any](pkg string, find func() (T, error)) (T, error) {
	v, err := find()
	if err == nil {
		return v, nil
	}
	if os.Geteuid() != 0 {
		var zero T
		return zero, fmt.Errorf("%w; install the Debian package %s (apt-get install -y %s) or set the override URL", err, pkg, pkg)
	}
	unlock, lerr := lockFile(filepath.Join(os.TempDir(), aptLockName))
	if lerr != nil {
		var zero T
		return zero, fmt.Errorf("%w; and locking for apt-get failed: %w", err, lerr)
	}
	defer unlock()
	// Another test binary may have installed it while this one waited.
	if v, err := find(); err == nil {
		return v, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	for _, args := range [][]string{{"update"}, {"install", "-y", "--no-install-recommends", pkg}} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			var zero T
			return zero, fmt.Errorf("apt-get %s: %w\n%s", strings.Join(args, " "), err, tail(out, 2000))
		}
	}
	return find()
}

// lockFile takes an exclusive flock on path, creating it when missing.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) // closing the file unlocks it anyway
		f.Close()
	}, nil
}

// postgresBinDir finds a directory holding initdb, pg_ctl and postgres: the
// one of initdb on the PATH, else the newest /usr/lib/postgresql/*/bin.
func postgresBinDir() (string, error) {
	var candidates []string
	if p, err := exec.LookPath("initdb"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			candidates = append(candidates, filepath.Dir(r))
		}
		candidates = append(candidates, filepath.Dir(p))
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	candidates = append(candidates, dirs...)
	for _, dir := range candidates {
		ok := true
		for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
			if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
				ok = false
				break
			}
		}
		if ok {
			return dir, nil
		}
	}
	return "", fmt.Errorf("PostgreSQL server binaries (initdb, pg_ctl, postgres) not found on PATH or in /usr/lib/postgresql/*/bin")
}

// versionOf returns the major version in /usr/lib/postgresql/VERSION/bin.
func versionOf(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// redisServerPath finds redis-server on the PATH or in the usual places.
func redisServerPath() (string, error) {
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/bin/redis-server", "/usr/local/bin/redis-server", "/usr/sbin/redis-server"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("redis-server not found on PATH")
}

// runLogged runs a command with its output in the file logPath (a pipe
// would keep Wait waiting on a daemon that inherited it) and returns the
// output with the error when it fails. As root and with asPostgres, the
// command runs as the postgres user through runuser.
func runLogged(ctx context.Context, dir, logPath string, asPostgres bool, name string, args ...string) error {
	if asPostgres {
		args = append([]string{"-u", "postgres", "--", name}, args...)
		name = "runuser"
	}
	out, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer out.Close()
	if asPostgres {
		// The file must be writable by the postgres user for pg_ctl's
		// redirections; root opened it, so this only matters for clarity.
		_ = out.Chmod(0o666)
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		b, _ := os.ReadFile(logPath)
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, tail(b, 3000))
	}
	return nil
}

// tail returns the last n bytes of b as a string.
func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}
