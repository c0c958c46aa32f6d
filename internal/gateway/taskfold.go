package gateway

import (
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

// foldedIn is foldedName for the keys of the JSON object raw (nothing
// when raw is no object): the key and the name it folds to.
func foldedIn(raw json.RawMessage, names []string) (m map[string]json.RawMessage, key, name string) {
	if json.Unmarshal(raw, &m) != nil {
		return nil, "", ""
	}
	for k := range m {
		if n := foldedName(k, names); n != "" {
			return m, k, n
		}
	}
	return m, "", ""
}

// foldedKey reports a key of the message body, of its params, of their
// _meta's client capabilities or of those capabilities' sampling and
// elicitation that differs only in case from a member the Tasks front
// reads there: the refusal to answer it with (invalid request; nil when
// there is none).
func foldedKey(body []byte) *mcpwire.Error {
	top, k, n := foldedIn(body, rpcMemberNames)
	if k == "" {
		var params map[string]json.RawMessage
		params, k, n = foldedIn(top["params"], taskParamsNames)
		if k == "" {
			var meta, caps map[string]json.RawMessage
			_ = json.Unmarshal(params["_meta"], &meta)
			caps, k, n = foldedIn(meta[mcpwire.MetaClientCapabilities], clientCapsNames)
			for _, sub := range []string{"sampling", "elicitation"} {
				if k == "" {
					_, k, n = foldedIn(caps[sub], capsSubfieldNames)
				}
			}
		}
	}
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
