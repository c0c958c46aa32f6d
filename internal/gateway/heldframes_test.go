package gateway

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/gate"
)

// framesGatekeeper allows every call through AdmitTo, the in-place
// admission the middleware uses when the Gatekeeper has it, and keeps the
// gateway's functions on the admitting goroutine's stack (innermost
// first): a held call waits in these frames.
type framesGatekeeper struct{ frames chan []string }

func (framesGatekeeper) Admit(context.Context, gate.Call) gate.Admission {
	return gate.Admission{Message: "Admit was used; AdmitTo was not"}
}

func (f framesGatekeeper) AdmitTo(_ context.Context, _ *gate.Call, adm *gate.Admission) {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	var names []string
	for {
		fr, more := frames.Next()
		if name, ok := strings.CutPrefix(fr.Function, "toolgate/internal/gateway."); ok {
			names = append(names, name)
		}
		if !more {
			break
		}
	}
	f.frames <- names
	*adm = gate.Admission{Allowed: true}
}

// A held tools/call waits below admitCall only: the middleware's closure,
// callTool, which builds the call, and admitCounted (which, without
// Options.Load, only calls admitCall) are the gateway's frames above it,
// and the dispatch (answerCall) runs after the wait. The runtime shrinks
// the parked handler goroutine's stack to 8 KiB only while those frames
// stay small (docs/performance.md, "Held calls at scale", step 3).
func TestHeldCallWaitsBelowAdmitCall(t *testing.T) {
	gk := framesGatekeeper{frames: make(chan []string, 1)}
	g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(nil))}}, gk, nil)
	cs := connectHTTP(t, serveHTTP(t, g, nil), aliceToken, nil, nil)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__echo", Arguments: map[string]any{"x": 1}})
	if err != nil || res.IsError {
		t.Fatalf("call: %+v, %v; want the echo", res, err)
	}
	got := <-gk.frames
	// The closure is named middleware.func1, or middleware-fm.(…).middleware.func1
	// when the SDK holds it as a method value.
	want := []string{"(*Gateway).admitCall", "(*Gateway).admitCounted", "(*Gateway).callTool"}
	if len(got) != 4 || !slices.Equal(got[:3], want) || !strings.HasSuffix(got[3], "(*Gateway).middleware.func1") {
		t.Fatalf("the gatekeeper was asked from the gateway's frames %v, want %v and the middleware's closure", got, want)
	}
}
