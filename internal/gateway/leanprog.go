package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"sync"
)

// Calls with a progress token on the lean front (issue 13). A plain
// tools/call whose params carry `_meta: {"progressToken": T}` and nothing
// else in _meta is served by the lean front like one without (leanfront.go)
// when the front can give T back exactly as the agent sent it: the agent's
// progress, the keep-alives of a held call and the upstream's progress of
// an allowed one, is written by the front itself on the call's own event
// stream under the bytes of T (the SDK path decodes T into a float64 or a
// string and encodes it again, which gives the same bytes for the tokens
// taken here). Keep-alives come from the gate's one beat (Call.KeepAlive,
// as on the SDK path); the upstream's progress from the progress routes
// (progress.go), fed from the wire by the raw paths. See
// docs/architecture.md, "The lean front".

// leanProgressToken returns the progress token of a tools/call's _meta,
// meta (its bytes as sent), when meta is a JSON object whose only member
// is exactly "progressToken" (no escape in the key, not repeated) and its
// value is one the lean front reproduces exactly as the SDK path would
// send it back: a string of printable ASCII without escapes, or an
// integer in canonical form within ±(2^53−1) (the SDK decodes a number
// token into a float64: a larger one, a fraction or an exponent comes
// back changed, and "-0" as "-0" only by chance of the encoder). ok false
// for anything else, which keeps the call on the SDK path.
func leanProgressToken(meta json.RawMessage) (json.RawMessage, bool) {
	return metaToken(meta, true)
}

// metaToken returns the progress token of _meta bytes meta as
// leanProgressToken takes it; with only false, other members (none with
// an escaped key) may stand beside it (a 2026-07-28 call's: modernToken).
func metaToken(meta json.RawMessage, only bool) (json.RawMessage, bool) {
	ms := scanMembers(meta, 2, false)
	var tok []byte
	for {
		k, esc, v, more := ms.next()
		if !more {
			break
		}
		isTok := string(k) == `"progressToken"`
		if esc || (isTok && tok != nil) || (only && !isTok) {
			return nil, false
		}
		if isTok {
			tok = v
		}
	}
	if ms.bad || tok == nil {
		return nil, false
	}
	return leanTokenValue(tok)
}

// leanTokenValue returns tok, a progress token's value as sent, trimmed,
// when the lean front gives it back exactly as the SDK path would (see
// leanProgressToken); ok false otherwise.
func leanTokenValue(tok []byte) (json.RawMessage, bool) {
	tok = bytes.TrimSpace(tok)
	if len(tok) == 0 {
		return nil, false
	}
	switch c := tok[0]; {
	case c == '"':
		if _, ok := plainString(tok); !ok {
			return nil, false
		}
		for _, b := range tok[1 : len(tok)-1] {
			if b < 0x20 || b == 0x7f {
				return nil, false
			}
		}
	case c == '-' || isDigit(c):
		s := string(tok)
		if s == "-0" || (len(s) > 1 && s[0] == '0') || (len(s) > 2 && s[0] == '-' && s[1] == '0') {
			return nil, false
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n > maxSafeID || n < -maxSafeID || strconv.FormatInt(n, 10) != s {
			return nil, false
		}
	default:
		return nil, false
	}
	return tok, true
}

// leanProgressParams are a notifications/progress message's params, with
// the agent's token as it sent it, encoded as the SDK's
// mcp.ProgressNotificationParams are (members in its order, the same
// omissions; the SDK path drops the upstream's _meta of a forwarded one).
type leanProgressParams struct {
	ProgressToken json.RawMessage `json:"progressToken"`
	Message       string          `json:"message,omitempty"`
	Progress      float64         `json:"progress"`
	Total         float64         `json:"total,omitempty"`
}

// leanProgressMessage is the notifications/progress message to the agent
// as the SDK's jsonrpc2 encodes one (no HTML escaping).
func leanProgressMessage(token json.RawMessage, value, total float64, msg string) ([]byte, error) {
	return marshalWire(struct {
		JSONRPC string             `json:"jsonrpc"`
		Method  string             `json:"method"`
		Params  leanProgressParams `json:"params"`
	}{"2.0", methodProgress, leanProgressParams{ProgressToken: token, Message: msg, Progress: value, Total: total}})
}

// newLeanProgress is the progress channel of a lean call with the agent's
// token tok, writing on w, the call's response. A write that fails means
// the client is gone: gone is called (it cancels the call as the POST's
// end does), and nothing more is written. A write refused because a
// parked stream's response ended (errParkedFinished) is not: nothing more
// is written, and gone is not called.
func newLeanProgress(ctx context.Context, w http.ResponseWriter, tok json.RawMessage, log *slog.Logger, gone func()) *callProgress {
	p := &callProgress{token: tok, ctx: ctx, log: log}
	var failed bool // guarded by p.mu: every send holds it
	p.write = func(value, total float64, msg string) error {
		if failed {
			return errClientWriteFailed
		}
		var err error
		if bp, ok := appendKeepAliveEvent(tok, value, total, msg); ok {
			// a held call's keep-alive, one every 15 s for each of
			// thousands of held calls: framed in a pooled buffer
			err = writeEventErr(w, *bp)
			putEventBuf(bp)
		} else {
			var b []byte
			if b, err = leanProgressMessage(tok, value, total, msg); err != nil {
				return err
			}
			err = writeSSEErr(w, b)
		}
		if err != nil {
			failed = true
			if !errors.Is(err, errParkedFinished) {
				// Not a parked stream whose response ended (a late
				// keep-alive after the answer): the client is still
				// there, serving its next request on the connection.
				gone()
			}
			return err
		}
		return nil
	}
	return p
}

// errClientWriteFailed is what a lean call's progress write returns after
// one failed: the client is gone.
var errClientWriteFailed = errors.New("an earlier write to the client failed")

// writeSSEErr writes data as one "message" event, flushes, and reports
// the first error.
func writeSSEErr(w http.ResponseWriter, data []byte) error {
	b := make([]byte, 0, len(sseMessagePrefix+sseMessageSuffix)+len(data))
	b = append(b, sseMessagePrefix...)
	b = append(b, data...)
	b = append(b, sseMessageSuffix...)
	return writeEventErr(w, b)
}

// writeEventErr writes ev, a framed event, flushes, and reports the first
// error.
func writeEventErr(w http.ResponseWriter, ev []byte) error {
	if _, err := w.Write(ev); err != nil { //nolint:gosec // G705: a JSON-RPC event served as text/event-stream, never HTML
		return err
	}
	return http.NewResponseController(w).Flush()
}

// maxSafeProgress bounds the progress values appendKeepAliveEvent writes
// itself: integers encoding/json writes as their decimal digits.
const maxSafeProgress = 1 << 53

// eventBufs are the buffers appendKeepAliveEvent frames a keep-alive in,
// and writeLeanRaw a call's answer.
var eventBufs = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// maxPooledEvent is the largest event buffer put back into eventBufs.
const maxPooledEvent = 4 << 10

// putEventBuf gives bp, from appendKeepAliveEvent, back to eventBufs.
func putEventBuf(bp *[]byte) {
	if cap(*bp) <= maxPooledEvent {
		*bp = (*bp)[:0]
		eventBufs.Put(bp)
	}
}

// appendKeepAliveEvent frames the notifications/progress message of
// leanProgressMessage(tok, value, total, msg) as one "message" event
// (writeSSEErr's bytes) in a buffer of eventBufs, without encoding/json,
// when the message is a keep-alive's: no total, an integer progress in
// (0, 2^53), a message of printable ASCII (in JSON as it is, but '"' and
// '\' escaped) and a token in ASCII. ok false for any other: the caller
// encodes it.
// TestKeepAliveEventAsMarshalWire holds it to leanProgressMessage's bytes.
func appendKeepAliveEvent(tok json.RawMessage, value, total float64, msg string) (*[]byte, bool) {
	if total != 0 || value <= 0 || value >= maxSafeProgress || value != math.Trunc(value) {
		return nil, false
	}
	for i := range len(msg) {
		if c := msg[i]; c < 0x20 || c > 0x7e {
			return nil, false
		}
	}
	for _, c := range tok { // a token leanTokenValue took, in ASCII
		if c < 0x20 || c > 0x7e {
			return nil, false
		}
	}
	bp, _ := eventBufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	b := append((*bp)[:0], sseMessagePrefix...)
	b = append(b, `{"jsonrpc":"2.0","method":"`+methodProgress+`","params":{"progressToken":`...)
	b = append(b, tok...)
	if msg != "" {
		b = append(b, `,"message":"`...)
		for i := range len(msg) { // the gate's names the rule in quotes
			if c := msg[i]; c == '"' || c == '\\' {
				b = append(b, '\\')
			}
			b = append(b, msg[i])
		}
		b = append(b, '"')
	}
	b = append(b, `,"progress":`...)
	b = strconv.AppendInt(b, int64(value), 10)
	b = append(b, "}}"+sseMessageSuffix...)
	*bp = b
	return bp, true
}
