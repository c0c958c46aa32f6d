package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
)

// call sends tools/call tool with the raw argument bytes args upstream and
// returns its result with structuredContent and _meta as received. A
// session that expired upstream (HTTP 404; case C03) is re-initialised and
// the call retried once: the 404 means the upstream never processed it.
// JSON-RPC errors from the upstream pass through as *jsonrpc.Error. Every
// other failure is a *callFailure: the upstream is unavailable (an isError
// result naming it), the call timed out (CodeUpstreamTimeout), or the call
// was cancelled; it carries the dispatch outcome.
func (u *upstream) call(ctx context.Context, tool string, args json.RawMessage, prog *callProgress) (*mcp.CallToolResult, error) {
	if ac, err := u.agentConnFor(originFrom(ctx)); err != nil || ac != nil {
		if err != nil {
			return nil, u.unavailable(ctx, tool, u.errText(err)+"; nothing was sent to it", approval.OutcomeTransportError, err)
		}
		return ac.call(ctx, tool, args, prog)
	}
	if o := originFrom(ctx); o != nil && o.modern {
		return u.modernCall(ctx, tool, args, prog)
	}
	c, err := u.session()
	if err != nil {
		return nil, u.unavailable(ctx, tool, u.errText(err)+"; nothing was sent to it", approval.OutcomeTransportError, err)
	}
	res, retry, err := u.callOnce(ctx, c, tool, args, prog)
	if !retry {
		return res, err
	}
	u.log.InfoContext(ctx, "upstream session expired (HTTP 404) or ended before the call was sent; re-initialising and retrying the call once", "tool", tool)
	u.reset(c)
	wctx, cancel := context.WithTimeout(ctx, u.connectTimeout())
	c2, werr := u.awaitReconnect(wctx, c)
	cancel()
	if werr != nil {
		if ctx.Err() != nil {
			// The 404 means the upstream never processed it: nothing ran.
			return nil, &callFailure{msg: "call cancelled", wire: &jsonrpc.Error{Code: CodeUpstreamUnavailable, Message: "call cancelled: " + context.Cause(ctx).Error()},
				outcome: approval.OutcomeTransportError, cause: context.Cause(ctx)}
		}
		return nil, u.unavailable(ctx, tool, "its session expired and re-initialising failed; nothing was run", approval.OutcomeTransportError, werr)
	}
	res, _, err = u.callOnce(ctx, c2, tool, args, prog)
	return res, err
}

// callContext returns the context a tools/call in ctx runs in upstream:
// it ends with cause errCallTimeout after call_timeout and with cause
// ErrShutdown when the gateway closes. done releases it.
func (u *upstream) callContext(ctx context.Context) (cctx context.Context, done func()) {
	cctx, cancelTimeout := ctx, func() {}
	if d := u.cfg.CallTimeout; d > 0 {
		cctx, cancelTimeout = context.WithTimeoutCause(cctx, d, errCallTimeout)
	}
	cctx, cancel := context.WithCancelCause(cctx)
	stop := context.AfterFunc(u.g.root, func() { cancel(ErrShutdown) })
	return cctx, func() {
		stop()
		cancel(nil)
		cancelTimeout()
	}
}

func (u *upstream) callOnce(ctx context.Context, c *upConn, tool string, args json.RawMessage, prog *callProgress) (_ *mcp.CallToolResult, retry bool, _ error) {
	cctx, done := u.callContext(ctx)
	defer done()
	cctx = u.sendingProgress(cctx, c, prog)
	if rawApplies(ctx, c) {
		// Without the SDK: one line out, the answer line back (rawcall.go).
		var token string
		if prog != nil {
			token = prog.upstreamToken
		}
		raw, err := c.raw.call(cctx, tool, args, token, originFrom(ctx))
		if err != nil {
			return nil, false, u.callError(ctx, context.Cause(cctx), c, tool, err)
		}
		res, err := decodeCallResult(raw)
		if err != nil {
			u.log.WarnContext(ctx, "upstream result is not a tools/call result", "tool", tool, "err", err)
			return nil, false, u.notCallResult(ctx, tool, err)
		}
		return res, false, nil
	}
	cctx, s := withSlot(cctx)

	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	params := &mcp.CallToolParams{Name: tool, Arguments: args}
	if prog != nil {
		params.SetProgressToken(prog.upstreamToken)
	}
	if r := relayRoundFrom(ctx); r != nil && c.modernEra() {
		r.apply(params)
	}
	res, err := c.cs.CallTool(cctx, params)
	err = sdkVerdict(c, s, err)
	if raw := s.result(); raw != nil {
		// The SDK decoded the result already unless a number in it failed
		// (1e400): then the raw bytes are decoded again, once.
		var r *mcp.CallToolResult
		var derr error
		if err == nil {
			r, derr = withRawNumbers(res, raw)
		} else {
			r, derr = decodeResult(raw)
		}
		if derr == nil {
			return r, false, nil
		}
		if err != nil {
			// Neither the SDK nor toolgate reads the answer as a
			// tools/call result: a malformed answer, as on the raw paths.
			return nil, false, u.notCallResult(ctx, tool, derr)
		}
		u.log.WarnContext(ctx, "upstream result kept as decoded by the SDK", "tool", tool, "err", derr)
	}
	if err == nil {
		delete(res.Meta, mcp.MetaKeyServerInfo)
		return res, false, nil
	}
	if ctx.Err() == nil && (s.wasSessionMissing() || (cctx.Err() == nil && u.g.root.Err() == nil && endedUnsent(c, s, err))) {
		return nil, true, err
	}
	if s.wasRanStatus() {
		err = fmt.Errorf("%w: %w", errMayHaveReached, err)
	}
	return nil, false, u.callError(ctx, context.Cause(cctx), c, tool, err)
}

// endedUnsent reports whether a tools/call on the HTTP session c failed with
// err because the session had ended before the call's POST went out (as
// when another request met the upstream's 404 first and the SDK closed the
// session): nothing reached the upstream, so upstream.call re-initialises
// and retries it, as for its own 404, instead of saying it may have run.
// (Not on shutdown or after call_timeout: callError reports those.)
func endedUnsent(c *upConn, s *slot, err error) bool {
	return c.hc != nil && !s.wasPosted() && (errors.Is(err, mcp.ErrSessionMissing) || errors.Is(err, mcp.ErrConnectionClosed))
}

// callError turns a failed CallTool into the error the agent gets (see call).
// cause is why the call's own bounds ended it: context.Cause of
// callContext's context, or on the raw stdio path (rawBounds) the call's
// error itself (errCallTimeout, ErrShutdown); nil or anything else when
// neither did.
func (u *upstream) callError(ctx context.Context, cause error, c *upConn, tool string, err error) error {
	if ctx.Err() != nil {
		// The caller went away after the call was sent: it may have run.
		return &callFailure{msg: "call cancelled", wire: &jsonrpc.Error{Code: CodeUpstreamUnavailable, Message: "call cancelled: " + context.Cause(ctx).Error()},
			outcome: approval.OutcomeCancelledAfterDispatch, cause: context.Cause(ctx)}
	}
	switch {
	case errors.Is(cause, errCallTimeout):
		msg := fmt.Sprintf("upstream %q: tool %q: no result within call_timeout %s; the call was cancelled upstream", u.name, tool, u.cfg.CallTimeout)
		return &callFailure{msg: msg, wire: &jsonrpc.Error{Code: CodeUpstreamTimeout, Message: msg}, outcome: approval.OutcomeCancelledAfterDispatch, cause: err}
	case errors.Is(cause, ErrShutdown):
		return u.unavailable(ctx, tool, "the gateway is shutting down; the call was cancelled and may have run", approval.OutcomeCancelledAfterDispatch, err)
	}
	// A stdio child that did not read its stdin by the call's bound
	// (boundedwrite.go; on the SDK path the error also wraps the SDK's
	// "rejected by transport", sdkwrite.go, which is not the upstream's).
	switch {
	case errors.Is(err, errLineNotSent):
		return u.unavailable(ctx, tool, fmt.Sprintf("it did not read its stdin within the call's bound (call_timeout %s); the call was not sent and nothing was run", u.cfg.CallTimeout), approval.OutcomeTransportError, err)
	case errors.Is(err, errLinePartlySent):
		return u.unavailable(ctx, tool, fmt.Sprintf("it stopped reading its stdin while the call was being written (call_timeout %s); the rest is sent when it reads again, so the call may still run", u.cfg.CallTimeout), approval.OutcomeTransportError, err)
	}
	// toolgate's own verdicts are Go values set where they were made
	// (verdict.go); a JSON-RPC error with the same code and data is the
	// upstream's own and is relayed as such.
	if v := verdictOf(err); v != nil {
		switch v.kind {
		case verdictRejected:
			// The SDK marks as rejected some failures of a call that
			// may have reached the upstream (httpreached.go): those
			// may have run.
			if !reached(err) {
				// The request never reached the upstream (HTTP: its POST failed).
				u.checkHealth()
				return u.unavailable(ctx, tool, "the call could not be sent to it; nothing was run", approval.OutcomeTransportError, err)
			}
		case verdictBroken:
			return u.brokenAnswerFailure(ctx, tool, v, err)
		case verdictTooLarge:
			return &callFailure{msg: fmt.Sprintf("upstream %q: tool %q: %s", u.name, tool, v.msg), outcome: approval.OutcomeToolError, cause: err}
		}
	} else if wire := (*jsonrpc.Error)(nil); errors.As(err, &wire) {
		return wire // the upstream answered with an error
	}
	if c.proc != nil {
		if xe := c.proc.exitError(u.g.opts.TerminateGrace); xe != nil {
			return u.unavailable(ctx, tool, fmt.Sprintf("its process ended during the call (%v) and is being restarted; the call may have run", xe), approval.OutcomeTransportError, err)
		}
	}
	u.checkHealth()
	return u.unavailable(ctx, tool, "the connection failed during the call; the call may have run", approval.OutcomeTransportError, err)
}

// transportFailure reports whether err says the server could not be
// reached at all (nothing answered), as opposed to a server that answered
// and refused.
func transportFailure(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) || errors.Is(err, syscall.ECONNREFUSED)
}

// notCallResult is the failure of a call of tool whose answer is a
// response but not a tools/call result (err says why): a malformed answer
// (brokenAnswerFailure), on every path. Neither the agent's message nor
// the log carries err's text: encoding/json quotes the bytes it could not
// read, which are the call's result data.
func (u *upstream) notCallResult(ctx context.Context, tool string, err error) *callFailure {
	u.log.WarnContext(ctx, "upstream result is not a tools/call result; the call fails", "tool", tool)
	return u.brokenAnswerFailure(ctx, tool, brokenAnswerError("not a tools/call result"), err)
}
