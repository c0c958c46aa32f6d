package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
)

// Raw dispatch of lean 2026-07-28 calls (issue 13). A lean 2026-07-28
// call (lean2026.go, held or not, parked or not) goes to the upstream's
// session for such agents (modernconn.go). On a stdio session, and on an
// HTTP one that speaks 2025-11-25, it is sent the raw way
// (upstream.callModernRaw: one stdio line or one HTTP POST, the answer's
// bytes back) instead of through the SDK's CallTool: to a 2025-era session
// as a 2025 agent's call (the relay round means nothing to it:
// relayRound.apply is for 2026 sessions only), to a 2026-era stdio session
// with the _meta CallTool would send. The 2026 answer is written from the
// result's bytes: the JSON writeModernResult makes of the result the SDK
// path decodes (the same members, in the SDK's order, the same _meta with
// toolgate's server info, resultType "complete"). A result that is
// anything but plain (see plainRawResult: inputRequests, requestState, a
// member or a content item the SDK would drop or re-shape) is decoded once
// from the same bytes and answered as the SDK path answers it,
// relayResult included; the call is never sent twice.

// A modernAnswer is the answer to a lean 2026-07-28 call: either result,
// the JSON of a plain upstream result ready to be sent (with toolgate's
// server info, without resultType), or res and err as writeModernResult
// takes them.
type modernAnswer struct {
	result []byte
	res    *mcp.CallToolResult
	err    error
}

// writeModernAnswer writes a to the POST answering id (see
// writeModernResult).
func writeModernAnswer(w http.ResponseWriter, impl *mcp.Implementation, id json.RawMessage, a modernAnswer) {
	if a.result != nil {
		writeModernResultBytes(w, id, a.result, false)
		return
	}
	writeModernResult(w, impl, id, a.res, a.err)
}

// dispatchModernRaw sends the admitted lean 2026-07-28 call d the raw way
// when it applies (see above): ok false means nothing was sent and the
// caller dispatches through upstream.call. Otherwise ans is the answer and
// raw the result as the ledger keeps it (nil when the call failed or was
// answered from a decode); d.outcome is set as dispatched sets it.
func (g *Gateway) dispatchModernRaw(ctx context.Context, u *upstream, d *dispatch) (ans modernAnswer, raw json.RawMessage, ok bool) {
	if r := d.relay; r != nil && (r.responses != nil || r.state != "") {
		return modernAnswer{}, nil, false
	}
	raw, ok, err := u.callModernRaw(withOrigin(ctx, d.origin), d.tool.Tool, d.args, d.relay, d.progress)
	if !ok {
		return modernAnswer{}, nil, false
	}
	if err != nil {
		res, err := dispatched(d, nil, err)
		return modernAnswer{res: res, err: err}, nil, true
	}
	if b, isError, plain := plainRawResultWith(raw, g.impl, g.implJSON); plain {
		d.outcome = approval.OutcomeOK
		if isError {
			d.outcome = approval.OutcomeToolError
		}
		return modernAnswer{result: b}, raw, true
	}
	res, err := decodeRawForModern(raw)
	if err != nil {
		res, err = dispatched(d, nil, u.notCallResult(ctx, d.tool.Tool, err))
		return modernAnswer{res: res, err: err}, nil, true
	}
	res, err = g.relayResult(*d.call, res)
	return modernAnswer{res: res, err: err}, nil, true
}

// callModernRaw is upstream.callRaw for a lean 2026-07-28 call with the
// relay round r (client capabilities only) on u's session for 2026-07-28
// agents (modernconn.go): a 2025-era stdio or HTTP session gets the call
// as a 2025 agent's (the round means nothing to it: relayRound.apply is
// for 2026 sessions only); a 2026-era stdio session gets the _meta the
// SDK's CallTool sends (injectRequestMeta: the session's protocol version,
// toolgate's client info, the agent's capabilities as the round applies
// them). ok is false when neither applies (a 2026-era HTTP session, no
// capabilities in the round) or an HTTP upstream answered 404; then
// nothing was sent and the caller uses upstream.call. The results and
// errors are callRaw's.
//
// prog, when not nil, is the call's progress channel (its route started:
// progressRoutes.start): the call carries its upstream token, as
// callRawProgress sends a 2025 agent's, bound to the session it goes on
// (upstream.sendingProgress), and the upstream's progress is taken off
// the wire (rawcap.go, ssetee.go).
func (u *upstream) callModernRaw(ctx context.Context, tool string, args json.RawMessage, r *relayRound, prog *callProgress) (result json.RawMessage, ok bool, err error) {
	c, err := u.modernSession(ctx)
	if err != nil {
		return nil, true, u.unopened(ctx, tool, "its session for 2026-07-28 agents could not be opened; nothing was sent to it", err)
	}
	rawHTTP, rawStdio := rawHTTPApplies(ctx, c), rawApplies(ctx, c)
	modernStdio := !rawHTTP && !rawStdio && c.raw != nil && c.modernEra() && r != nil && r.caps != nil
	if !rawHTTP && !rawStdio && !modernStdio {
		return nil, false, nil
	}
	var token string
	if prog != nil {
		ctx, token = u.sendingProgress(ctx, c, prog), prog.upstreamToken
	}
	var raw json.RawMessage
	switch {
	case rawHTTP:
		var sent bool
		if raw, sent, err = u.rawHTTPOnce(ctx, c, tool, args, token); !sent {
			return nil, false, nil // 404: upstream.call reconnects and sends it
		}
	case rawStdio:
		raw, err = u.rawOnce(ctx, c, tool, args, token)
	default:
		meta, merr := u.modernMeta(c, r, token)
		if merr != nil {
			return nil, false, nil
		}
		raw, err = u.rawOnceMeta(ctx, c, tool, args, meta)
	}
	return u.rawResult(tool, raw, err)
}

// modernMeta is the _meta of a tools/call of the relay round r on the
// 2026-era session c, as the SDK's CallTool sends it (relayRound.apply,
// then injectRequestMeta): the session's protocol version, toolgate's
// client info (upstream.newClientWith) and the agent's capabilities, and
// the upstream progress token tok unless it is empty (SetProgressToken).
func (u *upstream) modernMeta(c *upConn, r *relayRound, tok string) ([]byte, error) {
	ir := c.cs.InitializeResult()
	if ir == nil {
		return nil, errors.New("the session is not initialised")
	}
	meta := map[string]any{
		mcp.MetaKeyProtocolVersion:    ir.ProtocolVersion,
		mcp.MetaKeyClientInfo:         &mcp.Implementation{Name: "toolgate", Version: u.g.opts.Version},
		mcp.MetaKeyClientCapabilities: r.caps,
	}
	if tok != "" {
		meta[progressTokenKey] = tok
	}
	return json.Marshal(meta)
}

// rawOnceMeta is rawOnce with meta as the call's _meta.
func (u *upstream) rawOnceMeta(ctx context.Context, c *upConn, tool string, args json.RawMessage, meta []byte) (json.RawMessage, error) {
	l, err := rawRequestMeta(rawIDPrefix, tool, args, meta)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid params: " + err.Error()}
	}
	cctx, done := u.callContext(ctx)
	defer done()
	raw, err := c.raw.send(cctx, l.line, originFrom(ctx))
	if err != nil {
		return nil, u.callError(ctx, context.Cause(cctx), c, tool, err)
	}
	return raw, nil
}

// decodeRawForModern decodes the raw result object raw as the SDK path has
// it (callOnce): the SDK's decode, then structuredContent and _meta's values
// from the bytes (withRawNumbers); when the SDK cannot decode it (a number
// no float64 holds), decodeResult.
func decodeRawForModern(raw json.RawMessage) (*mcp.CallToolResult, error) {
	var r mcp.CallToolResult
	if err := json.Unmarshal(raw, &r); err != nil {
		return decodeResult(raw)
	}
	return withRawNumbers(&r, raw)
}

// plainRawResultDecode is plainRawResult by decoding raw with
// encoding/json (maps: exact keys, the last of repeated keys winning) and
// encoding the plain result's members: the answer for what
// scanPlainResult leaves to it.
func plainRawResultDecode(raw json.RawMessage, impl *mcp.Implementation) (b []byte, isError, plain bool) {
	if !utf8.Valid(raw) {
		return nil, false, false
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil {
		return nil, false, false
	}
	var out struct {
		Meta              map[string]any  `json:"_meta,omitempty"`
		Content           json.RawMessage `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
		IsError           bool            `json:"isError,omitempty"`
	}
	for k, v := range top {
		switch k {
		case "content":
			c, ok := plainTextContent(v)
			if !ok {
				return nil, false, false
			}
			out.Content = c
		case "structuredContent":
			if string(v) != "null" {
				out.StructuredContent = v
			}
		case "isError":
			switch string(v) {
			case "true":
				out.IsError = true
			case "false":
			default:
				return nil, false, false
			}
		case "resultType":
			// A 2026-era upstream's: the answer's own is "complete".
			if string(v) != `"complete"` {
				return nil, false, false
			}
		case "_meta":
			if string(v) == "null" {
				continue
			}
			var m map[string]json.RawMessage
			if len(v) == 0 || v[0] != '{' || json.Unmarshal(v, &m) != nil {
				return nil, false, false
			}
			out.Meta = make(map[string]any, len(m)+1)
			for mk, mv := range m {
				out.Meta[mk] = mv
			}
		default:
			return nil, false, false
		}
	}
	if out.Content == nil {
		return nil, false, false
	}
	if impl != nil {
		if out.Meta == nil {
			out.Meta = make(map[string]any, 1)
		}
		// The upstream's own is dropped on the SDK path (callOnce) too.
		out.Meta[mcp.MetaKeyServerInfo] = impl
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, false, false
	}
	return b, out.IsError, true
}

// plainTextContent reports whether v is a JSON list of text items, each
// exactly {"type":"text","text":<string>} as encoding/json reads it (keys
// in any order, escaped or repeated: the last wins, as in the SDK's
// decode), and returns the list as the SDK re-encodes it: each item
// {"type":"text","text":...} once, in that order, a text with a \u
// escape re-encoded (a lone surrogate becomes U+FFFD, as the SDK's decode
// makes it), other texts as they came. Passing the items through as they
// came kept repeated keys (the SDK path resolves them; strict readers
// reject them) and escaped lone surrogates (TestPlainRawResultIsTheSDKPathsJSON).
func plainTextContent(v json.RawMessage) (json.RawMessage, bool) {
	if len(v) == 0 || v[0] != '[' {
		return nil, false
	}
	var items []map[string]json.RawMessage
	if json.Unmarshal(v, &items) != nil {
		return nil, false
	}
	out := make([]byte, 0, len(v)+8)
	out = append(out, '[')
	for i, it := range items {
		if len(it) != 2 || string(it["type"]) != `"text"` {
			return nil, false
		}
		t := it["text"]
		if len(t) == 0 || t[0] != '"' {
			return nil, false
		}
		var ok bool
		if t, ok = textAsSDK(t); !ok {
			return nil, false
		}
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, `{"type":"text","text":`...)
		out = append(out, t...)
		out = append(out, '}')
	}
	return append(out, ']'), true
}

// textAsSDK returns the JSON string t (a text item's "text") as the SDK
// path writes it: as it is unless it holds a \u escape, else decoded and
// re-encoded by encoding/json (escaped lone surrogates and the like
// become what Marshal writes); false when it does not decode.
func textAsSDK(t []byte) ([]byte, bool) {
	if !bytes.Contains(t, []byte(`\u`)) {
		return t, true
	}
	var s string
	if json.Unmarshal(t, &s) != nil {
		return nil, false
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, false
	}
	return b, true
}
