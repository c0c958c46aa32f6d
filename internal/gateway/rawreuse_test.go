package gateway

import (
	"strconv"
	"strings"
	"testing"
)

// TestRawCallDuplicateAnswersReachNoReusedWaiter (attack22): raw calls
// reuse the waiters of answered calls (rawCalls.free, cpu21). A
// misbehaving stdio upstream that answers a call twice, at once and again
// later while other calls wait (possibly on the first call's reused
// waiter), gives the first answer to its call and every other answer to
// nobody: the calls sent after it get their own answers.
func TestRawCallDuplicateAnswersReachNoReusedWaiter(t *testing.T) {
	_, u, logs := rawTestGateway(t, nil)
	c, err := u.session()
	if err != nil {
		t.Fatal(err)
	}
	answer := func(id, text string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"` + text + `"}]}}`
	}
	reply := func(marker string, ls ...string) string {
		var b strings.Builder
		for i, l := range ls {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Quote(l))
		}
		return `{"marker":"` + marker + `","lines":[` + b.String() + `]}`
	}
	aID := strconv.Quote(rawIDPrefix + strconv.FormatUint(c.raw.count()+1, 10))
	res, err := rawCall(t, t.Context(), u, "reply", reply("a", answer("$ID", "first"), answer("$ID", "again")))
	if err != nil || resultText(t, res) != "first" {
		t.Fatalf("the twice-answered call: %s %v, want its first answer", res, err)
	}
	logs.waitFor(t, "nobody waits for") // the second answer, dropped
	b := goRawCall(t, t.Context(), u, "gate", `{"marker":"b"}`)
	logs.waitFor(t, "holding b")
	// A third answer to the first call while b waits, then the sender's own.
	res, err = rawCall(t, t.Context(), u, "reply", reply("c", answer(aID, "stale"), answer("$ID", "c done")))
	if err != nil || resultText(t, res) != "c done" {
		t.Fatalf("the call after a stale answer: %s %v, want its own answer", res, err)
	}
	select {
	case r := <-b:
		t.Fatalf("the waiting call was answered before it was released: %s %v", r.res, r.err)
	default:
	}
	if _, err := rawCall(t, t.Context(), u, "open", `{"marker":"b"}`); err != nil {
		t.Fatal(err)
	}
	r := await(t, b, "call b")
	if r.err != nil || resultText(t, r.res) != "released b" {
		t.Fatalf("call b: %s %v, want its own answer", r.res, r.err)
	}
	if n := logs.count("nobody waits for"); n != 2 {
		t.Errorf("%d answers dropped as nobody's, want 2 (the first call's second and third)", n)
	}
}
