package gateway

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// privateCache is the cache hint of every list toolgate answers itself:
// lists differ per principal (policy, agent sessions), so a shared cache
// must not keep them (SEP-2549 cacheScope; ttlMs 0: stale at once).
var privateCache = mcp.Cacheable{CacheScope: "private"}

// markComplete returns res (a prompts/get or resources/read result relayed
// from an upstream) with resultType "complete", which a 2026-07-28 result
// must carry (SEP-2322). The SDK sets it only on results its own handlers
// return, and keeps the field unexported: it is set through the type's
// JSON form. On any failure res is returned as it was.
func markComplete[T any](res *T) *T {
	b, err := json.Marshal(res)
	if err != nil || len(b) < 2 || b[0] != '{' {
		return res
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(b, &fields) != nil {
		return res
	}
	fields["resultType"] = json.RawMessage(`"complete"`)
	if b, err = json.Marshal(fields); err != nil {
		return res
	}
	out := new(T)
	if json.Unmarshal(b, out) != nil {
		return res
	}
	return out
}
