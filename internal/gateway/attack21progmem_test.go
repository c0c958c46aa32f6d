package gateway

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestProgressQueueHoldsNoMeta (attack21): upstream progress waiting for a
// caller that does not read holds about the bytes relayQueueBytes counts.
// Its _meta, which is never forwarded (forward sends the value, total and
// message), was kept decoded into Go values, about twenty times its wire
// bytes for empty objects: the 1 MiB bound held 20 MiB per call.
func TestProgressQueueHoldsNoMeta(t *testing.T) {
	r := newProgressRoutes(time.Minute, slog.New(slog.DiscardHandler))
	scope := &progressScope{sid: "s"}
	p := queuedRoute(r, "toolgate-1", scope)
	meta := `{"x":[` + strings.Repeat(`{},`, (64<<10)/3) + `{}]}`
	before := heapInUse()
	for i := range 6 { // 384 KiB in all, within the bound
		r.relayWire(scope, json.RawMessage(fmt.Sprintf(`{"_meta":%s,"progressToken":"toolgate-1","progress":%d}`, meta, i+1)))
	}
	held := int64(heapInUse()) - int64(before) //nolint:gosec // heaps' sizes fit
	waiting := len(p.queue)
	if waiting == 0 {
		t.Fatal("no notification waits")
	}
	t.Logf("%d waiting, %d bytes on the wire, %d bytes held", waiting, waiting*len(meta), held)
	if wire := waiting * len(meta); held > 4*int64(wire) {
		t.Errorf("%d notifications of %d bytes on the wire wait holding %d bytes, want at most %d (four times their wire bytes)",
			waiting, wire, held, 4*wire)
	}
	if got := queuedValues(p); len(got) != waiting || got[0] != 1 {
		t.Errorf("queued values %v, want 1, 2, …", got)
	}
}
