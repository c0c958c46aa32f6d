package e2e

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// httpUpstream is testupstream serving Streamable HTTP as its own process.
type httpUpstream struct {
	URL    string
	addr   string // host:port, kept across restarts
	cmd    *exec.Cmd
	exited chan struct{}
	stderr *syncBuffer
}

// startHTTPUpstream starts testupstream -http on addr (127.0.0.1:0 picks a
// port) and waits until it listens. The test's cleanup stops it.
func startHTTPUpstreamAt(t *testing.T, addr, record string) *httpUpstream {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "upstream-ready")
	u := &httpUpstream{exited: make(chan struct{}), stderr: new(syncBuffer)}
	u.cmd = exec.Command(bins.upstream, "-http", addr, "-ready-file", ready, "-record", record)
	u.cmd.Env = childEnv()
	u.cmd.Stderr = u.stderr
	if err := u.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = u.cmd.Wait()
		close(u.exited)
	}()
	t.Cleanup(func() {
		u.stop(t)
		checkChildLog(t, "testupstream -http", u.stderr)
	})
	deadline := time.Now().Add(waitFor(t))
	for {
		if b, err := os.ReadFile(ready); err == nil {
			u.URL = strings.TrimSpace(string(b))
			p, err := url.Parse(u.URL)
			if err != nil {
				t.Fatal(err)
			}
			u.addr = p.Host
			return u
		}
		select {
		case <-u.exited:
			t.Fatalf("testupstream -http exited:\n%s", u.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("testupstream -http not ready after %v", waitFor(t))
		}
		time.Sleep(pollEvery)
	}
}

// stop ends the upstream process (SIGTERM) and waits for it.
func (u *httpUpstream) stop(t *testing.T) {
	t.Helper()
	stopProcess(t, u.cmd.Process, u.exited)
}

// readyz fetches /readyz of the admin API at admin.
func readyz(t *testing.T, admin string) (int, readyReport) {
	t.Helper()
	status, body := plainGet(t, admin+"/readyz")
	var rep readyReport
	if err := json.Unmarshal([]byte(body), &rep); err != nil {
		t.Fatalf("/readyz %d: %v\n%s", status, err, body)
	}
	return status, rep
}

type readyReport struct {
	Status string `json:"status"`
	Error  *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Upstreams map[string]struct {
		State     string    `json:"state"`
		Required  bool      `json:"required"`
		Since     time.Time `json:"since"`
		LastError string    `json:"last_error"`
	} `json:"upstreams"`
}

// waitReadyzStatus polls /readyz until it answers want, and returns the
// report and how long it took.
func waitReadyzStatus(t *testing.T, admin string, want int) (readyReport, time.Duration) {
	t.Helper()
	start := time.Now()
	for {
		status, rep := readyz(t, admin)
		if status == want {
			return rep, time.Since(start)
		}
		if time.Since(start) > waitFor(t) {
			t.Fatalf("/readyz still %d after %v, want %d: %+v", status, waitFor(t), want, rep)
		}
		time.Sleep(pollEvery)
	}
}

// TestReadyzFollowsHTTPUpstream is issue 9's acceptance for upstream
// health: /readyz reports each upstream's state; it turns 503 when a
// required HTTP upstream (a separate process) stops, found by the health
// checks (health_interval 500ms) with no agent call; the agent's call
// names the upstream as unavailable; the outage is logged once; and /readyz
// is 200 again once the upstream is back. An optional upstream that is down
// from the start never makes it 503.
func TestReadyzFollowsHTTPUpstream(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.log")
	up := startHTTPUpstreamAt(t, "127.0.0.1:0", record)
	const interval = 500 * time.Millisecond
	g := startGateway(t, gatewayConfig(filepath.Join(dir, "toolgate.db"), `
upstreams:
  health_interval: 500ms
servers:
  t:
    url: `+q(up.URL)+`
  extra:
    url: http://127.0.0.1:1/mcp
    required: false
policy:
  default: allow
`), nil)
	rep, _ := waitReadyzStatus(t, g.Admin, http.StatusOK)
	if s := rep.Upstreams["t"]; s.State != "connected" || !s.Required {
		t.Errorf("t: %+v, want connected and required", s)
	}
	if s := rep.Upstreams["extra"]; s.State != "reconnecting" || s.Required || s.LastError == "" {
		t.Errorf("extra: %+v, want reconnecting, not required, with its last error", s)
	}
	cs := g.connect(t, nil, nil)

	stopped := time.Now()
	up.stop(t)
	rep, _ = waitReadyzStatus(t, g.Admin, http.StatusServiceUnavailable)
	t.Logf("timing: /readyz turned 503 %v after the upstream stopped (health_interval %v)", time.Since(stopped).Round(time.Millisecond), interval)
	if rep.Status != "unavailable" || rep.Error == nil || !strings.Contains(rep.Error.Message, `upstream "t" is`) || strings.Contains(rep.Error.Message, "extra") {
		t.Errorf("/readyz while t is down: %+v", rep)
	}
	if s := rep.Upstreams["t"]; s.State == "connected" || s.LastError == "" || s.Since.Before(stopped.Add(-time.Second)) {
		t.Errorf("t while down: %+v", s)
	}
	msg := mustIsError(t, await(t, callAsync(t.Context(), cs, echoCall(`{"while":"down"}`))))
	if !strings.Contains(msg, `upstream "t" is unavailable`) {
		t.Errorf("call while t is down: %q, want it to name the upstream as unavailable", msg)
	}

	// Back on the same address.
	restarted := time.Now()
	startHTTPUpstreamAt(t, up.addr, record)
	waitReadyzStatus(t, g.Admin, http.StatusOK)
	t.Logf("timing: /readyz 200 again %v after the upstream restarted", time.Since(restarted).Round(time.Millisecond))
	if got := mustOK(t, await(t, callAsync(t.Context(), cs, echoCall(`{"while":"back"}`)))); got != `{"while":"back"}` {
		t.Errorf("call once t is back: %q", got)
	}
	log := g.stderr.String()
	if n := strings.Count(log, `msg="upstream unreachable`) + strings.Count(log, `msg="upstream unavailable; reconnecting" server=t`); n != 1 {
		t.Errorf("the outage of t was logged %d times at warning level, want once:\n%s", n, log)
	}
	if !strings.Contains(log, `msg="upstream available again" server=t`) {
		t.Error("the recovery of t was not logged")
	}
}
