package gateway

import (
	"bytes"
	"encoding/json"
	"strings"

	"toolgate/internal/mcpwire"
)

// Keys that differ only in case (branch attack43b). The SDK reads a
// message's members by their exact keys (go-sdk v1.8.0's internal/json
// turns off encoding's case-insensitive match); the Tasks front's decodes
// (mcpwire.DecodeRequest, ParseMeta, taskRPC's params) are encoding/json's,
// which matches "Method", "ID", "NAME" or "_META" to method, id, name and
// _meta, the last of two winning. A message carrying such a key would be
// read one way by the front and another by the SDK: a line the SDK reads
// as tasks/get ran a tool as a task, an answer went out under an id the
// SDK does not read, a call of a tool that runs only as a task ran without
// the Tasks extension. The front refuses such a message (foldedKey,
// taskTaken) instead of guessing which reading is meant. Other lines keep
// passing the stdin guard (checkMessage: the SDK ignores such a key; the
// lean front's scanner leaves a line with one to the SDK).

// The member names the Tasks front reads, by level.
var (
	rpcMemberNames    = []string{"jsonrpc", "id", "method", "params", "result", "error"}
	taskParamsNames   = []string{"name", "arguments", "_meta", "taskId", "inputResponses"}
	clientCapsNames   = []string{"roots", "sampling", "elicitation", "extensions"}
	capsSubfieldNames = []string{"tools", "form", "url"}
)

// foldedName is the first of names that key is not but that encoding/json
// would match it to (strings.EqualFold: Unicode simple folding, as the
// decode folds), "" when none.
func foldedName(key string, names []string) string {
	for _, n := range names {
		if key != n && strings.EqualFold(key, n) {
			return n
		}
	}
	return ""
}

// eachMember calls fn with each member of the JSON object raw in order,
// its key unescaped, a key that occurs twice once for each occurrence,
// until fn returns false. It reports false when raw is no JSON object
// (nothing, null, another value, or invalid JSON).
func eachMember(raw json.RawMessage, fn func(key string, val json.RawMessage) bool) bool {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	for dec.More() {
		t, err := dec.Token()
		key, isKey := t.(string)
		var val json.RawMessage
		if err != nil || !isKey || dec.Decode(&val) != nil {
			return false
		}
		if !fn(key, val) {
			return true
		}
	}
	return true
}

// foldedIn reports a key of the JSON object raw that names does not hold
// but that encoding/json would match to one of them (foldedName), and the
// name. Where the key is one of into's, into also looks at its value: at
// every copy of it when a key is given twice (both decoders merge two
// objects given for one member, so a folded key in the first copy is read
// as well). Without a repeated key (memberCount) raw is decoded once.
func foldedIn(raw json.RawMessage, names []string, into func(key string, val json.RawMessage) (string, string)) (key, name string) {
	visit := func(k string, v json.RawMessage) bool {
		if n := foldedName(k, names); n != "" {
			key, name = k, n
			return false
		}
		if into != nil {
			key, name = into(k, v)
		}
		return key == ""
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return "", ""
	}
	if memberCount(raw) != len(m) {
		eachMember(raw, visit)
		return key, name
	}
	for k, v := range m {
		if !visit(k, v) {
			break
		}
	}
	return key, name
}

// memberCount is the number of members of raw, valid JSON, when it is an
// object (a key given twice counts twice): the colons at its top level.
func memberCount(raw []byte) int {
	n, depth := 0, 0
	inString, escaped := false, false
	for _, c := range raw {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		case ':':
			if depth == 1 {
				n++
			}
		}
	}
	return n
}

// foldedKey reports a key of the message body, of its params, of their
// _meta's client capabilities or of those capabilities' sampling and
// elicitation that differs only in case from a member the Tasks front
// reads there: the refusal to answer it with (invalid request; nil when
// there is none). Every copy of a repeated params, _meta, capabilities,
// sampling or elicitation is looked at (branch attack44).
func foldedKey(body []byte) *mcpwire.Error {
	subfields := func(k string, v json.RawMessage) (string, string) {
		if k == "sampling" || k == "elicitation" {
			return foldedIn(v, capsSubfieldNames, nil)
		}
		return "", ""
	}
	caps := func(k string, v json.RawMessage) (string, string) {
		if k == mcpwire.MetaClientCapabilities {
			return foldedIn(v, clientCapsNames, subfields)
		}
		return "", ""
	}
	meta := func(k string, v json.RawMessage) (string, string) {
		if k == "_meta" {
			return foldedIn(v, nil, caps)
		}
		return "", ""
	}
	params := func(k string, v json.RawMessage) (string, string) {
		if k == "params" {
			return foldedIn(v, taskParamsNames, meta)
		}
		return "", ""
	}
	k, n := foldedIn(body, rpcMemberNames, params)
	if k == "" {
		return nil
	}
	return mcpwire.Errorf(mcpwire.CodeInvalidRequest, "invalid request: the member %q differs from %q only in case (members are read by their exact keys)", k, n)
}

// exactID is the id member of body read by its exact key, as the SDK
// reads it; nil when it has none toolgate answers under (classifyID).
func exactID(body []byte) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil || classifyID(m["id"]) != idOK {
		return nil
	}
	return m["id"]
}
