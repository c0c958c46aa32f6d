package gateway

import (
	"encoding/json"
	"fmt"
	"slices"
	"unicode/utf8"
)

// decodeLeanRequest decodes a POST body for the lean front as
// json.Unmarshal into a leanRequest does. The common shape (a tools/call
// with exact keys, plain strings and no extension members) is read by the
// validating scanner (rawscan.go) without a reflective decode; anything
// else goes to json.Unmarshal, so the answer is always the decode's
// (TestScanLeanRequestIsTheDecode, FuzzScanLeanRequest).
func decodeLeanRequest(body []byte) (leanRequest, error) {
	m, _, err := decodeLeanRequestScanned(body)
	return m, err
}

// decodeLeanRequestScanned is decodeLeanRequest, and reports whether the
// scanner read body: then every key of it was exact (none that
// encoding/json folds, where the SDK's decoder does not), which is what a
// _meta the lean front takes needs (leanProgressToken).
//
// A body the scanner does not read is decoded by json.Unmarshal, which
// folds keys ("Name", "nAme" and "NAME" are read as name, "Params" as
// params, the last winning) and merges a repeated params object into the
// first, where the SDK reads exact keys and only the last params (go-sdk
// v1.8.0: the message's params are kept raw, then decoded). Such a body
// (a key of leanTopKeys or leanParamsKeys folded or repeated) is an error
// here, so the lean fronts leave it to the SDK path, which reads it as the
// upstream will receive it: on ca0a3f75 {"name":"read","Name":"write"} ran
// write on the lean front and read on the SDK path (branch attack45).
func decodeLeanRequestScanned(body []byte) (leanRequest, bool, error) {
	if m, ok := scanLeanRequest(body); ok {
		return m, true, nil
	}
	var m leanRequest
	if err := json.Unmarshal(body, &m); err != nil {
		return m, false, err
	}
	if k := leanKeyNotExact(body); k != "" {
		return leanRequest{}, false, fmt.Errorf("the member %q is repeated or read under another name by a decode that folds case", k)
	}
	return m, false, nil
}

// leanKeyNotExact is the first key of body (a JSON object json.Unmarshal
// decoded) or of its params that names a member the lean fronts read
// (leanTopKeys, leanParamsKeys) and is repeated or not exactly its name,
// "" when there is none.
func leanKeyNotExact(body []byte) string {
	return keyNotExact(body, leanTopKeys, func(k string, v json.RawMessage) string {
		if k == "params" {
			return keyNotExact(v, leanParamsKeys, nil)
		}
		return ""
	})
}

// keyNotExact is leanKeyNotExact's look at one object, raw: into is asked
// about each member named exactly one of names.
func keyNotExact(raw json.RawMessage, names []string, into func(k string, v json.RawMessage) string) string {
	var seen [8]bool
	bad := ""
	eachMember(raw, func(k string, v json.RawMessage) bool {
		if foldedName(k, names) != "" {
			bad = k
			return false
		}
		i := slices.Index(names, k)
		if i < 0 {
			return true
		}
		if seen[i] {
			bad = k
			return false
		}
		seen[i] = true
		if into != nil {
			bad = into(k, v)
		}
		return bad == ""
	})
	return bad
}

// The member names of leanRequest and of its params.
var (
	leanTopKeys    = []string{"jsonrpc", "id", "method", "params"}
	leanParamsKeys = []string{"name", "arguments", "_meta", "task", "inputResponses", "requestState"}
)

// scanLeanRequest is json.Unmarshal's leanRequest of body when body is one
// JSON object whose members named jsonrpc, method and params.name are
// strings without escapes or non-ASCII bytes, whose params is an object,
// and which has no key encoding/json would fold to one of leanRequest's,
// no escaped key, no repeated member and no task, inputResponses or
// requestState in params; ok false otherwise (and for invalid JSON).
// Other members are skipped as the decode skips them. It allocates the
// params, copies of id, arguments and _meta (as json.RawMessage's
// UnmarshalJSON copies), and the strings other than "2.0" and
// "tools/call". A _meta is kept as its bytes (the lean front takes one
// that carries only a progress token: leanProgressToken).
func scanLeanRequest(body []byte) (leanRequest, bool) {
	var m leanRequest
	var jsonrpc, id, method, params []byte
	top := scanMembers(body, 0, true)
	for {
		k, esc, v, more := top.next()
		if !more {
			break
		}
		if esc || keyFolds(k, false, leanTopKeys...) {
			return m, false
		}
		var dup bool
		switch string(k[1 : len(k)-1]) {
		case "jsonrpc":
			dup, jsonrpc = jsonrpc != nil, v
		case "id":
			dup, id = id != nil, v
		case "method":
			dup, method = method != nil, v
		case "params":
			dup, params = params != nil, v
		}
		if dup {
			return m, false
		}
	}
	if top.bad || len(params) == 0 || params[0] != '{' {
		return m, false
	}
	var ok bool
	if jsonrpc != nil {
		if m.JSONRPC, ok = plainString(jsonrpc); !ok {
			return m, false
		}
	}
	if method != nil {
		if m.Method, ok = plainString(method); !ok {
			return m, false
		}
	}
	if id != nil {
		m.ID = append(json.RawMessage(nil), id...)
	}
	var name, args, meta []byte
	ps := scanMembers(params, 1, false)
	for {
		k, esc, v, more := ps.next()
		if !more {
			break
		}
		if esc || keyFolds(k, false, leanParamsKeys...) {
			return m, false
		}
		var dup bool
		switch string(k[1 : len(k)-1]) {
		case "name":
			dup, name = name != nil, v
		case "arguments":
			dup, args = args != nil, v
		case "_meta":
			dup, meta = meta != nil, v
		case "task", "inputResponses", "requestState":
			return m, false
		}
		if dup {
			return m, false
		}
	}
	if ps.bad {
		return m, false
	}
	m.Params = new(leanParams)
	if name != nil {
		if m.Params.Name, ok = plainString(name); !ok {
			return m, false
		}
	}
	if args != nil {
		m.Params.Arguments = append(json.RawMessage(nil), args...)
	}
	if meta != nil {
		m.Params.Meta = append(json.RawMessage(nil), meta...)
	}
	return m, true
}

// plainString is the Go string of the JSON string value v (with its
// quotes) when it has no escape and only ASCII bytes (so the decode's
// UTF-8 repair cannot change it); the two strings every call carries are
// not allocated. ok false for any other value.
func plainString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	s := v[1 : len(v)-1]
	for _, c := range s {
		if c == '\\' || c >= utf8.RuneSelf {
			return "", false
		}
	}
	switch string(s) {
	case "2.0":
		return "2.0", true
	case "tools/call":
		return "tools/call", true
	}
	return string(s), true
}
