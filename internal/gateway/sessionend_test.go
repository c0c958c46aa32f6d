package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
)

// envLingerSocket names the Unix socket a stdio-lingering child reports
// to once its stdin ended; it exits when the test closes the connection.
const envLingerSocket = "TOOLGATE_GATEWAY_TEST_LINGER_SOCKET"

// runLingeringUpstream is the child of mode stdio-lingering: the test
// upstream, which ignores SIGTERM and, after its stdin ends, stays until
// the test releases it (see lingerRelease).
func runLingeringUpstream() error {
	signal.Ignore(syscall.SIGTERM)
	s := mcp.NewServer(&mcp.Implementation{Name: "lingering-upstream", Version: "1"}, nil)
	addUpstreamTools(s, nil)
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "upstream:", err)
	}
	c, err := net.Dial("unix", os.Getenv(envLingerSocket)) //nolint:gosec // the test's own socket, named by the test that started this child
	if err != nil {
		return err
	}
	var b [1]byte
	_, _ = c.Read(b[:]) // until the test closes it
	return nil
}

// lingerRelease listens on a Unix socket for stdio-lingering children:
// arrived receives one value per child that reported, and each child is
// held until release is called (and released at once after that).
type lingerRelease struct {
	path    string
	arrived chan struct{}
	mu      sync.Mutex
	held    []net.Conn
	done    bool
}

func newLingerRelease(t *testing.T) *lingerRelease {
	t.Helper()
	l := &lingerRelease{path: filepath.Join(t.TempDir(), "linger.sock"), arrived: make(chan struct{}, 16)}
	ln, err := net.Listen("unix", l.path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); l.release(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.mu.Lock()
			if l.done {
				_ = c.Close()
			} else {
				l.held = append(l.held, c)
			}
			l.mu.Unlock()
			select {
			case l.arrived <- struct{}{}:
			default:
			}
		}
	})
	return l
}

func (l *lingerRelease) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done = true
	for _, c := range l.held {
		_ = c.Close()
	}
	l.held = nil
}

// TestNoPerAgentSessionForAnEndingAgentSession: while the gateway closes
// an ended agent session's per-agent upstream sessions (one by one, each
// process given its grace), a request of that session that reaches an
// upstream already closed must not open a new per-agent session for it:
// nothing would ever close that one (its process leaked).
func TestNoPerAgentSessionForAnEndingAgentSession(t *testing.T) {
	linger := newLingerRelease(t)
	b := stdioServer("b")
	b.Env = map[string]string{envUpstream: "stdio-lingering", envLingerSocket: linger.path}
	g := newGateway(t, []ServerConfig{stdioServer("a"), b}, allowAll(), &Options{TerminateGrace: time.Hour})
	t.Cleanup(linger.release) // before the gateway's Close: its children linger too
	base := serveHTTP(t, g, nil)
	cs := connectHTTP(t, base, aliceToken, nil, nil)
	sid := cs.ID()
	waitInitialized(t, g, sid)
	for _, tool := range []string{"a__echo", "b__echo"} {
		if res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}}); err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", tool, err, res)
		}
	}
	var ss *mcp.ServerSession
	g.leanRegs.Range(func(k, _ any) bool {
		if s := k.(*leanSessions).get(sid); s != nil {
			ss = s.ss
		}
		return ss == nil
	})
	if ss == nil {
		t.Fatal("the session is not known")
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodDelete, base+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	// a's per-agent session is closed; b's process lingers in its close.
	<-linger.arrived
	ac, err := g.ups["a"].agentConnFor(&origin{ss: ss, principal: approval.Principal{ID: "alice"}, server: "a", ctx: t.Context()})
	if err == nil {
		t.Errorf("a per-agent session of upstream a was opened for the ended agent session (%v)", ac != nil)
	}
	linger.release()
	_ = ss.Wait()
}
