package gateway

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestServerConnectTimeout: servers.<name>.connect_timeout bounds starting
// that server and its initialize handshake instead of the gateway-wide
// default; a server that never answers is reported, not waited on.
func TestServerConnectTimeout(t *testing.T) {
	silent := ServerConfig{Name: "silent", Command: "sleep", Args: []string{"3600"}, ConnectTimeout: 200 * time.Millisecond}
	type result struct {
		g   *Gateway
		err error
	}
	done := make(chan result, 1)
	go func() {
		// The default would keep New waiting for an hour.
		g, err := New(t.Context(), []ServerConfig{silent}, allowAll(), &Options{ConnectTimeout: time.Hour})
		done <- result{g, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(testWait):
		t.Fatal("New still waits for a server that does not answer initialize: its connect_timeout was not applied")
	}
	if r.err != nil {
		t.Fatalf("New: %v", r.err)
	}
	t.Cleanup(func() { _ = r.g.Close() })
	err := r.g.Ready()
	if err == nil || !strings.Contains(err.Error(), `"silent"`) || !strings.Contains(err.Error(), context.DeadlineExceeded.Error()) {
		t.Errorf("Ready = %v, want the silent server named as not connected after its deadline", err)
	}
}

func TestServerConnectTimeoutNegative(t *testing.T) {
	_, err := New(t.Context(), []ServerConfig{{Name: "x", Command: "true", ConnectTimeout: -time.Second}}, allowAll(), nil)
	if err == nil || !strings.Contains(err.Error(), "connect timeout") {
		t.Errorf("New with a negative connect timeout = %v, want an error naming it", err)
	}
}

// TestConnectingLogged: New says which upstream it is waiting for, and for
// how long at most, before the wait, so a first start that downloads an
// npx server is not a silent terminal (a new user's report).
func TestConnectingLogged(t *testing.T) {
	var lb logBuffer
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	silent := ServerConfig{Name: "silent", Command: "sleep", Args: []string{"3600"}, ConnectTimeout: time.Hour}
	done := make(chan error, 1)
	go func() {
		g, err := New(ctx, []ServerConfig{silent}, allowAll(), &Options{Logger: lb.logger()})
		if err == nil {
			err = g.Close()
		}
		done <- err
	}()
	// New is still waiting for the silent server: the line is there already.
	lb.waitFor(t, `msg="connecting to upstream; the listeners open once each upstream has answered or its connect_timeout has passed" server=silent connect_timeout=1h0m0s`)
	cancel()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("New, then Close, after the context ended: %v", err)
		}
	case <-time.After(testWait):
		t.Fatal("New did not return after its context ended")
	}
}
