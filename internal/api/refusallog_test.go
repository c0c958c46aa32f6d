package api_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"toolgate/internal/api"
	"toolgate/internal/api/apitest"
)

// TestRefusedReviewLogNamesTheReviewer (newuser50): a review the approval
// rules refused (the person an agent acts for approving its call, 403
// self_review) was logged without who tried, so a security lead could not
// tell from the log who tried to approve their own agent's refund. The
// line names the authenticated principal; a request refused before
// authentication names none.
func TestRefusedReviewLogNamesTheReviewer(t *testing.T) {
	recs := make(chan slog.Record, 16)
	fake := apitest.New(func() time.Time { return t0 })
	for _, r := range fixtures() {
		fake.Add(r)
	}
	srv := httptest.NewServer(api.New(fake, authenticate, &api.Options{Logger: slog.New(chanLog{ch: recs}), Now: func() time.Time { return t0 }}))
	t.Cleanup(srv.Close)
	e := &env{fake: fake, srv: srv}

	if a := e.do(t, "POST", "/v1/approvals/"+idPending+"/approve", "carol-tok", `{}`); a.status != http.StatusForbidden || !strings.Contains(string(a.body), api.CodeSelfReview) {
		t.Fatalf("carol approves the call acting for her: %d %s, want 403 self_review", a.status, a.body)
	}
	r := takeRecord(t, recs)
	if at := attrsOf(r); r.Message != "admin request failed" || at["code"] != api.CodeSelfReview || at["principal"] != "carol" {
		t.Errorf("logged %q %v, want admin request failed code=self_review principal=carol", r.Message, at)
	}
	if a := e.do(t, "POST", "/v1/approvals/"+idPending+"/approve", "nosuch-token", `{}`); a.status != http.StatusUnauthorized {
		t.Fatalf("unknown token: %d, want 401", a.status)
	}
	if at := attrsOf(takeRecord(t, recs)); at["principal"] != "" {
		t.Errorf("a request refused before authentication names principal %q", at["principal"])
	}
}
