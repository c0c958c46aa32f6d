package gateway

import (
	"context"
	"sync"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
)

// The POSTs in flight, as the calls they carry find them (carrierHeader).

// carrierHeader is the request header by which a call finds the POST that
// carries it. The HTTP front always sets or deletes it, so a client value
// never gets through.
const carrierHeader = "X-Toolgate-Carrier"

// A carrier is one POST in flight, as a call it carries sees it.
type carrier struct {
	ctx       context.Context // the POST's request context; ends when the POST does
	principal approval.Principal
	grace     time.Duration
	hb        *heartbeatWriter // nil for 2026-07-28 requests
	modern    bool             // a 2026-07-28 request: no session, served statelessly
	slot      *sessionSlot     // an initialize's place among the session limits; else nil
	lean      *leanSessions    // the lean front's session registry; nil when off
	// prior is the gate's hand-off of the call this POST carries, made by
	// the lean front when the gate would hold it (its policy decision).
	prior *gate.HandOff
	// count is the POST's part of Options.Load, which a held call it
	// carries leaves while it waits (heldcount.go).
	count postCount
	// The POST's answer owed at shutdown (answers.go): owed is the
	// gateway's count once a call was bound to the POST, ended that the
	// POST's handler returned. Guarded by owedMu.
	owedMu sync.Mutex
	owed   *answers
	ended  bool
}

// carriers is the registry of POSTs in flight, keyed by carrierHeader.
type carriers = registry[carrier]
