package httpserve

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// stallServer serves l's connections (l caps them) with a handler that
// answers "ok <who>" and records each who it served; a request to /hold
// is told on held and answered once release is called. net/http's end of
// each connection (StateClosed) is told on connClosed.
func stallServer(t *testing.T, l *Listener) (served func() []string, held chan string, release func()) {
	t.Helper()
	s, h, r, _ := stallServerClosed(t, l)
	return s, h, r
}

func stallServerClosed(t *testing.T, l *Listener) (served func() []string, held chan string, release func(), connClosed chan struct{}) {
	t.Helper()
	connClosed = make(chan struct{}, 16)
	var mu sync.Mutex
	var whos []string
	held = make(chan string, 4)
	released := make(chan struct{})
	var releaseOnce sync.Once
	release = func() { releaseOnce.Do(func() { close(released) }) }
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			who := r.URL.Query().Get("who")
			mu.Lock()
			whos = append(whos, who)
			mu.Unlock()
			if r.URL.Path == "/hold" {
				held <- who
				<-released
			}
			_, _ = io.WriteString(w, "ok "+who)
		}),
		ConnState: func(c net.Conn, s http.ConnState) {
			l.ConnState(c, s)
			if s == http.StateClosed {
				connClosed <- struct{}{}
			}
		},
		ReadHeaderTimeout: time.Hour, // only the cap closes a stalled request here
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	t.Cleanup(func() {
		release()
		_ = srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve = %v", err)
		}
	})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), whos...)
	}, held, release, connClosed
}

// readingLen is the number of l's connections whose request is being read.
func readingLen(l *Listener) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reading.Len()
}

// waitFor polls cond (a count kept by the code under test, which has no
// event to wait on) until it holds; it fails the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not in 10 s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func capListener(t *testing.T, inner net.Listener, maxConns int, grace, stall time.Duration) (*Listener, *shedLog) {
	t.Helper()
	shed := &shedLog{}
	l := Limit(inner, maxConns, &LimitOptions{Name: "test", OnShed: shed.add})
	l.headerGrace, l.headerStall = grace, stall
	return l, shed
}

func listenTCP(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func write(t *testing.T, c net.Conn, s string) {
	t.Helper()
	if _, err := io.WriteString(c, s); err != nil {
		t.Fatal(err)
	}
}

func closedByServer(t *testing.T, c net.Conn, who string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := c.Read(make([]byte, 64))
	if n != 0 || err == nil {
		t.Fatalf("%s: read %d bytes, %v; want the connection closed with nothing written", who, n, err)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%s: still open", who)
	}
}

// TestCapClosesStalledRequest (listen37): at the cap with no idle
// connection, a connection whose request stopped after its first bytes
// (one byte, or part of a request line) is closed to make room, the one
// whose bytes came first first, and the new connection is served. Before,
// such connections counted as carrying a request: a client that opened as
// many as the cap and sent a byte on each had every new connection
// answered 503 until read_header_timeout, again and again.
func TestCapClosesStalledRequest(t *testing.T) {
	inner := listenTCP(t)
	l, shed := capListener(t, inner, 2, 0, 0)
	served, held, release := stallServer(t, l)
	addr := inner.Addr().String()

	a := dial(t, addr)
	write(t, a, "GET /?who=a HT")
	waitFor(t, "a's bytes read", func() bool { return readingLen(l) == 1 })
	b := dial(t, addr)
	write(t, b, "P")
	waitFor(t, "b's byte read", func() bool { return readingLen(l) == 2 })

	c := dial(t, addr)
	send(t, c, "/hold?who=c")
	select {
	case who := <-held:
		if who != "c" {
			t.Fatalf("held %q", who)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("c was not served in 10 s; shed %q", strings.Join(shed.get(), ","))
	}
	closedByServer(t, a, "a")

	// b is the stalled one now; c carries a request.
	d := dial(t, addr)
	send(t, d, "/?who=d")
	readOK(t, bufio.NewReader(d), "d")
	closedByServer(t, b, "b")
	release()
	readOK(t, bufio.NewReader(c), "c")

	if got := strings.Join(shed.get(), ","); got != "evicted,evicted" {
		t.Errorf("shed = %q, want evicted,evicted", got)
	}
	if got := strings.Join(served(), ","); got != "c,d" {
		t.Errorf("served %q, want c,d", got)
	}
}

// TestCapSparesRequestStillComing (listen37): a request whose first bytes
// came less than headerGrace ago, or from which bytes came less than
// headerStall ago, is not closed at the cap: the new connection is refused
// 503 and the request, once complete, is answered.
func TestCapSparesRequestStillComing(t *testing.T) {
	for _, tc := range []struct {
		name         string
		grace, stall time.Duration
	}{
		{"young", time.Hour, 0},
		{"trickling", 0, time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner := listenTCP(t)
			l, shed := capListener(t, inner, 1, tc.grace, tc.stall)
			served, _, _ := stallServer(t, l)
			addr := inner.Addr().String()

			a := dial(t, addr)
			write(t, a, "G")
			waitFor(t, "a's byte read", func() bool { return readingLen(l) == 1 })
			b := dial(t, addr)
			resp, err := http.ReadResponse(bufio.NewReader(b), nil)
			if err != nil {
				t.Fatalf("b: %v, want 503", err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("b: %d, want 503", resp.StatusCode)
			}
			write(t, a, "ET /?who=a HTTP/1.1\r\nHost: x\r\n\r\n")
			readOK(t, bufio.NewReader(a), "a")
			if got := strings.Join(shed.get(), ","); got != "refused" {
				t.Errorf("shed = %q, want refused", got)
			}
			if got := strings.Join(served(), ","); got != "a" {
				t.Errorf("served %q, want a", got)
			}
		})
	}
}

// TestCapStalledBytesGoNowhere (listen37): a connection closed as stalled
// after its request's bytes left the socket, but before its Read returned
// them, returns no bytes: net/http never serves that request (its answer
// could not be written, and a tool call may not run unanswered).
func TestCapStalledBytesGoNowhere(t *testing.T) {
	inner := listenTCP(t)
	pl := &pauseListener{Listener: inner, read: make(chan struct{}), proceed: make(chan struct{}), armed: make(chan struct{}, 1)}
	pl.armed <- struct{}{}
	l, shed := capListener(t, pl, 1, 0, 0)
	served, _, _, connClosed := stallServerClosed(t, l)
	addr := inner.Addr().String()

	a := dial(t, addr)
	send(t, a, "/?who=a")
	<-pl.read // a's request left its socket; its Read has not returned

	b := dial(t, addr)
	send(t, b, "/?who=b")
	readOK(t, bufio.NewReader(b), "b")
	close(pl.proceed)
	closedByServer(t, a, "a")
	// net/http is done with a (b stays open, idle): whatever it did with
	// a's Read is done.
	select {
	case <-connClosed:
	case <-time.After(10 * time.Second):
		t.Fatal("net/http did not end a's connection in 10 s")
	}
	if got := strings.Join(shed.get(), ","); got != "evicted" {
		t.Errorf("shed = %q, want evicted", got)
	}
	if got := strings.Join(served(), ","); got != "b" {
		t.Errorf("served %q, want b alone", got)
	}
}

// TestCapSparesJustIdleOverStalled: at the cap, a keep-alive connection
// that has just been answered stays open and a stalled request is closed
// instead; once idle for idleGrace, the idle one goes first again. Before,
// the idle one always went first: during a one-byte flood an agent's own
// connection was closed between its initialize and its
// notifications/initialized, whose POST then failed with EOF
// (TestOneByteFloodAtTheCap, flaky in CI).
func TestCapSparesJustIdleOverStalled(t *testing.T) {
	for _, tc := range []struct {
		name      string
		idleGrace time.Duration
		evicted   string
	}{
		{"just idle", time.Hour, "a"},
		{"idle long", 0, "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner := listenTCP(t)
			l, shed := capListener(t, inner, 2, 0, 0)
			l.idleGrace = tc.idleGrace
			served, _, _ := stallServer(t, l)
			addr := inner.Addr().String()

			a := dial(t, addr)
			write(t, a, "G")
			waitFor(t, "a's byte read", func() bool { return readingLen(l) == 1 })
			b := dial(t, addr)
			br := bufio.NewReader(b)
			send(t, b, "/?who=b")
			readOK(t, br, "b")
			waitFor(t, "b idle", func() bool { return l.Idle() == 1 })

			c := dial(t, addr)
			send(t, c, "/?who=c")
			readOK(t, bufio.NewReader(c), "c")
			if tc.evicted == "a" {
				closedByServer(t, a, "a")
				send(t, b, "/?who=b2")
				readOK(t, br, "b2")
			} else {
				closedByServer(t, b, "b")
				write(t, a, "ET /?who=a HTTP/1.1\r\nHost: x\r\n\r\n")
				readOK(t, bufio.NewReader(a), "a")
			}
			if got := strings.Join(shed.get(), ","); got != "evicted" {
				t.Errorf("shed = %q, want evicted", got)
			}
			want := "b,c,b2"
			if tc.evicted == "b" {
				want = "b,c,a"
			}
			if got := strings.Join(served(), ","); got != want {
				t.Errorf("served %q, want %q", got, want)
			}
		})
	}
}
