package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// logRecords is a slog.Handler that sends each record to ch.
type logRecords struct{ ch chan slog.Record }

func (h logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (h logRecords) Handle(_ context.Context, r slog.Record) error {
	h.ch <- r.Clone()
	return nil
}
func (h logRecords) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h logRecords) WithGroup(string) slog.Handler      { return h }

// nextRecord returns the next record logged to ch; the test fails if none
// comes within a minute (a failsafe, not a timing).
func nextRecord(t *testing.T, ch <-chan slog.Record) slog.Record {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(time.Minute):
		t.Fatal("no log record within a minute")
	}
	return slog.Record{}
}

func recordAttrs(r slog.Record) map[string]string {
	m := map[string]string{}
	r.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.String()
		return true
	})
	return m
}

// blockedList is a store whose EachRequest waits for its context to end
// (entered is closed when it starts), then fails with the context's error,
// as a real store's read does when its request is cancelled.
type blockedList struct {
	Approvals
	entered chan struct{}
}

func (b blockedList) EachRequest(ctx context.Context, _ store.Filter, _ func(approval.Request) error) (string, error) {
	close(b.entered)
	<-ctx.Done()
	return "", fmt.Errorf("list requests: %w", ctx.Err())
}

// TestListClientGoneIsNotAnError (fixes29): a client that goes away in
// the middle of GET /v1/approvals (after part of the page was sent, or
// while the store still reads) is logged once at INFO, naming the
// request, not at ERROR as a failure of toolgate's; a store that fails
// after part of the page was sent still is an ERROR.
func TestListClientGoneIsNotAnError(t *testing.T) {
	db := sqlitetest.Open(t)
	fillListed(t, db, 300, 3000) // ≈ 1 MB a page
	g := gate.New(db, &policy.Policy{Default: policy.Allow}, nil)

	t.Run("closed after the first pieces", func(t *testing.T) {
		logs := make(chan slog.Record, 16)
		s := New(g, listAuth, &Options{Logger: slog.New(logRecords{logs})})
		srv := httptest.NewUnstartedServer(s)
		srv.Listener = smallBuffers{srv.Listener}
		srv.Start()
		defer srv.Close()
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(64 << 10)
		}
		if _, err := io.WriteString(c, "GET /v1/approvals?limit=1000 HTTP/1.1\r\nHost: toolgate\r\nAuthorization: Bearer bob\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		head := make([]byte, listFlushAt)
		if _, err := io.ReadFull(c, head); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(head), "HTTP/1.1 200 ") {
			t.Fatalf("answer starts %q, want a 200", head[:40])
		}
		_ = c.Close() // mid-page: the page is ≈ 1 MB
		r := nextRecord(t, logs)
		a := recordAttrs(r)
		if r.Level != slog.LevelInfo || !strings.Contains(r.Message, "client went away") {
			t.Fatalf("logged %s %q %v, want INFO \"client went away\"", r.Level, r.Message, a)
		}
		if a[keyPath] != "/v1/approvals" || a[keyMethod] != http.MethodGet || a[keyPrincipal] != "bob" || a[keyRemote] != c.LocalAddr().String() {
			t.Errorf("record names %v; want the request: GET /v1/approvals by bob from %s", a, c.LocalAddr())
		}
		if a[keySent] == "0" || a[keySent] == "" {
			t.Errorf("%s = %q, want the approvals sent before the client went", keySent, a[keySent])
		}
		srv.Close() // waits for the handler: nothing more is logged
		select {
		case r := <-logs:
			t.Errorf("logged also %s %q", r.Level, r.Message)
		default:
		}
	})

	t.Run("cancelled while the store reads", func(t *testing.T) {
		logs := make(chan slog.Record, 16)
		entered := make(chan struct{})
		s := New(blockedList{Approvals: g, entered: entered}, listAuth, &Options{Logger: slog.New(logRecords{logs})})
		srv := httptest.NewServer(s)
		defer srv.Close()
		ctx, cancel := context.WithCancel(t.Context())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v1/approvals", nil)
		req.Header.Set("Authorization", "Bearer bob")
		done := make(chan error, 1)
		go func() {
			resp, err := srv.Client().Do(req)
			if err == nil {
				_ = resp.Body.Close()
			}
			done <- err
		}()
		<-entered
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("request = %v, want it cancelled", err)
		}
		r := nextRecord(t, logs)
		if r.Level != slog.LevelInfo || !strings.Contains(r.Message, "client went away") {
			t.Fatalf("logged %s %q %v, want INFO \"client went away\"", r.Level, r.Message, recordAttrs(r))
		}
	})

	t.Run("store fails after the first pieces", func(t *testing.T) {
		logs := make(chan slog.Record, 16)
		broken := fmt.Errorf("list: %w: connection reset", store.ErrUnavailable)
		s := New(brokenAfter{Approvals: g, n: 150, err: broken}, listAuth, &Options{Logger: slog.New(logRecords{logs})})
		srv := httptest.NewServer(s)
		defer srv.Close()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/v1/approvals?limit=1000", nil)
		req.Header.Set("Authorization", "Bearer bob")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		r := nextRecord(t, logs)
		if r.Level != slog.LevelError || !strings.Contains(r.Message, "broke off") || !strings.Contains(recordAttrs(r)[keyErr], "connection reset") {
			t.Fatalf("logged %s %q %v, want the store's failure at ERROR", r.Level, r.Message, recordAttrs(r))
		}
	})
}
