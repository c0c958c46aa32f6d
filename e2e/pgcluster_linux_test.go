package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pgCluster is a throwaway PostgreSQL server of the test's own, for tests
// that stop and restart the database (never the shared server of
// TOOLGATE_TEST_POSTGRES). As root, initdb and postgres run as the
// "postgres" OS user (Postgres refuses to run as root). The server runs as a
// direct child of the test process, like scripts/test.sh runs it, so it is
// reaped here and nothing is orphaned; it also gets SIGQUIT if the test
// process dies.
type pgCluster struct {
	bin  string              // directory holding initdb and postgres
	dir  string              // owned by the server's user: data/, the socket, server.log
	cred *syscall.Credential // nil unless running as root
	port int

	cmd     *exec.Cmd     // the running server, or nil
	exited  chan struct{} // closed when cmd has exited
	waitErr error         // cmd.Wait's result, set before exited closes
}

// pgServerBin returns the newest /usr/lib/postgresql/*/bin holding initdb
// and postgres (the Debian layout), else the directory of initdb on PATH.
// Missing binaries skip the test, or fail it when TOOLGATE_REQUIRE_POSTGRES=1.
func pgServerBin(tb testing.TB) string {
	tb.Helper()
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	version := func(d string) int {
		n, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		return n
	}
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	if p, err := exec.LookPath("initdb"); err == nil {
		dirs = append(dirs, filepath.Dir(p))
	}
	for _, d := range dirs {
		if isExecutable(filepath.Join(d, "initdb")) && isExecutable(filepath.Join(d, "postgres")) {
			return d
		}
	}
	pgMissing(tb, "Postgres server binaries (initdb, postgres) not found under /usr/lib/postgresql/*/bin or on PATH")
	return ""
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// startPGCluster runs initdb (trust auth, superuser postgres, UTF8, no
// fsync) in a new directory and starts the server on a free port of
// 127.0.0.1. The server is stopped and the directory removed on cleanup.
func startPGCluster(tb testing.TB) *pgCluster {
	tb.Helper()
	c := &pgCluster{bin: pgServerBin(tb)}
	// Not t.TempDir: its parents are private to root, and the server's user
	// must reach its directory.
	dir, err := os.MkdirTemp("", "toolgate-e2e-pg-")
	if err != nil {
		tb.Fatal(err)
	}
	c.dir = dir
	tb.Cleanup(func() {
		c.Stop(tb)
		if err := os.RemoveAll(dir); err != nil {
			tb.Errorf("remove %s: %v", dir, err)
		}
	})
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			pgMissing(tb, fmt.Sprintf("running as root and no postgres OS user to run the server as: %v", err))
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, int(uid), int(gid)); err != nil {
			tb.Fatal(err)
		}
	}
	initdb := c.command(filepath.Join(c.bin, "initdb"), "-D", filepath.Join(dir, "data"),
		"-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync")
	if out, err := initdb.CombinedOutput(); err != nil {
		tb.Fatalf("initdb: %v\n%s", err, out)
	}
	for attempt := 1; ; attempt++ {
		c.port = freePort(tb)
		err := c.start(tb)
		if err == nil {
			return c
		}
		if attempt == 5 {
			tb.Fatalf("start postgres: %v", err)
		}
		tb.Logf("start postgres on port %d (attempt %d): %v", c.port, attempt, err)
	}
}

// command returns cmd as the server's user, with a minimal environment,
// run from the cluster's directory.
func (c *pgCluster) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = c.dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Pdeathsig: syscall.SIGQUIT}
	return cmd
}

// DSN is the URL of the cluster's "postgres" database as its superuser.
func (c *pgCluster) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// Start starts the stopped server again on the same port and data
// directory, and waits until it accepts connections.
func (c *pgCluster) Start(tb testing.TB) {
	tb.Helper()
	if err := c.start(tb); err != nil {
		tb.Fatalf("restart postgres on port %d: %v", c.port, err)
	}
}

func (c *pgCluster) start(tb testing.TB) error {
	tb.Helper()
	if c.cmd != nil {
		return fmt.Errorf("postgres is already running")
	}
	logf, err := os.OpenFile(filepath.Join(c.dir, "server.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close() // the child has its own descriptor
	cmd := c.command(filepath.Join(c.bin, "postgres"), "-D", filepath.Join(c.dir, "data"),
		"-k", c.dir, "-p", strconv.Itoa(c.port), "-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	if os.Getenv("TOOLGATE_BENCH_PG_AUTOVACUUM") == "off" { // BenchmarkHeldCalls: approve-all without autovacuum
		cmd.Args = append(cmd.Args, "-c", "autovacuum=off")
	}
	if os.Getenv("TOOLGATE_BENCH_PGSTAT") != "" { // BenchmarkHeldCalls: statements per approval
		cmd.Args = append(cmd.Args, "-c", "shared_preload_libraries=pg_stat_statements",
			"-c", "pg_stat_statements.track=all", "-c", "pg_stat_statements.track_utility=on")
	}
	if v := os.Getenv("TOOLGATE_BENCH_PG_OPTS"); v != "" {
		// more server settings, space-separated name=value: e.g.
		// shared_preload_libraries=auto_explain auto_explain.log_min_duration=3
		// log_lock_waits=on deadlock_timeout=2ms (what waits, and on whom)
		for _, o := range strings.Fields(v) {
			cmd.Args = append(cmd.Args, "-c", o)
		}
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return err
	}
	c.cmd, c.exited = cmd, make(chan struct{})
	exited := c.exited
	go func() {
		c.waitErr = cmd.Wait()
		close(exited)
	}()
	deadline := time.Now().Add(waitFor(tb))
	for {
		ctx, cancel := context.WithTimeout(tb.Context(), time.Second)
		err := pgExec(ctx, c.DSN(), `SELECT 1`)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			c.cmd = nil
			return fmt.Errorf("postgres exited: %w; server.log ends:\n%s", c.waitErr, c.logTail())
		default:
		}
		if time.Now().After(deadline) {
			c.Stop(tb)
			return fmt.Errorf("postgres not accepting connections after %v: %w; server.log ends:\n%s", waitFor(tb), err, c.logTail())
		}
		time.Sleep(pollEvery)
	}
}

// Stop shuts the server down (fast shutdown: SIGINT, which disconnects
// every client; SIGQUIT if that takes over 30s) and waits for it to exit.
// Stopping a stopped server does nothing.
func (c *pgCluster) Stop(tb testing.TB) {
	tb.Helper()
	if c.cmd == nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-c.exited:
	case <-time.After(waitFor(tb)):
		tb.Errorf("postgres did not stop within %v of SIGINT; sending SIGQUIT", waitFor(tb))
		_ = c.cmd.Process.Signal(syscall.SIGQUIT)
		<-c.exited
	}
	c.cmd = nil
	if v := os.Getenv("TOOLGATE_BENCH_PG_LOGCOPY"); v != "" {
		// the server's log kept past cleanup (with TOOLGATE_BENCH_PG_OPTS)
		b, err := os.ReadFile(filepath.Join(c.dir, "server.log"))
		if err == nil {
			err = os.WriteFile(v, b, 0o600)
		}
		if err != nil {
			tb.Errorf("TOOLGATE_BENCH_PG_LOGCOPY: %v", err)
		}
	}
}

// logTail returns the last lines of the server's log.
func (c *pgCluster) logTail() string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "server.log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-10):], "\n")
}
