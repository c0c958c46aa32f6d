package api_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"toolgate/internal/api"
	"toolgate/internal/approval"
	"toolgate/internal/audit"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store/sqlstore"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// auditAPI is what serve passes as api.Options.Audit.
type auditAPI struct {
	*audit.Trail
	*sqlstore.DB
}

// TestAuditExport: GET /v1/audit streams the chain as JSON Lines to
// viewers and admins (not approvers), a tenant's caller gets its tenant's
// links only, since= filters by time, and bad parameters are 422. Calls
// decided through the real gate a moment before are included (the handler
// chains what is queued first).
func TestAuditExport(t *testing.T) {
	db := sqlitetest.Open(t)
	tr := audit.New(db, nil)
	g := gate.New(db, &policy.Policy{Default: policy.Allow}, &gate.Options{Recorder: tr})
	for _, tenant := range []string{"", "acme", "acme"} {
		g.Admit(t.Context(), gate.Call{Principal: approval.Principal{ID: "desktop", Kind: "agent", Tenant: tenant}, Server: "pay", Tool: "transfer", Arguments: json.RawMessage(`{"amount":5}`)})
	}
	identities["acme-viewer-tok"] = identity{approval.Principal{ID: "ava", Kind: "human", Tenant: "acme"}, []string{api.RoleViewer}}
	t.Cleanup(func() { delete(identities, "acme-viewer-tok") })
	srv := httptest.NewServer(api.New(nil, authenticate, &api.Options{Audit: auditAPI{tr, db}}))
	t.Cleanup(srv.Close)

	get := func(token, query string) (int, []api.AuditLine) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/v1/audit"+query, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var lines []api.AuditLine
		if resp.StatusCode == http.StatusOK {
			if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
				t.Errorf("Content-Type %q", ct)
			}
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				var l api.AuditLine
				if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
					t.Fatalf("line %q: %v", sc.Text(), err)
				}
				if audit.LinkHash(l.PrevHash, l.Record) != l.Hash {
					t.Errorf("line %d: hash does not match prev_hash + record", l.Seq)
				}
				lines = append(lines, l)
			}
		}
		return resp.StatusCode, lines
	}
	for _, tc := range []struct {
		token, query  string
		status, lines int
	}{
		{"viewer-tok", "", 200, 3},
		{"admin-tok", "?after=1", 200, 2},
		{"admin-tok", "?limit=1", 200, 1},
		{"acme-viewer-tok", "", 200, 2},
		{"viewer-tok", "?since=24h", 200, 3},
		{"viewer-tok", "?since=" + time.Now().Add(time.Hour).UTC().Format(time.RFC3339), 200, 0},
		{"alice-tok", "", 403, 0},
		{"", "", 401, 0},
		{"viewer-tok", "?since=yesterday", 422, 0},
		{"viewer-tok", "?after=-1", 422, 0},
		{"viewer-tok", "?limit=0", 422, 0},
	} {
		status, lines := get(tc.token, tc.query)
		if status != tc.status || len(lines) != tc.lines {
			t.Errorf("%s %s: %d with %d lines, want %d with %d", tc.token, tc.query, status, len(lines), tc.status, tc.lines)
		}
	}
}
