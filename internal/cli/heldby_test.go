package cli_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"toolgate/internal/api"
	"toolgate/internal/approval"
	"toolgate/internal/cli"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// TestShowSaysWhichInstanceHoldsTheCall: GET /v1/approvals/{id} carries
// held_by (the gateway instance whose caller waits on the call) and
// held_until, and approvals show prints them, so with two instances on
// one store an operator can tell which one holds a call (polish16: neither
// said). A call no instance held shows neither.
func TestShowSaysWhichInstanceHoldsTheCall(t *testing.T) {
	db := sqlitetest.Open(t)
	g := gate.New(db, &policy.Policy{Default: policy.Allow}, &gate.Options{Instance: "gw-east-7"})
	srv := httptest.NewServer(api.New(g, authenticate, &api.Options{}))
	t.Cleanup(srv.Close)
	now := time.Now().UTC().Truncate(time.Millisecond)
	held := request("01900000-0000-7000-8000-000000000001")
	held.CreatedAt, held.ExpiresAt = now, now.Add(time.Hour)
	held.Renew(g.Instance(), now.Add(30*time.Minute))
	free := request("01900000-0000-7000-8000-000000000002")
	free.CreatedAt, free.ExpiresAt = now, now.Add(time.Hour)
	if err := db.CreateRequest(t.Context(), held); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateRequest(t.Context(), free); err != nil {
		t.Fatal(err)
	}

	get := func(id string) api.Approval {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/v1/approvals/"+id, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer bob-tok")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var a api.Approval
		if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d, %v", id, resp.StatusCode, err)
		}
		return a
	}
	show := func(id string) string {
		t.Helper()
		var out, errb bytes.Buffer
		code := cli.Run(t.Context(), []string{"show", id}, &out, &errb, func(k string) string {
			return map[string]string{cli.EnvAddr: srv.URL, cli.EnvToken: "bob-tok"}[k]
		})
		if code != 0 {
			t.Fatalf("show %s: exit %d: %s", id, code, errb.String())
		}
		return out.String()
	}

	if a := get(string(held.ID)); a.HeldBy != "gw-east-7" || !a.HeldUntil.Equal(now.Add(30*time.Minute)) {
		t.Errorf("held call: held_by %q held_until %v; want gw-east-7 until %v", a.HeldBy, a.HeldUntil, now.Add(30*time.Minute))
	}
	if out, want := show(string(held.ID)), "Held by:            gw-east-7 (its claim runs to "; !strings.Contains(out, want) {
		t.Errorf("show of a held call lacks %q:\n%s", want, out)
	}
	if a := get(string(free.ID)); a.HeldBy != "" || !a.HeldUntil.IsZero() {
		t.Errorf("call no instance held: held_by %q held_until %v; want neither", a.HeldBy, a.HeldUntil)
	}
	if out := show(string(free.ID)); strings.Contains(out, "Held by") {
		t.Errorf("show of a call no instance held says Held by:\n%s", out)
	}
}

// TestShowOfAnEndedCallSaysNothingHoldsIt: once the call has ended (it
// ran, or, here, it was denied) its holder's claim is left to lapse; show said
// "its claim runs to …, renewed while it holds the call" for the seconds
// until then, as if something still held it.
func TestShowOfAnEndedCallSaysNothingHoldsIt(t *testing.T) {
	db := sqlitetest.Open(t)
	g := gate.New(db, &policy.Policy{Default: policy.Allow}, &gate.Options{Instance: "gw-east-7"})
	srv := httptest.NewServer(api.New(g, authenticate, &api.Options{}))
	t.Cleanup(srv.Close)
	now := time.Now().UTC().Truncate(time.Millisecond)
	ran := request("01900000-0000-7000-8000-000000000003")
	ran.CreatedAt, ran.ExpiresAt = now, now.Add(time.Hour)
	ran.Renew(g.Instance(), now.Add(30*time.Minute))
	if err := db.CreateRequest(t.Context(), ran); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Review(t.Context(), ran.ID, approval.Principal{ID: "alice"}, approval.VerdictDeny, "no", ""); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := cli.Run(t.Context(), []string{"show", string(ran.ID)}, &out, &errb, func(k string) string {
		return map[string]string{cli.EnvAddr: srv.URL, cli.EnvToken: "bob-tok"}[k]
	}); code != 0 {
		t.Fatalf("show: exit %d: %s", code, errb.String())
	}
	if want := "Held by:            gw-east-7 (it held the call, which has ended)"; !strings.Contains(out.String(), want) {
		t.Errorf("show of a denied call lacks %q:\n%s", want, out.String())
	}
	if strings.Contains(out.String(), "renewed while it holds the call") {
		t.Errorf("show of a denied call says it is still held:\n%s", out.String())
	}
}
