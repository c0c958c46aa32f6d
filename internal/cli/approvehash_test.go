package cli

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestApproveHashIsCheckedFirst (newuser46): `approvals approve <id>
// --hash abc` was sent to the gateway, which answered 422 (exit 1, as
// for a server's refusal), although the flag's form is known here: it is
// now a usage error (exit 2) naming the form, and nothing is sent. A
// well-formed hash is sent.
func TestApproveHashIsCheckedFirst(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.Error(w, `{"error":{"code":"not_found","message":"no approval"}}`, http.StatusNotFound)
	}))
	defer srv.Close()
	vars := map[string]string{EnvAddr: srv.URL, EnvToken: "tok"}
	env := func(k string) string { return vars[k] }
	const id = "01900000-0000-7000-8000-000000000001"
	for _, bad := range []string{"abc", "sha256:ABC", "sha256:" + strings.Repeat("A", 64), strings.Repeat("a", 64), "sha256:" + strings.Repeat("a", 63), ""} {
		var out, errb bytes.Buffer
		code := Run(t.Context(), []string{"approve", id, "--hash", bad}, &out, &errb, env)
		if code != 2 || !strings.Contains(errb.String(), `want "sha256:" and 64 lower-case hex digits`) {
			t.Errorf("--hash %q: exit %d, stderr %q; want 2 and the hash's form", bad, code, errb.String())
		}
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("%d requests sent for malformed hashes, want none", n)
	}
	var out, errb bytes.Buffer
	if code := Run(t.Context(), []string{"approve", id, "--hash", "sha256:" + strings.Repeat("0a", 32)}, &out, &errb, env); code != 1 || requests.Load() == 0 {
		t.Errorf("well-formed --hash: exit %d after %d requests, stderr %q; want it sent (and the 404 answered, exit 1)", code, requests.Load(), errb.String())
	}
}
