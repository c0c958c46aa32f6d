package gateway

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/seal"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// TestTaskMethodWithBadMetaSaysSo: a 2026-07-28 POST of tasks/get,
// tasks/cancel or tasks/update whose params._meta is missing or lacks a
// field the revision requires is answered by the Tasks front with -32602
// naming what is missing. Before branch newuser47 it went to the SDK,
// which answered -32601 "JSON RPC not handled: \"tasks/get\" unsupported",
// as if the gateway had no Tasks (a new user's curl sent the task id and
// the Tasks capability but not the protocol version in _meta).
func TestTaskMethodWithBadMetaSaysSo(t *testing.T) {
	db := sqlitetest.Open(t)
	key, err := seal.NewKey(bytes.Repeat([]byte{7}, seal.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	gk := gate.New(db, policy.NewHolder(&policy.Policy{
		Default:  policy.Allow,
		Approval: policy.Approval{Timeout: time.Minute, Mode: policy.ModeHold, Approvals: 1, ValidFor: time.Minute},
	}), &gate.Options{Key: key})
	g := newGateway(t, []ServerConfig{rawStdioServer("up")}, gk, &Options{Tasks: gk})
	waitUpstream(t, g, "up", nil)
	base := serveHTTP(t, g, nil)

	const task = "tgt_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	caps := `"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}`
	for _, c := range []struct{ name, method, meta, want string }{
		{"no _meta", "tasks/get", ``, `missing params._meta`},
		{"no protocol version", "tasks/get", `,"_meta":{` + caps + `}`, `"io.modelcontextprotocol/protocolVersion"`},
		{"no capabilities", "tasks/cancel", `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`, `"io.modelcontextprotocol/clientCapabilities"`},
		{"update, no _meta", "tasks/update", ``, `missing params._meta`},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := `{"jsonrpc":"2.0","id":5,"method":"` + c.method + `","params":{"taskId":"` + task + `"` + c.meta + `}}`
			st, h, b := modernPost(t, base, task, body, map[string]string{"Mcp-Method": c.method})
			_, b = asJSONAnswer(t, h, b)
			got := decodeAnswer(t, b)
			if got.Error == nil || got.Error.Code != -32602 || !strings.Contains(got.Error.Message, c.want) {
				t.Fatalf("%s: %d %s, want -32602 naming %s", c.method, st, b, c.want)
			}
		})
	}
	// With a valid _meta that declares no Tasks, the answer names the
	// extension, as before.
	body := `{"jsonrpc":"2.0","id":6,"method":"tasks/get","params":{"taskId":"` + task + `",` + tasksMeta(false) + `}}`
	_, h, b := modernPost(t, base, task, body, map[string]string{"Mcp-Method": "tasks/get"})
	_, b = asJSONAnswer(t, h, b)
	if got := decodeAnswer(t, b); got.Error == nil || got.Error.Code != -32021 {
		t.Fatalf("tasks/get without the extension: %s, want -32021", b)
	}
}
