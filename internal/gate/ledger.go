package gate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// The result ledger: what a consumed approval's dispatch gave is kept
// (store.LedgerStore), at most Options.ResultMaxBytes of it, for
// Options.ResultTTL, so that the approval's task and a re-send naming it
// get it back instead of the call running again.

// ledgerRecord is what the ledger keeps of d as the result of approval
// id until Options.ResultTTL from now, or nil when d holds nothing.
func (g *Gate) ledgerRecord(id approval.ID, d Recorded) *store.Result {
	return g.ledgerRecordUntil(id, d, g.now().Add(g.opts.ResultTTL))
}

// ledgerRecordUntil is ledgerRecord with the time the ledger forgets it
// (expires). A result larger than ResultMaxBytes is replaced by a stand-in
// that says so and carries its beginning.
func (g *Gate) ledgerRecordUntil(id approval.ID, d Recorded, expires time.Time) *store.Result {
	if d.Result == nil && d.Error == nil {
		return nil
	}
	now := g.now()
	rec := store.Result{RequestID: id, Result: d.Result, Error: d.Error, RecordedAt: now, ExpiresAt: expires}
	if d.Result != nil {
		rec.Size = len(d.Result)
		if rec.Size > g.opts.ResultMaxBytes {
			rec.Result, rec.Truncated = g.standIn(d.Result), true
		}
	} else {
		rec.Size = len(d.Error)
		if rec.Size > g.opts.ResultMaxBytes {
			rec.Error, rec.Truncated = g.errorStandIn(d.Error), true
		}
	}
	return &rec
}

// recordResult keeps rec in the ledger on its own, for a dispatch whose
// outcome could not be recorded with it (recordOutcome); a failure is only
// logged.
func (g *Gate) recordResult(ctx context.Context, rec store.Result) {
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := g.store.PutResult(bg, rec); err != nil && !errors.Is(err, store.ErrAlreadyExists) {
		g.log.ErrorContext(ctx, "cannot record the result of an approved call in the ledger", "approval", rec.RequestID, "err", err)
	}
}

// ledgerMeta is the _meta key of a truncated stand-in.
const ledgerMeta = "toolgate/ledger"

// standIn is what the ledger keeps of a tool result larger than it keeps:
// a CallToolResult with the same isError whose text says so and holds the
// result's first bytes (as JSON text), marked in _meta.
func (g *Gate) standIn(result json.RawMessage) json.RawMessage {
	var orig struct {
		IsError bool `json:"isError"`
	}
	_ = json.Unmarshal(result, &orig)
	keep := g.opts.ResultMaxBytes / 2
	head := prefix(result, keep)
	text := fmt.Sprintf("[toolgate: the result was %d bytes, more than the %d bytes the result ledger keeps (approvals.result_max_bytes); this is its beginning, as JSON]\n%s",
		len(result), g.opts.ResultMaxBytes, head)
	b, err := json.Marshal(map[string]any{
		"content": []map[string]any{{"type": "text", "text": text}},
		"isError": orig.IsError,
		"_meta":   map[string]any{ledgerMeta: map[string]any{"truncated": true, "size": len(result)}},
	})
	if err != nil {
		return json.RawMessage(`{"content":[],"isError":true}`)
	}
	return b
}

// errorStandIn shortens a JSON-RPC error object larger than the ledger
// keeps: its code, and its message cut.
func (g *Gate) errorStandIn(e json.RawMessage) json.RawMessage {
	var orig struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	_ = json.Unmarshal(e, &orig)
	b, _ := json.Marshal(map[string]any{"code": orig.Code, "message": string(prefix([]byte(orig.Message), g.opts.ResultMaxBytes/2)) + " [truncated by toolgate]"})
	return b
}

// prefix returns at most n bytes of b, cut at a UTF-8 boundary.
func prefix(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return b[:n]
}
