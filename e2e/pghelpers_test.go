package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// pgMissing skips tb with msg, or fails it when TOOLGATE_REQUIRE_POSTGRES=1
// (set by scripts/test.sh whenever it provides a Postgres).
func pgMissing(tb testing.TB, msg string) {
	tb.Helper()
	if os.Getenv("TOOLGATE_REQUIRE_POSTGRES") == "1" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
}

// pgTestDSN returns the DSN in TOOLGATE_TEST_POSTGRES (a role with
// CREATEDB), skipping the test when it is unset, or failing it when
// TOOLGATE_REQUIRE_POSTGRES=1.
func pgTestDSN(tb testing.TB) string {
	tb.Helper()
	dsn := os.Getenv("TOOLGATE_TEST_POSTGRES")
	if dsn == "" {
		pgMissing(tb, "TOOLGATE_TEST_POSTGRES is not set (scripts/test.sh starts a throwaway Postgres)")
	}
	return dsn
}

// freshPGDatabase creates an empty database tg_e2e_<random> on the server
// of dsn, drops it (WITH (FORCE)) when the test ends, and returns its DSN.
// Register it before the gateways that use it, so that they stop first.
func freshPGDatabase(tb testing.TB, dsn string) string {
	tb.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "tg_e2e_" + hex.EncodeToString(b[:])
	ident := pgx.Identifier{name}.Sanitize()
	if err := pgExec(tb.Context(), dsn, `CREATE DATABASE `+ident); err != nil {
		tb.Fatalf("create test database: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor(tb))
		defer cancel()
		if err := pgExec(ctx, dsn, `DROP DATABASE IF EXISTS `+ident+` WITH (FORCE)`); err != nil {
			tb.Errorf("drop test database %s: %v", name, err)
		}
	})
	out, err := pgWithDatabase(dsn, name)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// pgExec runs one statement on a connection of its own.
func pgExec(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

// pgWithDatabase returns dsn (a URL or a key=value string) naming database
// name instead.
func pgWithDatabase(dsn, name string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("parse TOOLGATE_TEST_POSTGRES: %w", err)
		}
		u.Path, u.RawPath = "/"+name, ""
		return u.String(), nil
	}
	return dsn + " dbname=" + name, nil // a later keyword wins
}

// pgGatewayConfig returns a config with HTTP listeners on free loopback
// ports, the Postgres store at ${DATABASE_URL}, the standard principals, and
// body (servers, approvals, policy) appended.
func pgGatewayConfig(body string) string {
	return `
listen:
  mcp: 127.0.0.1:0
  admin: 127.0.0.1:0
storage:
  driver: postgres
  dsn: "${DATABASE_URL}"
  max_conns: 4
  poll: 5s
` + principalsYAML + body
}

// startPGGateway starts `toolgate serve` on the Postgres database dsn with
// body appended to its config (see pgGatewayConfig).
func startPGGateway(t *testing.T, dsn, body string) *gw {
	t.Helper()
	return startGateway(t, pgGatewayConfig(body), map[string]string{"DATABASE_URL": dsn})
}

// reviewResult is the answer of the admin API to one review.
type reviewResult struct {
	Status int
	Body   string
	Err    error // transport error; Status is 0 then
}

// postReview POSTs {"reason": reason} to admin's /v1/approvals/{id}/{verb}
// (verb "approve" or "deny") as the approver. It does not fail the test,
// so it can run in a goroutine; the caller checks the result.
func postReview(ctx context.Context, admin, id, verb, reason string) reviewResult {
	body, _ := json.Marshal(map[string]string{"reason": reason})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, admin+"/v1/approvals/"+id+"/"+verb, bytes.NewReader(body))
	if err != nil {
		return reviewResult{Err: err}
	}
	req.Header.Set("Authorization", "Bearer "+approverToken)
	req.Header.Set("Content-Type", "application/json")
	req.Close = true // leave no idle connection to hold up the gateway's shutdown
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return reviewResult{Err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reviewResult{Status: resp.StatusCode, Body: string(b), Err: err}
}

// mustReview is postReview that fails the test unless the answer is 200.
func mustReview(t *testing.T, admin, id, verb, reason string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitFor(t))
	defer cancel()
	if r := postReview(ctx, admin, id, verb, reason); r.Err != nil || r.Status != http.StatusOK {
		t.Fatalf("%s %s through %s: status %d, err %v\n%s", verb, id, admin, r.Status, r.Err, r.Body)
	}
}

// waitPendingArgs polls the admin API at admin until a pending approval
// shows arguments equal (as JSON values) to args, and returns it.
func waitPendingArgs(t *testing.T, admin, args string) apiApproval {
	t.Helper()
	deadline := time.Now().Add(waitFor(t))
	for {
		if a := pendingWithArgs(t, admin, args); a != nil {
			return *a
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pending approval with arguments %s at %s after %v", args, admin, waitFor(t))
		}
		time.Sleep(pollEvery)
	}
}

// pendingWithArgs returns the pending approval at admin whose arguments
// equal args (as JSON values), or nil.
func pendingWithArgs(t *testing.T, admin, args string) *apiApproval {
	t.Helper()
	var want any
	if err := json.Unmarshal([]byte(args), &want); err != nil {
		t.Fatal(err)
	}
	for _, a := range approvals(t, admin, "pending") {
		var got any
		if json.Unmarshal(a.Arguments, &got) == nil && cmp.Equal(got, want) {
			return &a
		}
	}
	return nil
}

// countRecord returns how many lines of the record file equal line.
func countRecord(t *testing.T, record, line string) int {
	t.Helper()
	n := 0
	for _, l := range readRecord(t, record) {
		if l == line {
			n++
		}
	}
	return n
}

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
}

// logTail returns the last lines of the server's log.
func (c *pgCluster) logTail() string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "server.log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-10):], "\n")
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(tb testing.TB) int {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// echoCall returns the params of a t__echo_raw call with args.
func echoCall(args string) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: "t__echo_raw", Arguments: json.RawMessage(args)}
}

// approvalAt reads approval id through the admin API at admin.
func approvalAt(t *testing.T, admin, id string) apiApproval {
	t.Helper()
	var a apiApproval
	adminGet(t, admin+"/v1/approvals/"+id, &a)
	return a
}

// raceReviews runs the functions at once (released together once every
// goroutine has started) and returns their results in order.
func raceReviews(ctx context.Context, fns ...func(context.Context) reviewResult) []reviewResult {
	ctx, cancel := context.WithTimeout(ctx, waitFor(ctx))
	defer cancel()
	out := make([]reviewResult, len(fns))
	var ready, done sync.WaitGroup
	gate := make(chan struct{})
	for i, fn := range fns {
		ready.Add(1)
		done.Go(func() {
			ready.Done()
			<-gate
			out[i] = fn(ctx)
		})
	}
	ready.Wait()
	close(gate)
	done.Wait()
	return out
}

// rawMCPResponse is one raw answer of the /mcp endpoint.
type rawMCPResponse struct {
	status int
	header http.Header
	body   string
}

// rawMCPPost POSTs a JSON-RPC message to an /mcp endpoint as the test agent,
// with sid as Mcp-Session-Id unless empty.
func rawMCPPost(t *testing.T, endpoint, sid, body string) rawMCPResponse {
	t.Helper()
	return rawMCP(t, http.MethodPost, endpoint, sid, body)
}

// rawMCP sends one raw Streamable HTTP request to endpoint as the test agent
// and reads the whole answer (an SSE answer to a request ends after its
// response).
func rawMCP(t *testing.T, method, endpoint, sid, body string) rawMCPResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitFor(t))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, endpoint, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+agentToken)
	req.Header.Set("Accept", "application/json, text/event-stream")
	if method == http.MethodGet {
		req.Header.Set("Accept", "text/event-stream")
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if !strings.Contains(body, `"method":"initialize"`) {
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, endpoint, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, endpoint, err)
	}
	return rawMCPResponse{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// plainGet GETs u without credentials and returns the status and body.
func plainGet(t *testing.T, u string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitFor(t))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitReadyz polls admin's /readyz until it answers 200.
func waitReadyz(t *testing.T, admin string) {
	t.Helper()
	deadline := time.Now().Add(waitFor(t))
	for {
		status, body := plainGet(t, admin+"/readyz")
		if status == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/readyz still %d after %v\n%s", admin, status, waitFor(t), body)
		}
		time.Sleep(pollEvery)
	}
}

// tryApprovals lists the approvals in state through the admin API at admin,
// returning an error instead of failing the test.
func tryApprovals(ctx context.Context, admin, state string) ([]apiApproval, error) {
	ctx, cancel := context.WithTimeout(ctx, waitFor(ctx))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, admin+"/v1/approvals?state="+state+"&limit=1000", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+approverToken)
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", req.URL, resp.Status)
	}
	var l struct {
		Approvals []apiApproval `json:"approvals"`
	}
	err = json.NewDecoder(resp.Body).Decode(&l)
	return l.Approvals, err
}

// resultText is the text of a background call's result, or "".
func resultText(r callResult) string {
	if r.res == nil {
		return ""
	}
	return text(r.res)
}

// pgTerminateOthers terminates every other connection to the database of
// dsn (the gateways' pools and LISTEN connections) and returns how many.
func pgTerminateOthers(t *testing.T, dsn string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitFor(t))
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var n int
	err = conn.QueryRow(ctx, `SELECT count(*) FROM (
		SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()) AS t`).Scan(&n)
	if err != nil {
		t.Fatalf("terminate connections: %v", err)
	}
	return n
}
