package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
)

// codeRejected is the code of the go-sdk's "rejected by transport" error: the
// request never reached the upstream (for HTTP, its POST failed).
const codeRejected = -32005

// rejectedMessage is the message of that error (the go-sdk's, and
// rawhttpcall.go's rejected).
const rejectedMessage = "rejected by transport"

// A callFailure is a dispatched call that got no answer from the upstream,
// or one the gateway refused to pass on. The agent gets an isError result
// with msg, which names the upstream (or, when wire is set, that JSON-RPC
// error); the dispatch outcome is recorded as outcome. cause is only logged.
type callFailure struct {
	msg     string
	wire    *jsonrpc.Error
	outcome approval.Outcome
	cause   error
}

func (f *callFailure) Error() string { return f.msg }
func (f *callFailure) Unwrap() error { return f.cause }

// result is what the agent gets for f: an isError result or a JSON-RPC error.
func (f *callFailure) result() (*mcp.CallToolResult, error) {
	if f.wire != nil {
		return nil, f.wire
	}
	return errorResult(f.msg), nil
}

// unavailable is the failure of a call that could not reach u, or lost it:
// the message names the upstream, says "unavailable" and what happened to
// the call (what). what often quotes the connect error, which names the
// URL and may quote the upstream: the configured URL's query and user info
// are removed from it, and it is escaped and cut to 2 KiB by clipText
// (callers put an upstream's words in it through errText, 1 KiB).
// The cause is logged at debug level only (errText): the change of
// the upstream's state is logged once (health.go), not per call.
func (u *upstream) unavailable(ctx context.Context, tool, what string, outcome approval.Outcome, cause error) *callFailure {
	u.log.DebugContext(ctx, "call failed: upstream unavailable", "tool", tool, "err", u.errText(cause))
	return &callFailure{
		msg:     fmt.Sprintf("upstream %q is unavailable: %s", u.name, clipText(u.redact(what), 2*maxListErrBytes)),
		outcome: outcome,
		cause:   cause,
	}
}

// unopened is the failure of a call whose upstream session could not be
// opened, so nothing was sent (what says which session and that). While
// the gateway closes (Close refuses new sessions and cuts a dial short)
// that is why, and the agent is told so rather than what. The outcome is
// transport_error either way: nothing was sent.
func (u *upstream) unopened(ctx context.Context, tool, what string, err error) *callFailure {
	if errors.Is(err, ErrShutdown) || u.g.root.Err() != nil {
		what = "the gateway is shutting down; the call was not sent and nothing was run"
	}
	return u.unavailable(ctx, tool, what, approval.OutcomeTransportError, err)
}

// dispatched turns what u.call returned into what the tool handler returns,
// and records in d the dispatch outcome when the error decides it.
func dispatched(d *dispatch, res *mcp.CallToolResult, err error) (*mcp.CallToolResult, error) {
	var f *callFailure
	if errors.As(err, &f) {
		d.outcome = f.outcome
		return f.result()
	}
	var wire *jsonrpc.Error
	if errors.As(err, &wire) {
		d.outcome = approval.OutcomeToolError // the upstream answered with an error
	}
	return res, err
}

// toolgateErrorData is the data of the JSON-RPC error the gateway puts in
// place of an upstream result over the size limit (resultTooLargeResponse;
// only a carrier: the verdict is marked where it is made, verdict.go).
const toolgateErrorData = `{"toolgate":"result_too_large"}`

// codeResultTooLarge is the code of the error response the gateway puts in
// place of an upstream result over the size limit.
const codeResultTooLarge = -32013

// resultTooLargeResponse is the JSON-RPC error response that replaces an
// upstream response to id of n bytes (n < 0: at least limit+1) over limit.
func resultTooLargeResponse(id json.RawMessage, n int64, limit int) []byte {
	return verdictResponse(id, resultTooLargeError(n, limit))
}

// resultTooLargeError is the verdict on a call whose result (n bytes; n <
// 0: more than limit) is over limit (verdict.go).
func resultTooLargeError(n int64, limit int) *verdictError {
	size := fmt.Sprintf("%d bytes", n)
	if n < 0 {
		size = fmt.Sprintf("more than %d bytes", limit)
	}
	msg := fmt.Sprintf("the result (%s) exceeds limits.max_result_bytes (%d bytes) and was discarded; the tool ran", size, limit)
	return &verdictError{kind: verdictTooLarge, msg: msg}
}
