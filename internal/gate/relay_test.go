package gate

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/approval"
)

// TestRelayState: a wrapped upstream requestState gives back the
// upstream's state to its own caller and call, once, until it expires; a
// tampered one or an approval round's state is not a relayed round's
// (ErrNotRelayState), and a relayed round's state is no approval round's;
// another caller, other arguments, another kind of request, a second use
// or an expired state are refused (ErrBadRequestState).
func TestRelayState(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC).UnixNano())
	f := newFixture(t, time.Minute, keyed(t, &Options{Now: func() time.Time { return time.Unix(0, now.Load()) }}))
	c := writeCall("/r")
	st, err := f.gate.RelayState(c, "up-state")
	if err != nil {
		t.Fatal(err)
	}

	if _, err := f.gate.OpenRelayState(t.Context(), st+"-TAMPERED", c); !errors.Is(err, ErrNotRelayState) {
		t.Errorf("tampered: %v, want ErrNotRelayState", err)
	}
	if _, err := f.gate.OpenRequestState(t.Context(), st, c); !errors.Is(err, ErrBadRequestState) {
		t.Errorf("a relayed round's state opened as an approval round's: %v", err)
	}
	held := c
	held.Defer = true
	a := f.gate.Admit(t.Context(), held)
	if !a.Pending {
		t.Fatalf("deferred call %+v, want Pending", a)
	}
	ast, err := f.gate.RequestState(*a.Held)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.gate.OpenRelayState(t.Context(), ast, c); !errors.Is(err, ErrNotRelayState) {
		t.Errorf("an approval round's state opened as a relayed round's: %v", err)
	}

	stranger := c
	stranger.Principal = approval.Principal{ID: "agent-2"}
	prompt := c
	prompt.Kind = approval.KindPromptGet
	for name, other := range map[string]Call{"another caller": stranger, "other arguments": writeCall("/other"), "a prompt": prompt} {
		if _, err := f.gate.OpenRelayState(t.Context(), st, other); !errors.Is(err, ErrBadRequestState) {
			t.Errorf("%s: %v, want ErrBadRequestState", name, err)
		}
	}

	up, err := f.gate.OpenRelayState(t.Context(), st, c)
	if err != nil || up != "up-state" {
		t.Fatalf("OpenRelayState = %q, %v; want the upstream's state", up, err)
	}
	if _, err := f.gate.OpenRelayState(t.Context(), st, c); !errors.Is(err, ErrBadRequestState) {
		t.Errorf("second use: %v, want ErrBadRequestState", err)
	}

	late, err := f.gate.RelayState(c, "")
	if err != nil {
		t.Fatal(err)
	}
	now.Add(int64(RelayStateTTL))
	if _, err := f.gate.OpenRelayState(t.Context(), late, c); !errors.Is(err, ErrBadRequestState) {
		t.Errorf("after RelayStateTTL: %v, want ErrBadRequestState", err)
	}
}
