package gate

import (
	"context"
	"reflect"
	"testing"

	"toolgate/internal/store"
)

// storeMethods classifies every method of store.Store for changeNoting
// (the gate's store with its own writes noted for the idle sweeper,
// sweepdue.go): noted, a write that changes requests, tasks or ledger
// rows, so that something may be due earlier (changeNoting must note it);
// otherwise why it need not be noted.
var storeMethods = map[string]string{
	// Writes of requests, tasks and ledger rows: noted.
	"CreateRequest":          noted,
	"UpdateRequest":          noted,
	"UpdateRequestWithChain": noted,
	"UpdateRequestReading":   noted,
	"UpdateRequestGranting":  noted,
	"ApplyPolicyApproval":    noted,
	"RecordDispatch":         noted,
	"RecordOutcome":          noted,
	"PutResult":              noted,
	"CreateTask":             noted,
	"SwapTask":               noted,
	"CancelDirectTask":       noted,
	"DropTaskArguments":      noted,
	"UseRequestState":        noted,
	"RevokeSession":          noted, // cancels and invalidates the subtree's requests
	// Writes that make nothing due earlier.
	"RenewLeases":              "renewals only put lease ends later, every Lease/3 while anything is held: noting them would sweep every interval (idle24)",
	"RenewTask":                "a direct task's renewal only puts its lease end later",
	"Prune":                    "deletes: nothing becomes due earlier",
	"PruneLedger":              "deletes: nothing becomes due earlier (the sweeper's own)",
	"DeleteExpiredWebSessions": "web sessions: no request or ledger row",
	"DeleteWebSession":         "web sessions: no request or ledger row",
	"CreateWebSession":         "web sessions: no request or ledger row",
	"CreateSession":            "sessions: no request or ledger row",
	"UpdateSession":            "sessions: no request or ledger row (a stale session-policy request is voided through UpdateRequest)",
	"UpdateSessionWithChain":   "sessions: no request or ledger row",
	"AppendPolicy":             "policy revisions: no request or ledger row",
	"Secret":                   "the gateway key: no request or ledger row",
	"UseGrant":                 "grants: no request or ledger row",
	"RevokeGrant":              "grants: no request or ledger row",
	"Close":                    "not a write",
	// Reads.
	"Chain": read, "CountPending": read, "CountPendingInTree": read, "CurrentPolicy": read, "Due": read,
	"EachLease": read, "EachRequest": read, "Events": read, "Feed": read, "FeedEnd": read, "GetGrant": read, "GetPolicy": read, "GetRequest": read,
	"GetResult": read, "GetSession": read, "GetTask": read, "GetWebSession": read, "GrantUses": read,
	"ListGrants": read, "ListRequests": read, "OpenIdentical": read, "Ping": read, "SessionByToken": read,
	"UnheldApprovedTasks": read, "UsableGrants": read, "ViewRequest": read,
}

const (
	noted = "noted"
	read  = "read"
)

// TestChangeNotingNotesEveryWrite (fixes25): changeNoting embeds
// store.Store, so a write method added to the interface, or left out of
// the wrapper, was passed through silently and woke nothing: the idle
// sweeper then learnt of the gate's own write only through the watch, or
// not at all without one. Every method of store.Store must be classified
// here (a new one fails with its name), and each one classified as a
// write that is noted must be overridden by changeNoting and note the
// change: it is called through a changeNoting over a nil store (the
// override notes in a defer, then the nil store panics; a method passed
// through panics without noting).
func TestChangeNotingNotesEveryWrite(t *testing.T) {
	st := reflect.TypeFor[store.Store]()
	inInterface := map[string]bool{}
	for i := range st.NumMethod() {
		m := st.Method(i)
		inInterface[m.Name] = true
		class, ok := storeMethods[m.Name]
		if !ok {
			t.Errorf("store.Store.%s is not classified in storeMethods: if it writes requests, tasks or ledger rows, changeNoting must note it (sweepdue.go); else say why not", m.Name)
			continue
		}
		if class != noted {
			continue
		}
		due := &sweepDue{}
		cn := reflect.ValueOf(changeNoting{due: due})
		fn := cn.MethodByName(m.Name)
		args := make([]reflect.Value, 0, m.Type.NumIn())
		for j := range m.Type.NumIn() {
			in := m.Type.In(j)
			if m.Type.IsVariadic() && j == m.Type.NumIn()-1 {
				break
			}
			if in == reflect.TypeFor[context.Context]() {
				args = append(args, reflect.ValueOf(context.Background()))
				continue
			}
			args = append(args, reflect.Zero(in))
		}
		func() {
			defer func() { _ = recover() }() // the nil store underneath
			fn.Call(args)
		}()
		if !due.changed.Load() {
			t.Errorf("changeNoting does not note store.Store.%s, a write of requests, tasks or ledger rows: the idle sweeper does not see this gate's own %s", m.Name, m.Name)
		}
	}
	for name := range storeMethods {
		if !inInterface[name] {
			t.Errorf("storeMethods classifies %s, which store.Store no longer has", name)
		}
	}
}
