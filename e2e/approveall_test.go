package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// approveOne approves id through the admin API at admin (through hc;
// nil: a connection per attempt, postReviewVia), retrying an
// answer that is neither 200 nor 409 (the store was down, the answer was
// lost) like a person clicking again, until deadline passes or ctx ends,
// and returns the status that counts. A retried attempt's 409 may be
// the answer to the attempt before it, which landed though its answer
// was lost (a client-side timeout, a dropped connection: seen once under
// load in BenchmarkHeldCalls): it is resolved by reading the approval
// (approvedByUs), and counts as 200 when this reviewer's approval is
// what stands. Any other 409 is the answer.
func approveOne(ctx context.Context, hc *http.Client, admin, id string, deadline time.Time) int {
	retried := false
	for {
		r := postReviewVia(ctx, hc, admin, id, "approve", "")
		switch {
		case r.Err == nil && r.Status == http.StatusConflict && retried:
			return landedStatus(ctx, admin, id, deadline)
		case r.Err == nil && (r.Status == http.StatusOK || r.Status == http.StatusConflict), time.Now().After(deadline), ctx.Err() != nil:
			return r.Status
		}
		retried = true
		time.Sleep(pollEvery) // like a person clicking again
	}
}

// landedStatus is the status of a retried approve of id that answered
// 409: 200 when id's approval shows this reviewer's approval standing
// (approvedByUs), else 409, also when it cannot be read by deadline.
func landedStatus(ctx context.Context, admin, id string, deadline time.Time) int {
	for {
		a, err := readReviewed(ctx, admin, id)
		switch {
		case err == nil && a.approvedByUs():
			return http.StatusOK
		case err == nil, time.Now().After(deadline), ctx.Err() != nil:
			return http.StatusConflict
		}
		time.Sleep(pollEvery)
	}
}

// reviewedApproval is the part of the admin API's approval JSON that
// tells who approved it.
type reviewedApproval struct {
	State   string       `json:"state"`
	Reviews []reviewVote `json:"reviews"`
}

// reviewVote is one reviewer's vote in reviewedApproval.Reviews.
type reviewVote struct {
	By      string `json:"by"`
	Verdict string `json:"verdict"`
}

// approvedByUs reports whether the approval is approved, or was consumed
// since (dispatched), with an approve by the approver these tests review
// as.
func (a reviewedApproval) approvedByUs() bool {
	if a.State != "approved" && a.State != "consumed" {
		return false
	}
	return slices.ContainsFunc(a.Reviews, func(r reviewVote) bool { return r.By == approverID && r.Verdict == "approve" })
}

// readReviewed GETs approval id from the admin API at admin as the
// approver. It does not fail the test, so it can run in a goroutine.
func readReviewed(ctx context.Context, admin, id string) (reviewedApproval, error) {
	var a reviewedApproval
	ctx, cancel := context.WithTimeout(ctx, waitFor(ctx))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, admin+"/v1/approvals/"+id, nil)
	if err != nil {
		return a, err
	}
	req.Header.Set("Authorization", "Bearer "+approverToken)
	req.Close = true // leave no idle connection to hold up the gateway's shutdown
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return a, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return a, err
	}
	if resp.StatusCode != http.StatusOK {
		return a, fmt.Errorf("GET approval %s: %s %s", id, resp.Status, body)
	}
	return a, json.Unmarshal(body, &a)
}

// lossyAdmin is a proxy in front of an admin API that loses the answer
// to the first approve of some approvals: lose[id] runs in place of
// passing that attempt on and answering it, and the connection is then
// dropped without an answer. The re-sends of the approvals in conflict
// are answered 409 by the proxy itself. Everything else is passed on.
type lossyAdmin struct {
	proxy    *httputil.ReverseProxy
	lose     map[string]func(r *http.Request)
	conflict map[string]bool

	mu       sync.Mutex
	attempts map[string]int   // approves seen, by approval id
	answers  map[string][]int // the statuses of the approves passed on, by approval id
}

// approveID is the approval id of an approve's path, or "" for any
// other path.
func approveID(p string) string {
	id, ok := strings.CutSuffix(strings.TrimPrefix(p, "/v1/approvals/"), "/approve")
	if !ok || strings.Contains(id, "/") {
		return ""
	}
	return id
}

// answered records resp's status when it answers an approve.
func (l *lossyAdmin) answered(resp *http.Response) error {
	if id := approveID(resp.Request.URL.Path); id != "" && resp.Request.Method == http.MethodPost {
		l.mu.Lock()
		l.answers[id] = append(l.answers[id], resp.StatusCode)
		l.mu.Unlock()
	}
	return nil
}

func (l *lossyAdmin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := approveID(r.URL.Path)
	if id == "" || r.Method != http.MethodPost {
		l.proxy.ServeHTTP(w, r)
		return
	}
	l.mu.Lock()
	l.attempts[id]++
	first := l.attempts[id] == 1
	l.mu.Unlock()
	lose := l.lose[id]
	switch {
	case first && lose != nil:
		lose(r)
		if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = c.Close() // the answer is lost
		}
	case !first && l.conflict[id]:
		http.Error(w, `{"error":{"code":"resolved","message":"the request is no longer pending"}}`, http.StatusConflict)
	default:
		l.proxy.ServeHTTP(w, r)
	}
}

// tries returns how many approves of id the proxy saw and the statuses
// of those it passed on.
func (l *lossyAdmin) tries(id string) (int, []int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.attempts[id], slices.Clone(l.answers[id])
}

// TestApproveAllResolvesALostAnswer: approveAll (the held-call tests' and
// BenchmarkHeldCalls' approver) re-sends an approve whose answer it did
// not get. A re-send's 409 counted as a failed approval even when the
// first attempt had landed and the call ran; now it is resolved by
// reading the approval: this reviewer's approval standing (approved, or
// consumed since) counts as 200, anything else stays 409. Four held
// calls behind a proxy that loses answers:
//   - landed: the approve lands, its answer is lost; the gateway answers
//     the re-send 200 (a duplicate vote: the API's answer to a reviewer
//     repeating a verdict, in any state);
//   - landed409: the same, with the re-send answered 409 (by the proxy:
//     the gateway itself answers a repeated verdict 200, so the 409 seen
//     in BenchmarkHeldCalls came from elsewhere): 200 now, 409 before;
//   - denied: someone else denies it while this approve's answer is lost;
//     the gateway answers the re-send 409, which stays reported;
//   - plain: goes through, 200.
func TestApproveAllResolvesALostAnswer(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.log")
	g := startGateway(t, gatewayConfig(filepath.Join(dir, "gw.db"), upstreamServer(record)+heldScalePolicy), nil)
	cs := g.connect(t, nil, nil)
	const n = 4
	calls := make([]<-chan callResult, n)
	for i := range n {
		calls[i] = callAsync(t.Context(), cs, toolCall("t__echo_raw", fmt.Sprintf(`{"i":%d,"tag":"lost"}`, i)))
	}
	ids := make([]string, n)
	for _, a := range waitPending(t, g.Admin, n) {
		ids[argI(t, a)] = a.ID
	}
	target, err := url.Parse(g.Admin)
	if err != nil {
		t.Fatal(err)
	}
	landed, denied, plain, landed409 := ids[0], ids[1], ids[2], ids[3]
	lossy := &lossyAdmin{proxy: httputil.NewSingleHostReverseProxy(target), conflict: map[string]bool{landed409: true},
		attempts: map[string]int{}, answers: map[string][]int{}}
	lossy.proxy.ModifyResponse = lossy.answered
	// lands passes the approve on (it lands, answered 200) and waits until
	// the call consumed the approval, so that the re-send comes after.
	lands := func(id string) func(r *http.Request) {
		return func(r *http.Request) {
			rec := httptest.NewRecorder()
			lossy.proxy.ServeHTTP(rec, r)
			if rec.Code != http.StatusOK {
				t.Errorf("the approve of %s whose answer is lost answered %d, want 200\n%s", id, rec.Code, rec.Body)
				return
			}
			for deadline := time.Now().Add(waitFor(t)); ; time.Sleep(pollEvery) {
				a, err := readReviewed(t.Context(), g.Admin, id)
				if err == nil && a.State == "consumed" {
					return
				}
				if time.Now().After(deadline) {
					t.Errorf("approval %s is %q (%v), want consumed", id, a.State, err)
					return
				}
			}
		}
	}
	lossy.lose = map[string]func(*http.Request){
		landed:    lands(landed),
		landed409: lands(landed409),
		denied: func(*http.Request) {
			// Someone else denies it; this approve never arrives.
			if r := postReview(t.Context(), g.Admin, denied, "deny", "not this one"); r.Err != nil || r.Status != http.StatusOK {
				t.Errorf("deny %s: %d %v\n%s", denied, r.Status, r.Err, r.Body)
			}
		},
	}
	ts := httptest.NewServer(lossy)
	t.Cleanup(ts.Close)

	statuses := approveAll(t.Context(), ts.URL, ids, 2, time.Minute)
	for id, want := range map[string]int{landed: http.StatusOK, landed409: http.StatusOK, denied: http.StatusConflict, plain: http.StatusOK} {
		if got := statuses[id]; got != want {
			t.Errorf("approveAll's status of %s: %d, want %d", id, got, want)
		}
	}
	// What the approves reached: the lost one and the re-send each.
	for id, want := range map[string][]int{landed: {http.StatusOK, http.StatusOK}, landed409: {http.StatusOK}, denied: {http.StatusConflict}, plain: {http.StatusOK}} {
		tries := 2
		if id == plain {
			tries = 1
		}
		if n, answers := lossy.tries(id); n != tries || !slices.Equal(answers, want) {
			t.Errorf("approves of %s: %d reached the proxy, the gateway answered %v; want %d, answered %v", id, n, answers, tries, want)
		}
	}
	results := make([]callResult, n)
	for i := range n {
		results[i] = await(t, calls[i])
	}
	counts := map[string]int{}
	for _, line := range readRecord(t, record) {
		counts[line]++
	}
	for i, r := range results {
		args := fmt.Sprintf(`{"i":%d,"tag":"lost"}`, i)
		want := 1
		if i == 1 {
			want = 0 // denied
		}
		switch {
		case r.err != nil:
			t.Errorf("call %d: %v", i, r.err)
		case counts["echo_raw "+args] != want:
			t.Errorf("call %d ran %d times upstream, want %d", i, counts["echo_raw "+args], want)
		case want == 1 && (r.res.IsError || text(r.res) != args):
			t.Errorf("call %d: isError %v %q, want its arguments", i, r.res.IsError, text(r.res))
		case want == 0 && !r.res.IsError:
			t.Errorf("call %d (denied) answered %q, want a refusal", i, text(r.res))
		}
	}
}
