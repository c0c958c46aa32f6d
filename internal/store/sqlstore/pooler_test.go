package sqlstore

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"

	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/pgtest"
)

// poolerParams are the startup parameters PgBouncer keeps track of and
// accepts by default; any other one it refuses with "unsupported startup
// parameter" unless the operator lists it in ignore_startup_parameters
// (PgBouncer's documentation of that setting).
var poolerParams = map[string]bool{
	"user": true, "database": true, "application_name": true, "client_encoding": true,
	"datestyle": true, "timezone": true, "standard_conforming_strings": true,
}

// startPooler serves, on a local port, what a PgBouncer in session mode
// does to a connection's start: a startup packet with a parameter outside
// poolerParams is answered FATAL 08P01 "unsupported startup parameter: …"
// and closed; any other is passed to target and the bytes are relayed
// both ways. It returns the address to connect to.
func startPooler(t *testing.T, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				if err := relayPooled(c, target); err != nil {
					t.Errorf("pooler: %v", err)
				}
			})
		}
	})
	return ln.Addr().String()
}

// relayPooled serves c as startPooler says; an error only when target
// cannot be reached.
func relayPooled(c net.Conn, target string) error {
	defer func() { _ = c.Close() }()
	var msg []byte
	for {
		var hdr [8]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return nil
		}
		n := binary.BigEndian.Uint32(hdr[:4])
		code := binary.BigEndian.Uint32(hdr[4:])
		if code == 80877103 || code == 80877104 { // SSLRequest, GSSENCRequest: not offered
			if _, err := c.Write([]byte{'N'}); err != nil {
				return nil
			}
			continue
		}
		if n < 8 || n > 10000 {
			return nil
		}
		msg = make([]byte, n)
		copy(msg, hdr[:])
		if _, err := io.ReadFull(c, msg[8:]); err != nil {
			return nil
		}
		break
	}
	fields := bytes.Split(bytes.TrimRight(msg[8:], "\x00"), []byte{0})
	for i := 0; i+1 < len(fields); i += 2 {
		if k := string(fields[i]); !poolerParams[strings.ToLower(k)] {
			body := []byte("SFATAL\x00VFATAL\x00C08P01\x00Munsupported startup parameter: " + k + "\x00\x00")
			out := []byte{'E', 0, 0, 0, 0}
			binary.BigEndian.PutUint32(out[1:], uint32(len(body)+4)) //nolint:gosec // G115: a few dozen bytes
			_, _ = c.Write(append(out, body...))
			return nil
		}
	}
	up, err := net.Dial("tcp", target)
	if err != nil {
		return fmt.Errorf("dial %s: %w", target, err)
	}
	defer func() { _ = up.Close() }()
	if _, err := up.Write(msg); err != nil {
		return nil
	}
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(up, c)
		_ = up.(*net.TCPConn).CloseWrite()
		close(done)
	}()
	_, _ = io.Copy(c, up)
	_ = c.Close()
	<-done
	return nil
}

// TestOpensThroughSessionPooler: deploy.md supports PgBouncer in session
// mode, which refuses startup parameters it does not track. The store
// opens through such a pooler and does its work there, and every pool's
// connections still get idle_in_transaction_session_timeout (10 s, set
// after connecting, not as a startup parameter).
func TestOpensThroughSessionPooler(t *testing.T) {
	dsn := pgtest.Fresh(t)
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" || u.Host == "" {
		t.Skipf("the test DSN is not a URL with a host: %v", err)
	}
	u.Host = startPooler(t, u.Host)
	db, err := Open(t.Context(), Config{Driver: DriverPostgres, DSN: u.String()})
	if err != nil {
		t.Fatalf("open through a session pooler: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if _, _, err := db.ListRequests(t.Context(), store.Filter{}); err != nil {
		t.Fatalf("list through a session pooler: %v", err)
	}
	for name, pool := range map[string]interface {
		QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
	}{"main": db.sql, "lease": db.lsql, "admin": db.asql} {
		var v string
		if err := pool.QueryRowContext(t.Context(), `SHOW idle_in_transaction_session_timeout`).Scan(&v); err != nil {
			t.Fatalf("%s pool: %v", name, err)
		}
		if v != "10s" {
			t.Errorf("the %s pool's idle_in_transaction_session_timeout %q, want 10s", name, v)
		}
	}
}
