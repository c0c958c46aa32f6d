package slack

import (
	"context"
	"net/http"
	"testing"

	"toolgate/internal/approval"
	"toolgate/internal/store/sqlstore"
)

// recheckingReviewer is the gate whose approvals are re-checked and
// refused in the same step, as the gate answers an approval whose own
// transaction consumed the call held there and invalidated it
// (gate.TestJoinedInvalidationAnswersTheReviewer): the review is recorded
// by the real gate, the invalidation written to the real store, and the
// answer is the stored request.
type recheckingReviewer struct {
	Reviewer
	db *sqlstore.DB
}

func (r recheckingReviewer) Review(ctx context.Context, id approval.ID, p approval.Principal, v approval.Verdict, reason, hash string) (approval.Request, error) {
	got, err := r.Reviewer.Review(ctx, id, p, v, reason, hash)
	if err != nil || got.State != approval.StateApproved {
		return got, err
	}
	return r.db.UpdateRequest(ctx, id, "toolgate", func(x *approval.Request) error {
		return x.Consume(x.Binding(), "no writes now", got.DecidedAt)
	})
}

// TestInteractionSaysTheCallDidNotRun (truth51): an approval from Slack
// whose request is invalidated in the same step is told so, with the
// reason, not that the call runs when its holder re-checks it.
func TestInteractionSaysTheCallDidNotRun(t *testing.T) {
	w := newWorldWith(t, func(db *sqlstore.DB, g Reviewer) Reviewer { return recheckingReviewer{Reviewer: g, db: db} })
	r := w.request(t, "writes", "fs", func(r *approval.Request) { r.OnBehalfOf = "" })
	if status, body := w.post(t, click{user: "U0BOB", value: value(r)}); status != http.StatusOK {
		t.Fatalf("approve = %d %s", status, body)
	}
	want := `C0OPS/U0BOB: Your approval of fs · write_file was recorded; the request is invalidated: the call did not run (policy now denies the call (rule "no writes now")).`
	select {
	case got := <-w.notes:
		if got != want {
			t.Errorf("feedback = %q, want %q", got, want)
		}
	case <-t.Context().Done():
		t.Fatal("no feedback")
	}
}
