package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestServeRestDrainsOnClose (fixes21): the connection of an answered
// parked call is served on by a server of the gateway's own (serveRest).
// At the gateway's Close that server was closed outright: a request in
// flight on the connection lost its response, where net/http's shutdown
// lets it finish, answered with "Connection: close", and then closes the
// connection. Now serveRest shuts its server down the same way.
func TestServeRestDrainsOnClose(t *testing.T) {
	verifyNoLeaks(t)
	opts := HTTPOptions{HeartbeatFirst: time.Millisecond, Heartbeat: time.Hour, DropGrace: time.Hour}
	f := newLeanFixture(t, &opts)
	var parked atomic.Int64
	f.g.parkHook = func() { parked.Add(1) }
	mcpH, err := f.g.Handler(testAuth, &opts)
	f.g.parkHook = nil
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	mux := http.NewServeMux()
	mux.Handle("/", mcpH)
	mux.HandleFunc("/v1/slow", func(w http.ResponseWriter, _ *http.Request) {
		close(entered)
		<-release
		_, _ = io.WriteString(w, "finished")
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	c, wr, _ := parkedSessionCall(t, f, ts.URL, ts.URL, &parked, 1)
	defer func() { _ = c.Close() }()
	host := strings.TrimPrefix(ts.URL, "http://")
	if _, err := io.WriteString(c, "GET /v1/slow HTTP/1.1\r\nHost: "+host+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	<-entered
	closed := make(chan error, 1)
	go func() { closed <- f.g.Close() }()
	<-f.g.root.Done() // shutting down, the request still in flight
	close(release)
	resp, err := http.ReadResponse(wr.br, nil)
	if err != nil {
		t.Fatalf("the request in flight at Close lost its response: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || string(body) != "finished" {
		t.Fatalf("response %s %q (%v), want 200 finished", resp.Status, body, err)
	}
	// Then the connection ends: no further request is served on it.
	if n, err := wr.br.Read(make([]byte, 1)); err == nil {
		t.Fatalf("read %d bytes after the last response, want the connection closed", n)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}
