package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// smallBuffers is a listener whose connections have small socket send
// buffers, so that a handler writing to a client that does not read
// blocks after a few hundred KB instead of the kernel's megabytes.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(64 << 10)
	}
	return c, err
}

// TestStalledListsLeaveTheAdminPool (attack28): two clients that ask for
// a large page of GET /v1/approvals and stop reading (any token that may
// list) must not keep an approver's GET /v1/approvals/{id} waiting: on
// main 37478e1 each held the page's read, and so a connection of the
// admin pool (AdminConns, 2), until the list's 30 s write deadline cut its
// page off; the show waited for that. Here the show is answered while the
// two still have not read, and once they read they get their whole page.
func TestStalledListsLeaveTheAdminPool(t *testing.T) {
	db := sqlitetest.Open(t)
	start := time.Now()
	fillListed(t, db, 300, 3000) // ≈ 1 MB a page
	t.Logf("filled in %v", time.Since(start))
	s := New(gate.New(db, &policy.Policy{Default: policy.Allow}, nil), listAuth, nil)
	srv := httptest.NewUnstartedServer(s)
	srv.Listener = smallBuffers{srv.Listener}
	srv.Start()
	defer srv.Close()
	client := func() *http.Client {
		d := &net.Dialer{}
		return &http.Client{Transport: &http.Transport{
			DisableCompression: true,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := d.DialContext(ctx, network, addr)
				if tc, ok := c.(*net.TCPConn); ok {
					_ = tc.SetReadBuffer(64 << 10)
				}
				return c, err
			},
		}}
	}
	get := func(c *http.Client, path string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer bob")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	// Two stalled readers: their headers come with the page's first
	// piece, written while (on main) the page's read is open.
	var stalled []io.ReadCloser
	for range 2 {
		resp := get(client(), "/v1/approvals?limit=1000&state=all")
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("list: %d", resp.StatusCode)
		}
		stalled = append(stalled, resp.Body)
	}
	t.Logf("stalled at %v", time.Since(start))
	show := get(client(), "/v1/approvals/01900000-0000-7000-8000-000000000001")
	body, err := io.ReadAll(show.Body)
	_ = show.Body.Close()
	if err != nil || show.StatusCode != http.StatusOK {
		t.Fatalf("show: %d %s %v", show.StatusCode, body, err)
	}
	t.Logf("shown at %v", time.Since(start))
	// Only now the stalled clients read. Had the show waited for the
	// admin pool, it was answered only after their pages were cut off.
	for i, b := range stalled {
		page, err := io.ReadAll(b)
		var l List
		if err != nil || json.Unmarshal(page, &l) != nil || len(l.Approvals) != 300 {
			t.Fatalf("stalled client %d read %d bytes (%v) after the show was answered, want its whole page of 300: the show waited until the list's write deadline cut the stalled pages off (their reads held the admin pool)",
				i, len(page), err)
		}
		if !bytes.HasSuffix(page, []byte("}\n")) {
			t.Fatalf("stalled client %d: the page does not end as a page", i)
		}
	}
}
