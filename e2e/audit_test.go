package e2e

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	_ "modernc.org/sqlite"
)

// auditorToken is the token of a viewer, who may export the audit trail.
const auditorToken = "e2e-auditor-token-51b0"

// auditorYAML continues the approvers list of principalsYAML with an
// auditor (role viewer).
const auditorYAML = `  - id: auditor
    token_env: E2E_AUDITOR_TOKEN
    roles: [viewer]
`

// auditPolicy allows echo_raw, denies big_result and holds progress.
const auditPolicy = `
policy:
  default: deny
  rules:
    - { name: echo is fine, server: t, tools: [echo_raw], effect: allow }
    - { name: no big results, server: t, tools: [big_result], effect: deny }
    - { name: progress needs a yes, server: t, tools: [progress], effect: approve }
`

// exportLine is one line of toolgate audit export.
type exportLine struct {
	Seq      int64           `json:"seq"`
	PrevHash string          `json:"prev_hash"`
	Hash     string          `json:"hash"`
	Record   json.RawMessage `json:"record"`
}

type exportRecord struct {
	Seq           int64  `json:"seq"`
	Type          string `json:"type"`
	Tool          string `json:"tool"`
	Rule          string `json:"rule"`
	ApprovalID    string `json:"approval_id"`
	ArgumentsHash string `json:"arguments_hash"`
	Outcome       string `json:"outcome"`
}

// auditExport runs `toolgate audit export` as a process and decodes its
// lines.
func auditExport(t *testing.T, admin string, args ...string) ([]exportLine, []exportRecord) {
	t.Helper()
	out := mustToolgate(t, admin, auditorToken, append([]string{"audit", "export", "--format", "jsonl"}, args...)...)
	var lines []exportLine
	var recs []exportRecord
	for l := range strings.Lines(out) {
		var el exportLine
		var r exportRecord
		if err := json.Unmarshal([]byte(l), &el); err != nil {
			t.Fatalf("export line %q: %v", l, err)
		}
		if err := json.Unmarshal(el.Record, &r); err != nil {
			t.Fatalf("record %s: %v", el.Record, err)
		}
		lines, recs = append(lines, el), append(recs, r)
	}
	return lines, recs
}

// TestAuditTrail: an allowed, a denied and an approved call each appear in
// `toolgate audit export` (a process, through the admin API), without
// their raw arguments; `toolgate audit verify` accepts the chain, then
// names the sequence number of a link edited in the SQLite file, and of a
// link deleted from the middle.
func TestAuditTrail(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "toolgate.db")
	cfg := gatewayConfig(db, auditorYAML+upstreamServer(filepath.Join(dir, "record.log"))+auditPolicy)
	g := startGateway(t, cfg, map[string]string{"E2E_AUDITOR_TOKEN": auditorToken})
	cs := g.connect(t, nil, nil)

	mustOK(t, await(t, callAsync(t.Context(), cs, &mcp.CallToolParams{Name: "t__echo_raw", Arguments: json.RawMessage(`{"password":"hunter2","n":1}`)})))
	mustIsError(t, await(t, callAsync(t.Context(), cs, &mcp.CallToolParams{Name: "t__big_result", Arguments: json.RawMessage(`{"password":"hunter2"}`)})))
	held := callAsync(t.Context(), cs, &mcp.CallToolParams{Name: "t__progress", Arguments: json.RawMessage(`{"n":0,"password":"hunter2"}`)})
	id := waitPending(t, g.Admin, 1)[0].ID
	mustCLI(t, g.Admin, "approve", id)
	mustOK(t, await(t, held))
	waitState(t, g.Admin, id, "consumed")

	lines, recs := auditExport(t, g.Admin)
	var got []string
	for i, r := range recs {
		got = append(got, r.Type+" "+r.Tool)
		if strings.Contains(string(lines[i].Record), "hunter2") {
			t.Errorf("exported link %d keeps a raw argument: %s", r.Seq, lines[i].Record)
		}
		if i > 0 && lines[i].PrevHash != lines[i-1].Hash {
			t.Errorf("link %d does not link to %d", lines[i].Seq, lines[i-1].Seq)
		}
	}
	want := map[string]bool{"allowed echo_raw": false, "refused big_result": false, "requested progress": false,
		"approved progress": false, "consumed progress": false, "dispatched progress": false}
	for _, g := range got {
		if _, ok := want[g]; ok {
			want[g] = true
		}
	}
	for k, seen := range want {
		if !seen {
			t.Errorf("export lacks %q; it has %q", k, got)
		}
	}
	for _, r := range recs {
		switch {
		case r.Type == "allowed" && r.Rule != "echo is fine", r.Type == "refused" && r.Rule != "no big results":
			t.Errorf("%s record names rule %q", r.Type, r.Rule)
		case r.Type == "dispatched" && (r.ApprovalID != id || r.Outcome != "ok"):
			t.Errorf("dispatched record %+v", r)
		case r.ArgumentsHash == "" && r.Tool != "":
			t.Errorf("%s record without an arguments hash", r.Type)
		}
	}
	// A viewer's since= in the future exports nothing; an approver may not
	// export.
	if l, _ := auditExport(t, g.Admin, "--since", "2999-01-01T00:00:00Z"); len(l) != 0 {
		t.Errorf("export since 2999: %d lines", len(l))
	}
	if r := runToolgate(t, g.Admin, approverToken, "audit", "export"); r.Code != 1 || !strings.Contains(r.Stderr, "403") {
		t.Errorf("approver export: exit %d, stderr %s", r.Code, r.Stderr)
	}

	cfgPath := filepath.Join(g.Dir, "toolgate.yaml")
	verify := func() cliResult { return runToolgate(t, "", "", "audit", "verify", "--config", cfgPath) }
	if r := verify(); r.Code != 0 || !strings.Contains(r.Stdout, "ok: ") || !strings.Contains(r.Stdout, lines[len(lines)-1].Hash) {
		t.Fatalf("verify of the untouched chain: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}

	raw, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	// The refused call's link, found by its type: the chain's order of the
	// queued call records and the store's events is not fixed by the
	// calls' order (a CI run had the second link not the refused one, so
	// the edit below changed nothing and verify rightly passed).
	ri := slices.IndexFunc(recs, func(r exportRecord) bool { return r.Type == "refused" })
	if ri < 0 {
		t.Fatalf("no refused record in the export: %q", got)
	}
	edited := lines[ri].Seq
	if _, err := raw.Exec(`UPDATE audit_log SET record = replace(record, '"refused"', '"allowed"') WHERE seq = ?`, edited); err != nil {
		t.Fatal(err)
	}
	if r := verify(); r.Code != 1 || !strings.Contains(r.Stderr, "broken at sequence "+itoa(edited)+":") {
		t.Fatalf("verify after editing link %d: exit %d\n%s%s", edited, r.Code, r.Stdout, r.Stderr)
	}
	// Put it back, then delete a link in the middle.
	if _, err := raw.Exec(`UPDATE audit_log SET record = ? WHERE seq = ?`, string(lines[ri].Record), edited); err != nil {
		t.Fatal(err)
	}
	if r := verify(); r.Code != 0 {
		t.Fatalf("verify after restoring link %d: exit %d\n%s", edited, r.Code, r.Stderr)
	}
	deleted := lines[len(lines)/2].Seq
	if _, err := raw.Exec(`DELETE FROM audit_log WHERE seq = ?`, deleted); err != nil {
		t.Fatal(err)
	}
	if r := verify(); r.Code != 1 || !strings.Contains(r.Stderr, "broken at sequence "+itoa(deleted)+": link "+itoa(deleted)+" is missing") {
		t.Fatalf("verify after deleting link %d: exit %d\n%s%s", deleted, r.Code, r.Stdout, r.Stderr)
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// TestAuditTwoInstancesPostgres: two gateways on one Postgres, each
// allowing, refusing and holding calls (held ones approved through the
// other instance), append to one chain: the export from either has every
// call once, in one unbroken chain, and `toolgate audit verify` (a
// process reading the database) accepts it.
func TestAuditTwoInstancesPostgres(t *testing.T) {
	dsn := freshPGDatabase(t, pgTestDSN(t))
	dir := t.TempDir()
	body := auditorYAML + upstreamServer(filepath.Join(dir, "record.log")) + auditPolicy
	env := map[string]string{"DATABASE_URL": dsn, "E2E_AUDITOR_TOKEN": auditorToken}
	gws := []*gw{startGateway(t, pgGatewayConfig(body), env), startGateway(t, pgGatewayConfig(body), env)}
	sessions := []*mcp.ClientSession{gws[0].connect(t, nil, nil), gws[1].connect(t, nil, nil)}

	const rounds = 6
	var wg sync.WaitGroup
	var ids sync.Map
	for i := range 2 {
		wg.Go(func() {
			for n := range rounds {
				args := fmt.Sprintf(`{"instance":%d,"n":%d}`, i, n)
				if r := await(t, callAsync(t.Context(), sessions[i], toolCall("t__echo_raw", args))); r.err != nil || r.res.IsError {
					t.Errorf("allowed call %s: %v %+v", args, r.err, r.res)
				}
				if r := await(t, callAsync(t.Context(), sessions[i], toolCall("t__big_result", args))); r.err != nil || !r.res.IsError {
					t.Errorf("denied call %s: %v %+v", args, r.err, r.res)
				}
			}
		})
	}
	for i := range rounds {
		args := fmt.Sprintf(`{"held":%d}`, i)
		ch := callAsync(t.Context(), sessions[i%2], toolCall("t__progress", args))
		p := awaitPendingArgs(t, gws[i%2].Admin, args)
		mustReview(t, gws[(i+1)%2].Admin, p.ID, "approve", "")
		mustOK(t, await(t, ch))
		ids.Store(p.ID, true)
	}
	wg.Wait()
	// The dispatch outcome is recorded after the result is sent: wait for it.
	ids.Range(func(id, _ any) bool { waitState(t, gws[0].Admin, id.(string), "consumed"); return true })
	// Each export chains what its instance has queued first. The chain
	// follows Postgres's change feed, which shows an event once every
	// older transaction on the server has ended (other tests share it):
	// export until the last events are there (or give up after waitFor).
	auditExport(t, gws[0].Admin)
	var (
		lines []exportLine
		recs  []exportRecord
		count map[string]int
	)
	for deadline := time.Now().Add(waitFor(t)); ; {
		lines, recs = auditExport(t, gws[1].Admin)
		count = map[string]int{}
		for _, r := range recs {
			count[r.Type]++
		}
		if count["dispatched"] >= rounds && count["allowed"] >= 2*rounds || time.Now().After(deadline) {
			break
		}
	}
	events := map[int64]bool{}
	for i, r := range recs {
		if r.Seq != int64(i+1) || (i > 0 && lines[i].PrevHash != lines[i-1].Hash) {
			t.Errorf("link %d (at %d) does not follow link %d", r.Seq, i, i)
		}
	}
	for _, l := range lines {
		var ev struct {
			EventSeq int64 `json:"event_seq"`
		}
		_ = json.Unmarshal(l.Record, &ev)
		if ev.EventSeq != 0 {
			if events[ev.EventSeq] {
				t.Errorf("event %d chained twice", ev.EventSeq)
			}
			events[ev.EventSeq] = true
		}
	}
	if count["allowed"] != 2*rounds || count["refused"] != 2*rounds || count["requested"] != rounds || count["dispatched"] != rounds {
		t.Errorf("export counts %v, want %d allowed and refused, %d requested and dispatched", count, 2*rounds, rounds)
	}
	cfg := filepath.Join(gws[0].Dir, "toolgate.yaml")
	r := runToolgateEnv(t, map[string]string{"DATABASE_URL": dsn}, "audit", "verify", "--config", cfg)
	if r.Code != 0 || !strings.Contains(r.Stdout, fmt.Sprintf("ok: %d links", len(lines))) {
		t.Fatalf("verify: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}
