package web_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"testing"

	"toolgate/internal/api"
	"toolgate/internal/approval"
	"toolgate/internal/web"
)

// recordLog is a slog.Handler that keeps the records of level Warn and up
// in ch (buffered; a full channel drops).
type recordLog struct{ ch chan slog.Record }

func (h recordLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h recordLog) Handle(_ context.Context, r slog.Record) error {
	select {
	case h.ch <- r:
	default:
	}
	return nil
}
func (h recordLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordLog) WithGroup(string) slog.Handler      { return h }

// TestRefusedInboxReviewLogNamesTheReviewer (grants50): a review the
// approval rules refused in the inbox (403 self_review, not_eligible) was
// logged nowhere, unlike the admin API's (newuser50); the inbox logs it at
// Warn with who tried, the approval and the code.
func TestRefusedInboxReviewLogNamesTheReviewer(t *testing.T) {
	recs := make(chan slog.Record, 16)
	e := newEnv(t, &web.Options{Logger: slog.New(recordLog{ch: recs})})
	own := e.request(1, `{"to":"acct-1","amount":5}`, func(r *approval.Request) { r.OnBehalfOf = "bob" })
	ops := e.request(2, `{"to":"acct-2","amount":5}`, func(r *approval.Request) { r.Approvers = []string{"group:ops"} })
	b := e.browser()
	b.signIn(bobTok)
	for _, tc := range []struct {
		r    approval.Request
		code string
	}{{own, api.CodeSelfReview}, {ops, api.CodeNotEligible}} {
		a := b.post("/ui/approvals/"+string(tc.r.ID)+"/approve", url.Values{"arguments_hash": {tc.r.ArgumentsHash}})
		if a.status != http.StatusForbidden {
			t.Fatalf("bob approves %s: %d, want 403 %s\n%s", tc.r.ID, a.status, tc.code, a.body)
		}
		var got map[string]string
		for got == nil {
			select {
			case rec := <-recs:
				if rec.Message != "inbox review refused" {
					continue
				}
				got = map[string]string{}
				rec.Attrs(func(at slog.Attr) bool { got[at.Key] = at.Value.String(); return true })
			default:
				t.Fatalf("bob's refused approve of %s (%s) was not logged", tc.r.ID, tc.code)
			}
		}
		if got["principal"] != "bob" || got["code"] != tc.code || got["approval"] != string(tc.r.ID) {
			t.Errorf("logged %v, want principal=bob code=%s approval=%s", got, tc.code, tc.r.ID)
		}
		if st := e.state(tc.r.ID); st.State != approval.StatePending || len(st.Reviews) != 0 {
			t.Errorf("a refused review changed %s: %s %+v", tc.r.ID, st.State, st.Reviews)
		}
	}
}
