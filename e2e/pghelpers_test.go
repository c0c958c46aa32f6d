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
	"strings"
	"sync"
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
	return postReviewVia(ctx, nil, admin, id, verb, reason)
}

// postReviewVia is postReview through hc, which keeps its connections
// as an approver's browser or the CLI's client does; nil: a connection
// of its own, closed after the answer, as postReview.
func postReviewVia(ctx context.Context, hc *http.Client, admin, id, verb, reason string) reviewResult {
	body, _ := json.Marshal(map[string]string{"reason": reason})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, admin+"/v1/approvals/"+id+"/"+verb, bytes.NewReader(body))
	if err != nil {
		return reviewResult{Err: err}
	}
	req.Header.Set("Authorization", "Bearer "+approverToken)
	req.Header.Set("Content-Type", "application/json")
	if hc == nil {
		hc = http.DefaultClient
		req.Close = true // leave no idle connection to hold up the gateway's shutdown
	}
	resp, err := hc.Do(req)
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
