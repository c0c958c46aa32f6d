package approval

import (
	"errors"
	"testing"
)

// TestEligible checks that Eligible answers as Review would for the same
// reviewer, before any state or deadline check.
func TestEligible(t *testing.T) {
	ops := func(r *Request) { r.Approvers = []string{"group:ops", "carol"} }
	reviewed := func(r *Request) {
		r.Reviews = []Review{{By: "bob", Verdict: VerdictApprove, At: t0}}
	}
	tests := []struct {
		name string
		r    Request
		rv   Reviewer
		want error
	}{
		{"anyone may review", pending(), Reviewer{ID: "bob"}, nil},
		{"the requester may not", pending(), Reviewer{ID: "agent-1"}, ErrSelfReview},
		{"whom it acts for may not, in any case", pending(), Reviewer{ID: "Alice"}, ErrSelfReview},
		{"not in approvers", pending(ops), Reviewer{ID: "bob"}, ErrNotEligible},
		{"in an approver group", pending(ops), Reviewer{ID: "bob", Groups: []string{"ops"}}, nil},
		{"named approver", pending(ops), Reviewer{ID: "carol"}, nil},
		{"empty id", pending(), Reviewer{}, ErrNotEligible},
		{"already reviewed", pending(reviewed), Reviewer{ID: "bob"}, ErrDuplicate},
		{"state is not considered", approved(func(r *Request) { r.Reviews = nil }), Reviewer{ID: "bob"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.r.Eligible(tt.rv); !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Errorf("Eligible(%+v) = %v, want %v", tt.rv, err, tt.want)
			}
		})
	}
}
