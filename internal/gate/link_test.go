package gate

import (
	"context"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// TestInboxLinks checks approvals.public_url: a retry-mode answer and a
// held call's keep-alives name the approval id and its inbox link, and
// _meta carries the link; without a public URL they name the id only.
func TestInboxLinks(t *testing.T) {
	t.Run("retry mode", func(t *testing.T) {
		f := newFixture(t, time.Minute, &Options{PublicURL: "https://gate.example.com/", RetryWait: time.Nanosecond})
		f.pol.p.Store(retryPolicy(time.Minute))
		a := f.gate.Admit(t.Context(), writeCall("/a"))
		link := "https://gate.example.com/ui/approvals/" + string(a.ApprovalID)
		if a.Allowed || a.ApprovalID == "" || !strings.Contains(a.Message, link) || !strings.Contains(a.Message, "approval required") {
			t.Fatalf("retry answer %+v, want approval required with the link %s", a, link)
		}
		meta := a.Meta["toolgate/approval"].(map[string]any)
		if meta["url"] != link {
			t.Errorf(`_meta url = %v, want %s`, meta["url"], link)
		}
		again := f.gate.Admit(t.Context(), writeCall("/a"))
		if again.ApprovalID != a.ApprovalID || !strings.Contains(again.Message, "still pending") || !strings.Contains(again.Message, link) {
			t.Errorf("re-send answer %+v, want still pending with the link", again)
		}
	})
	t.Run("held call keep-alives", func(t *testing.T) {
		for _, public := range []string{"http://127.0.0.1:7071", ""} {
			f := newFixture(t, time.Minute, &Options{PublicURL: public, KeepAlive: time.Hour})
			msgs := make(chan string, 10)
			c := writeCall("/a")
			c.KeepAlive = func(_ context.Context, msg string) { msgs <- msg }
			ch := admitAsync(t.Context(), f.gate, c)
			r := waitPending(t, f.db, 1)[0]
			// The first keep-alive comes at once, not after an interval (1h).
			var msg string
			select {
			case msg = <-msgs:
			case <-time.After(10 * time.Second):
				t.Fatal("no keep-alive when the hold started")
			}
			// The rule and the expiry are in it, with or without a link;
			// the arguments never are.
			want := "waiting for approval " + string(r.ID) + ` (rule "` + r.Rule + `")`
			if public != "" {
				want += "; an approver can review it at " + public + "/ui/approvals/" + string(r.ID)
			}
			want += "; the request expires at " + r.ExpiresAt.UTC().Format(time.RFC3339)
			if msg != want {
				t.Errorf("public_url %q: keep-alive %q, want %q", public, msg, want)
			}
			if _, err := f.gate.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "", ""); err != nil {
				t.Fatal(err)
			}
			if a := recv(t, ch); !a.Allowed {
				t.Fatalf("%+v", a)
			}
		}
	})
}

// TestRequestRecordsPolicyRevision checks that a held call's request
// records the revision of the policy that asked for it, for approvers.
func TestRequestRecordsPolicyRevision(t *testing.T) {
	p := testPolicy(time.Minute)
	h := policy.NewHolder(p)
	want := h.Revision()
	if want == "" {
		t.Fatal("the holder has no revision")
	}
	db := sqlitetest.Open(t)
	g := New(db, h, nil)
	ch := admitAsync(t.Context(), g, writeCall("/a"))
	r := waitPending(t, db, 1)[0]
	if r.PolicyRevision != want {
		t.Errorf("request policy revision %q, want %q", r.PolicyRevision, want)
	}
	if _, err := g.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "", ""); err != nil {
		t.Fatal(err)
	}
	if a := recv(t, ch); !a.Allowed {
		t.Fatalf("%+v", a)
	}
}
