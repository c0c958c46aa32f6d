package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"toolgate/internal/api"
	"toolgate/internal/api/apitest"
)

// TestReadyzUpstreams: /readyz reports every upstream's state as JSON and
// answers 503 while a required one is not connected; an optional one that
// is down leaves it 200.
func TestReadyzUpstreams(t *testing.T) {
	var mu sync.Mutex
	states := map[string]api.UpstreamState{
		"fs":  {State: "connected", Required: true, Since: t0},
		"aux": {State: "reconnecting", Required: false, Since: t0, LastError: "connection refused"},
	}
	s := api.New(apitest.New(nil), authenticate, &api.Options{Upstreams: func() map[string]api.UpstreamState {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]api.UpstreamState{}
		for k, v := range states {
			out[k] = v
		}
		return out
	}})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	get := func() (int, api.ReadyReport) {
		t.Helper()
		resp, err := srv.Client().Get(srv.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		var rep api.ReadyReport
		if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, rep
	}

	status, rep := get()
	if status != http.StatusOK || rep.Status != "ok" || rep.Error != nil {
		t.Fatalf("with the optional upstream down: %d %+v, want 200 ok", status, rep)
	}
	if diff := cmp.Diff(states, rep.Upstreams); diff != "" {
		t.Errorf("upstreams (-want +got):\n%s", diff)
	}

	mu.Lock()
	states["fs"] = api.UpstreamState{State: "reconnecting", Required: true, Since: t0, LastError: "health check (ping): connection refused"}
	mu.Unlock()
	status, rep = get()
	if status != http.StatusServiceUnavailable || rep.Status != "unavailable" || rep.Error == nil || rep.Error.Code != api.CodeUnavailable ||
		!strings.Contains(rep.Error.Message, `upstream "fs" is reconnecting since 2026-01-02T03:04:05Z: health check (ping): connection refused`) ||
		strings.Contains(rep.Error.Message, "aux") {
		t.Errorf("with fs down: %d %+v", status, rep)
	}
	if rep.Upstreams["fs"].State != "reconnecting" {
		t.Errorf("fs state %+v", rep.Upstreams["fs"])
	}
}
