package gate

import (
	"context"
	"errors"
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

// TestApprovedResendKeepAliveSaysApproved (ops20): the re-send of a call
// approved while nobody held it (identical, or naming the approval: a
// 2026-era resume) is taken over and run at once, but the first progress
// keep-alive it was sent said "waiting for approval". It now says the
// approval was granted and the call runs.
func TestApprovedResendKeepAliveSaysApproved(t *testing.T) {
	for _, resume := range []bool{false, true} {
		f := newFixture(t, time.Minute, &Options{KeepAlive: time.Hour})
		ctx, cancel := context.WithCancelCause(t.Context())
		ch := admitAsync(ctx, f.gate, writeCall("/approved-resend"))
		r := waitPending(t, f.db, 1)[0]
		cancel(errors.New("client connection dropped"))
		recv(t, ch)
		if _, err := f.gate.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "", ""); err != nil {
			t.Fatal(err)
		}
		var msgs []string
		c := writeCall("/approved-resend")
		if resume {
			c.Resume = r.ID
		}
		c.KeepAlive = func(_ context.Context, msg string) { msgs = append(msgs, msg) }
		a := f.gate.Admit(t.Context(), c)
		if !a.Allowed || a.ApprovalID != r.ID {
			t.Fatalf("resume %v: re-send %+v, want it to run through %s", resume, a, r.ID)
		}
		a.Finish(t.Context(), approval.OutcomeOK)
		want := "approval " + string(r.ID) + ` (rule "` + r.Rule + `") was granted; running the call`
		if len(msgs) == 0 || msgs[0] != want {
			t.Fatalf("resume %v: keep-alives %q, want the first to be %q", resume, msgs, want)
		}
	}
}
