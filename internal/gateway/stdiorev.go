package gateway

import (
	"encoding/json"

	"toolgate/internal/mcpwire"
)

// The revision of a stdio session as its fronts see it (branch stdio43).
// A 2026-07-28 agent sends no initialize: the SDK takes the session's
// revision from the _meta of the first request that carries one
// (go-sdk v1.8.0, ServerSession.handle), and keeps it. The SDK handles a
// line after the stdin guard read it, so the guard, reading ahead, cannot
// ask the SDK's session about the lines before the SDK handled them: a
// request without _meta read right after the first 2026-07-28 request
// would be taken for one of a session of no revision, while the SDK serves
// it as one of a 2026-07-28 session. revisionModern therefore notes the
// revision itself, in the order the agent sent its lines, until the SDK's
// session has one.

// revisionModern reports whether the session's revision is 2026-07-28 or
// later once the SDK handled line, a message with method (checkMethod),
// and the lines before it: whether the SDK's session is of that revision
// now (sessionModern), or this line or an earlier one is a request or
// notification the SDK may take a revision from whose _meta names
// 2026-07-28 or later. The SDK's session may change its revision after it
// has one: server/discover sets it whenever it names 2026-07-28 (go-sdk
// v1.8.0, Server.discover), so a line noted as such counts even once the
// SDK's session has a revision (branch attack44); once it has one, only
// server/discover lines are decoded for it. It errs towards 2026-07-28
// (an earlier initialize the SDK has not handled yet, a version the SDK
// refuses), which only ever refuses more (taskTaken) and leaves plain
// calls to the SDK path (stdioLean.call), never runs more. Only the stdin
// guard calls it, one line at a time.
func (l *stdioLean) revisionModern(line, method []byte) bool {
	ss := l.ss.Load()
	if ss != nil && ss.InitializeParams() != nil && string(method) != "server/discover" {
		// The SDK's session has a revision, which only server/discover
		// changes: no need to decode the line (the lean front's calls).
		return l.modern || sessionModern(ss)
	}
	if !l.modern && takesRevision(method) && lineVersion(line) >= modernVersion {
		l.modern = true
	}
	return l.modern || sessionModern(ss)
}

// takesRevision reports whether the SDK takes the session's revision from
// the _meta of a message with method: not from a response, nor from the
// methods 2026-07-28 removed (go-sdk v1.8.0, ServerSession.handle);
// server/discover's handler takes it (Server.discover).
func takesRevision(method []byte) bool {
	switch string(method) {
	case "", "initialize", "ping", "notifications/initialized", "notifications/roots/list_changed",
		"logging/setLevel", "resources/subscribe", "resources/unsubscribe":
		return false
	}
	return true
}

// lineVersion is the protocol version in the _meta of the message line
// ("" when it names none or the line does not decode), read as the SDK
// reads it (go-sdk v1.8.0, DecodeMessage and extractRequestMeta): members
// by their exact keys, the last of two params, two _meta objects of the
// params merged (a null one clears them), the version only when it is a
// string. encoding/json's struct decode folds case ("Params", "_META"),
// which read a version the SDK does not, or missed the one it reads
// (branch attack44).
func lineVersion(line []byte) string {
	var params json.RawMessage
	if !eachMember(line, func(k string, v json.RawMessage) bool {
		if k == "params" {
			params = v
		}
		return true
	}) {
		return ""
	}
	var meta map[string]json.RawMessage
	failed := false
	eachMember(params, func(k string, v json.RawMessage) bool {
		if k == "_meta" && json.Unmarshal(v, &meta) != nil {
			failed = true // the SDK reads no _meta from params it cannot decode
			return false
		}
		return true
	})
	var v string
	if failed || json.Unmarshal(meta[mcpwire.MetaProtocolVersion], &v) != nil {
		return ""
	}
	return v
}
