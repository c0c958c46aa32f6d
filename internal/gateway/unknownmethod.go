package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// knownMethods are the methods a POST may carry to the SDK path: those
// the go-sdk's server serves (v1.8.0, its serverMethodInfos). The task
// methods (taskMethods) are served by the gateway itself on a 2026-07-28
// request when tasks are on (tasks.go). The SDK answers any other method with a 400 text/plain (404 application/json for a
// 2026-07-28 request) quoting the method name; refuseUnknownMethod
// answers it first. A method missing here is refused although the SDK
// would serve it: TestKnownMethodsAreTheSDKs compares the set with the
// keys of serverMethodInfos in the source of the SDK version go.mod names
// (an SDK upgrade that adds or drops a method fails it), and
// TestUnknownMethodNotQuoted sends each one to the SDK.
var knownMethods = map[string]bool{
	"initialize": true, "ping": true, "server/discover": true,
	"tools/list": true, "tools/call": true,
	"prompts/list": true, "prompts/get": true, "completion/complete": true,
	"resources/list": true, "resources/templates/list": true, "resources/read": true,
	"resources/subscribe": true, "resources/unsubscribe": true, "subscriptions/listen": true,
	"logging/setLevel":          true,
	"notifications/initialized": true, "notifications/cancelled": true,
	"notifications/progress": true, "notifications/roots/list_changed": true,
}

// taskMethods are the methods the gateway serves on a 2026-07-28 request
// when tasks are on ([Gateway.taskRequest]).
var taskMethods = map[string]bool{"tasks/get": true, "tasks/cancel": true, "tasks/update": true}

// refuseUnknownMethod answers the POST body about to go to the SDK path
// when it is one message whose method no one serves (knownMethods, and
// taskMethods when tasks is set) with
// a JSON-RPC error -32601 "Method not found" (application/json) that does
// not quote the method: the SDK's own answer quoted it in text/plain
// ("JSON RPC not handled: \"<method>\" unsupported"). The status is the
// SDK's: 404 for a 2026-07-28 request (modern), else 400; the id is the
// request's (null for a notification). version is the request's
// Mcp-Protocol-Version header: where it allows batches (batchesAllowed),
// a batch with such a message is refused as a whole, as the SDK refuses
// it, with the same error, 400 and id null (2025-03-26: a POST the server
// cannot accept gets an HTTP error status, its body a JSON-RPC error
// without an id). Any other body (a batch where batches are refused, a
// response, malformed) is left to the checks before and to the SDK. It
// reports whether it answered.
func refuseUnknownMethod(w http.ResponseWriter, body []byte, version string, modern, tasks bool) bool {
	unknown := func(m map[string]json.RawMessage) bool {
		var method *string
		return json.Unmarshal(m["method"], &method) == nil && method != nil && !knownMethods[*method] && (!tasks || !taskMethods[*method])
	}
	if b := bytes.TrimLeft(body, " \t\r\n"); len(b) > 0 && b[0] == '[' {
		var batch []map[string]json.RawMessage
		if !batchesAllowed(version) || json.Unmarshal(b, &batch) != nil || !slices.ContainsFunc(batch, unknown) {
			return false
		}
		writeRPCError(w, http.StatusBadRequest, nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "Method not found"})
		return true
	}
	// Members by their exact names, as the SDK reads them: a struct's
	// fields would also take "Method" or "METHOD" (attack34).
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil || !unknown(m) {
		return false
	}
	id, hasID := m["id"]
	status := http.StatusBadRequest
	if modern && hasID {
		status = http.StatusNotFound
	}
	writeRPCError(w, status, id, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "Method not found"})
	return true
}

// batchesAllowed reports whether the SDK takes a JSON-RPC batch on a POST
// whose Mcp-Protocol-Version header is version (none: 2025-03-26, as the
// SDK assumes): revisions before 2025-06-18, which removed batching.
func batchesAllowed(version string) bool {
	return version < "2025-06-18"
}
