package gateway

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// decidedTrail is a gate.Recorder keeping what it was told.
type decidedTrail struct {
	mu sync.Mutex
	d  []gate.Decided // guarded by mu
}

func (r *decidedTrail) Decided(_ context.Context, d gate.Decided) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.d = append(r.d, d)
}

func (r *decidedTrail) all() []gate.Decided {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]gate.Decided(nil), r.d...)
}

// TestQueuedDropAudited (attack31): a parked call whose client leaves
// while it waits in the admission queue (parkadmit.go) is refused without
// an admission, and like every call the gate refuses without an approval
// request it is in the audit trail (the Recorder: a refused record with
// the policy's rule and the refusal the agent got) and counted. On
// 01049d8 it was in neither: under a full queue an agent could probe
// which calls need approval (parked, not answered at once) and leave no
// trace of them.
func TestQueuedDropAudited(t *testing.T) {
	verifyNoLeaks(t)
	trail := &decidedTrail{}
	db := sqlitetest.Open(t)
	pol := &countingPolicy{Holder: policy.NewHolder(&policy.Policy{
		Default:  policy.Allow,
		Approval: policy.Approval{Timeout: time.Minute, Mode: policy.ModeHold, Approvals: 1, ValidFor: time.Minute},
		Rules:    []policy.Rule{{Name: "big needs a human", Server: "up", Tools: []string{"big"}, Effect: policy.Approve}},
	})}
	gt := gate.New(db, pol, &gate.Options{Recorder: trail})
	ba := &blockingAdmits{Gate: gt, release: make(chan struct{}), entered: make(chan struct{}, 8)}
	h := newHooks()
	f := &leanFixture{gt: gt, db: db, pol: pol, trail: &leanTrail{}, h: h}
	f.g = newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(h))}}, ba, nil)
	f.g.leanHook = f.trail.hook
	f.base = serveHTTP(t, f.g, &HTTPOptions{DropGrace: time.Hour})
	f.g.parkQ = newParkQueue(1, (*leanHold).admitQueued)
	base, parked := parkedFront(t, f, &HTTPOptions{DropGrace: time.Hour})
	// Before the gateway's Close: a failure must not leave it waiting for
	// an admission held here (blockingAdmits.open).
	t.Cleanup(ba.open)
	modernPost(t, base, "up__echo", modernCallBody("1", "up__echo", `{}`, ""), nil) // the upstream, connected
	<-f.h.args

	q := f.g.parkQ
	conns := make([]net.Conn, 2)
	for i := range conns {
		c, host := dialRaw(t, base)
		conns[i] = c
		if _, err := io.WriteString(c, rawModernRequest(host, fmt.Sprint(10+i), "up__big", fmt.Sprintf(`{"n":%d}`, 10+i))); err != nil {
			t.Fatal(err)
		}
		waitParkedCount(t, parked, int64(i+1))
		// The first call admitted, the second queued, each before the
		// next is sent (the front tells of a parked call just before it
		// queues it).
		if i == 0 {
			ba.waitEntered(t, 1, "the first call")
		} else {
			waitQueued(t, q, 1)
		}
	}
	queued := func() []*leanHold {
		q.mu.Lock()
		defer q.mu.Unlock()
		return append([]*leanHold(nil), q.waiting...)
	}
	_ = conns[1].Close()
	for deadline := time.Now().Add(testWait); queued()[0].ctx.Err() == nil; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the queued call whose client dropped was not cancelled")
		}
	}
	ba.open()
	rs := f.waitState(t, approval.StatePending, 1)
	var got gate.Decided
	for deadline := time.Now().Add(testWait); ; time.Sleep(5 * time.Millisecond) {
		var n int
		for _, d := range trail.all() {
			if string(d.Arguments) == `{"n":11}` {
				got, n = d, n+1
			}
		}
		if n > 1 {
			t.Fatalf("the dropped call was recorded %d times, want once", n)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the queued call whose client left is not in the audit trail (recorded: %+v)", trail.all())
		}
	}
	if got.Allowed || got.Tool != "big" || got.Server != "up" || got.Rule != "big needs a human" ||
		!strings.Contains(got.Reason, "before the call was admitted; nothing was run") {
		t.Errorf("recorded %+v, want a refusal by rule %q saying it was not admitted", got, "big needs a human")
	}
	if _, err := f.gt.Review(t.Context(), rs[0].ID, approval.Principal{ID: "carol", Kind: "human"}, approval.VerdictDeny, "", ""); err != nil {
		t.Fatal(err)
	}
	_ = conns[0].Close()
}
