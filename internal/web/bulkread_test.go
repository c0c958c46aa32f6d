package web_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/api"
	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store"
)

// viewsFail is the real store, except that, once set, the reads made for
// people (ViewRequest: on Postgres the pool reserved for them,
// AdminConns) fail, as when that pool is exhausted or its connections
// broke while the main pool works.
type viewsFail struct {
	store.Store
	fail *atomic.Bool
}

func (s viewsFail) ViewRequest(ctx context.Context, id approval.ID) (approval.Request, error) {
	if s.fail.Load() {
		return approval.Request{}, errors.New("attack12: the admin pool cannot read")
	}
	return s.Store.ViewRequest(ctx, id)
}

// TestBulkApproveSkipsWhatItCannotRead (attack12): bulk approval checks
// that the list showed a request's arguments whole by reading it; when
// that read fails, the request is skipped with nothing recorded. It used
// to go on to the review (which does not read the request first) and
// approve a request whose arguments the list showed only in part.
func TestBulkApproveSkipsWhatItCannotRead(t *testing.T) {
	e := newEnv(t, nil)
	var fail atomic.Bool
	pol := &policy.Policy{Default: policy.Approve, Approval: policy.Approval{Timeout: time.Minute, Mode: "hold", Approvals: 1}}
	e.g = gate.New(viewsFail{Store: e.db, fail: &fail}, pol, &gate.Options{GrantMaxTTL: 8 * time.Hour})
	auth := func(tok string) (approval.Principal, []string, bool) {
		id, ok := e.people[hashHex(tok)]
		return id.p, id.roles, ok
	}
	e.api = api.New(e.g, auth, &api.Options{Sessions: e.g, Events: e.db, Grants: e.g})
	e.inbox = e.newInbox(nil)

	padded := e.request(2, `{"memo":"`+strings.Repeat("monthly rent ", 8)+`","to":"acct-evil","amount":9999}`)
	whole := e.request(1, `{"to":"acct-1","amount":5}`)
	b := e.browser()
	b.signIn(bobTok)
	fail.Store(true)
	form := url.Values{"approve": {
		string(padded.ID) + " " + padded.ArgumentsHash,
		string(whole.ID) + " " + whole.ArgumentsHash,
	}}
	a := b.post("/ui/approve", form)
	if a.status != http.StatusConflict || !strings.Contains(a.body, "Skipped: 2") || !strings.Contains(a.body, "nothing was approved") {
		t.Errorf("bulk while the approvals cannot be read: %d, want 409 with both skipped:\n%s", a.status, a.body)
	}
	for _, id := range []approval.ID{padded.ID, whole.ID} {
		if got := e.state(id); got.State != approval.StatePending || len(got.Reviews) != 0 {
			t.Errorf("%s: %s with %d reviews, want pending without a review", id, got.State, len(got.Reviews))
		}
	}
	// Once the reads work, the one shown whole is approved.
	fail.Store(false)
	a = b.post("/ui/approve", url.Values{"approve": {string(whole.ID) + " " + whole.ArgumentsHash}})
	if a.status != http.StatusOK || e.state(whole.ID).State != approval.StateApproved {
		t.Errorf("bulk after the reads work: %d, %s:\n%s", a.status, e.state(whole.ID).State, a.body)
	}
}
