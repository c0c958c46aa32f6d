package gate

import (
	"fmt"
	"runtime/debug"

	"toolgate/internal/policy"
)

// evalPolicy is g.policy.Evaluate with a panic of the evaluator turned
// into its error, so that the call is denied as for any failed evaluation
// (branch attack14). Evaluations run on the SDK path's tools/call before
// its admission, where nothing recovers (the go-sdk's handler goroutines
// have no recover): a panic there ended the process. Every evaluation
// of the gate goes through it: admission, the lean front's hand-off,
// grants, and the re-evaluation at consume.
func (g *Gate) evalPolicy(pc policy.Call) (dec policy.Decision, err error) {
	defer func() {
		if v := recover(); v != nil {
			g.log.Error("panic in the policy evaluation; denying", "server", pc.Server, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			dec, err = policy.Decision{}, fmt.Errorf("the policy evaluation panicked: %v", v)
		}
	}()
	return g.policy.Evaluate(pc)
}
