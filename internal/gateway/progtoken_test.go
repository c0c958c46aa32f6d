package gateway

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// TestUpstreamProgressTokensCannotBeGuessed (review18): the progress routes
// are the gateway's, shared by every upstream, and relayWire routes a
// notifications/progress by its token alone. An upstream that saw the token
// toolgate put on its own call must not be able to name another call's
// (another upstream's, another tenant's: since leanprog a lean call's too)
// and have its progress, message and all, written to that call's agent
// under the agent's token. On integ29 the tokens were "toolgate-<n>" from
// one counter: the next call's was the seen one plus one.
func TestUpstreamProgressTokensCannotBeGuessed(t *testing.T) {
	r := newProgressRoutes(time.Minute, slog.New(slog.DiscardHandler))
	defer r.close()
	seen := &callProgress{ctx: t.Context(), log: slog.New(slog.DiscardHandler)}
	seen.write = func(float64, float64, string) error { return nil }
	r.start(seen) // the call on the forging upstream: its token is seen there
	defer r.finish(seen)
	other := &callProgress{ctx: t.Context(), log: slog.New(slog.DiscardHandler)}
	other.write = func(float64, float64, string) error { return nil }
	r.start(other) // another agent's call, on the same upstream session
	defer r.finish(other)
	scope := &progressScope{sid: "shared"}
	seen.bindTo(scope)
	other.bindTo(scope)
	if seen.upstreamToken == other.upstreamToken {
		t.Fatalf("two calls got the token %q", seen.upstreamToken)
	}
	// Every token made from the seen one by moving one of its numbers a
	// little.
	num := regexp.MustCompile(`[0-9]+`)
	for _, loc := range num.FindAllStringIndex(seen.upstreamToken, -1) {
		n, err := strconv.ParseUint(seen.upstreamToken[loc[0]:loc[1]], 10, 64)
		if err != nil {
			continue
		}
		for d := uint64(1); d <= 64; d++ {
			guess := seen.upstreamToken[:loc[0]] + strconv.FormatUint(n+d, 10) + seen.upstreamToken[loc[1]:]
			r.relayWire(scope, json.RawMessage(fmt.Sprintf(`{"progressToken":%q,"progress":1,"message":"forged"}`, guess)))
			if r.route(guess) == other {
				t.Fatalf("the token %q, guessed from %q, routes to another call's progress", guess, seen.upstreamToken)
			}
		}
	}
	other.qmu.Lock()
	queued := other.queued
	other.qmu.Unlock()
	if queued {
		t.Error("a forged notification was queued for another call")
	}
}
