package gateway

// The lean front's cancels: a notifications/cancelled POST naming a call
// the lean front is serving (cancelLean), the cheap look at every session
// POST that decides whether a body may be one (maybeCancel), and the id
// it names (cancelledID, canonicalID). Moved out of leanfront.go, unchanged.

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"toolgate/internal/approval"
)

// canonicalID is a JSON-RPC id as a map key: equal for ids the SDK takes
// as equal (1 and 1.0 are not sent by clients; classifyID refuses them).
func canonicalID(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return "s:" + s
		}
	}
	if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		// One allocation, the key's (FormatInt's string and the
		// concatenation were two for ids past 99).
		var buf [24]byte
		return string(strconv.AppendInt(append(buf[:0], "n:"...), n, 10))
	}
	return "x:" + string(raw)
}

// cancelLean serves a notifications/cancelled POST naming a lean call of
// session s: it cancels the call (context.Canceled, as the SDK does) and
// answers 202. It reports false for anything else (the body, if read,
// stays in lb for the next reader), and for a cancel that also carries an
// id, which it cancels the call on and leaves to the SDK to answer, as the
// SDK's canceller does. Every body is read, whatever its length or
// framing, as the SDK reads it: on 70feee3f one sent chunked or longer
// than 4096 bytes, or one with an id, went to the SDK, which does not know
// the lean call, and the call ran on (branch attack44b).
func (f *httpFront) cancelLean(w http.ResponseWriter, lb *leanBody, p approval.Principal, s *leanSession) bool {
	if s.principal != p.ID {
		return false
	}
	body, err := lb.get()
	if err != nil || !maybeCancel(body) {
		return false
	}
	key, call, ok := cancelledID(body)
	if !ok || !s.cancel(key, context.Canceled) || call {
		return false
	}
	w.WriteHeader(http.StatusAccepted)
	return true
}

// maybeCancel reports whether body may be a notifications/cancelled
// (cancelledID reads it then): it spells the method plainly, or its last
// top-level "method" member (as the SDK reads it: the key's escapes
// decoded) is a string with escapes ("notifications\/cancelled") that
// decodes to it, or body is not an object the scanner reads (then
// cancelledID decides). A call whose arguments hold a backslash (text with
// "\n", a Windows path) was decoded whole by cancelledID's json.Decoder on
// every POST before the lean front read it; now its members are walked
// once without an allocation (BenchmarkMaybeCancel, branch attack45).
func maybeCancel(body []byte) bool {
	if bytes.Contains(body, []byte(`notifications/cancelled`)) {
		return true
	}
	if bytes.IndexByte(body, '\\') < 0 {
		return false
	}
	var method []byte
	top := scanMembers(body, 0, true)
	for {
		k, esc, v, more := top.next()
		if !more {
			break
		}
		if esc {
			if ks, ok := keyString(k, esc); !ok || ks == "method" {
				method = v
			}
		} else if string(k[1:len(k)-1]) == "method" {
			method = v
		}
	}
	if top.bad || bytes.IndexByte(method, '\\') >= 0 {
		return true
	}
	return false // no method, or one spelled plainly: not the cancel
}

// cancelledID reads body, one JSON-RPC message, as the SDK's canceller
// reads a notifications/cancelled (go-sdk v1.8.0, canceller.Preempt):
// members by their exact keys, the last of two winning, the method's
// escapes decoded, a numeric requestId as a float64 made an integer
// (2.0 is 2). ok: the SDK cancels the request whose canonicalID is key on
// it. call: body carries an id (not null), so the SDK answers it as well
// (its canceller cancels whatever the id). encoding/json's struct decode
// folded "ID", "Method", "PARAMS" or "RequestId" into the members read
// and refused a null id or requestId 2.0, so a cancel the SDK reads did
// not reach a lean call, or named another (branch attack44).
func cancelledID(body []byte) (key string, call, ok bool) {
	var id, method, params, requestID json.RawMessage
	if !eachMember(body, func(k string, v json.RawMessage) bool {
		switch k {
		case "id":
			id = v
		case "method":
			method = v
		case "params":
			params = v
		}
		return true
	}) {
		return "", false, false
	}
	var name string
	if json.Unmarshal(method, &name) != nil || name != "notifications/cancelled" {
		return "", false, false
	}
	eachMember(params, func(k string, v json.RawMessage) bool {
		if k == "requestId" {
			requestID = v
		}
		return true
	})
	var rid any
	if json.Unmarshal(requestID, &rid) != nil || !exactRequestID(requestID) {
		// One that names another request than the SDK would cancel
		// (exactRequestID) is refused whole (checkMessage).
		return "", false, false
	}
	switch v := rid.(type) {
	case string:
		key = "s:" + v
	case float64:
		key = "n:" + strconv.FormatInt(int64(v), 10)
	default:
		return "", false, false
	}
	return key, classifyID(id) != idNone, true
}
