package gateway

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store/sqlstore"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// holdGate opens a SQLite store and a gate over it that holds every call
// for one human approval (timeout and validity a minute).
func holdGate(t *testing.T) (*sqlstore.DB, *gate.Gate) {
	t.Helper()
	db := sqlitetest.Open(t)
	g := gate.New(db, &policy.Policy{Default: policy.Approve, Approval: policy.Approval{Timeout: time.Minute, Mode: policy.ModeHold, Approvals: 1, ValidFor: time.Minute}},
		&gate.Options{})
	return db, g
}

// approvedRig is a gateway behind holdGate in front of a raw stdio
// upstream "st" (rawStdioServer) and a scriptedUpstream "ht" (JSON
// answers), with an initialized HTTP session of alice. Its call sends a
// tools/call on each of the paths an approved call can take.
type approvedRig struct {
	t        *testing.T
	db       *sqlstore.DB
	g        *gate.Gate
	up       *scriptedUpstream
	base     string
	sid, ver string
}

func newApprovedRig(t *testing.T) *approvedRig {
	t.Helper()
	r := &approvedRig{t: t}
	r.db, r.g = holdGate(t)
	var url string
	r.up, url = newScriptedUpstream(t, true)
	gw := newGateway(t, []ServerConfig{rawStdioServer("st"), {Name: "ht", URL: url}}, r.g, nil)
	waitUpstream(t, gw, "st", nil)
	r.base = serveHTTP(t, gw, nil)
	cs := connectHTTP(t, r.base, aliceToken, nil, nil)
	r.sid, r.ver = cs.ID(), cs.InitializeResult().ProtocolVersion
	waitInitialized(t, gw, r.sid)
	return r
}

// approvedPaths are the paths of call: a 2025 session's call on the lean
// raw path, the same on the SDK path (a progress token and
// sdkPathMetaKey), and a 2026-07-28 request.
var approvedPaths = []string{"2025 lean", "2025 SDK", "2026"}

// call sends a tools/call (JSON-RPC id rid) of tool with args the way
// path says, approves it as carol once it is the only pending request,
// and returns the agent's answer and the request's ID.
func (r *approvedRig) call(path, rid, tool, args string) (string, approval.ID) {
	t := r.t
	t.Helper()
	done := make(chan string, 1)
	go func() {
		var b []byte
		switch path {
		case "2025 lean":
			body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, rid, tool, args)
			_, b = sessionExchange(t, http.MethodPost, r.base, aliceToken, r.sid, r.ver, strings.NewReader(body))
		case "2025 SDK":
			body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{"name":%q,"arguments":%s,"_meta":{"progressToken":%q,%q:true}}}`, rid, tool, args, rid, sdkPathMetaKey)
			_, b = sessionExchange(t, http.MethodPost, r.base, aliceToken, r.sid, r.ver, strings.NewReader(body))
		case "2026":
			_, _, b = modernPost(t, r.base, tool, modernCallBody(`"`+rid+`"`, tool, args, ""), nil)
		default:
			t.Errorf("unknown path %q", path)
		}
		done <- string(b)
	}()
	id := approveOnlyPending(t, r.db, r.g, approval.Principal{ID: "carol", Kind: "human"})
	return <-done, id
}
