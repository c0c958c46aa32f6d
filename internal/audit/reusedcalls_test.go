package audit_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"toolgate/internal/approval"
	"toolgate/internal/audit"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
)

// TestFlushReusesNoRecordOfTheLastBatch flushes a batch of three calls,
// then one of a single call with other arguments, no monitor verdict and
// no refusal: Flush keeps its list of call records from one batch to the
// next (alloc49), and the second batch's record must be that call's
// alone, with nothing of the first batch's (chained again, or left in a
// reused slot).
func TestFlushReusesNoRecordOfTheLastBatch(t *testing.T) {
	db := openSQLite(t, filepath.Join(t.TempDir(), "tg.db"))
	tr := audit.New(db, nil)
	yes := true
	pol := testPolicy()
	pol.Rules = append(pol.Rules, policy.Rule{Name: "watch lists", Tools: []string{"list_*"}, Effect: policy.Deny, Monitor: &yes})
	pol.Default = policy.Allow
	g := gate.New(db, pol, &gate.Options{Recorder: tr})
	ctx := t.Context()
	for _, tool := range []string{"list_dir", "delete_file", "list_dir"} {
		g.Admit(ctx, call(tool))
	}
	if err := tr.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	second := gate.Call{Principal: agent, Server: "fs", Tool: "read_file", Arguments: json.RawMessage(`{"path":"/srv/second"}`)}
	if adm := g.Admit(ctx, second); !adm.Allowed {
		t.Fatalf("read_file refused: %s", adm.Message)
	}
	if err := tr.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	recs := records(t, db, "")
	var types []string
	for _, r := range recs {
		types = append(types, r.Type+":"+r.Tool)
	}
	if got, want := strings.Join(types, " "), "allowed:list_dir refused:delete_file allowed:list_dir allowed:read_file"; got != want {
		t.Fatalf("records = %q, want %q", got, want)
	}
	firstHash, _ := approval.Hash(call("x").Arguments)
	secondHash, _ := approval.Hash(second.Arguments)
	for i, r := range recs[:3] {
		if r.ArgumentsHash != firstHash {
			t.Errorf("record %d: hash %s, want the first batch's %s", i, r.ArgumentsHash, firstHash)
		}
	}
	if recs[0].Monitor == nil || recs[0].Monitor.Rule != "watch lists" {
		t.Errorf("first batch's monitored record = %+v", recs[0])
	}
	last := recs[3]
	if last.ArgumentsHash != secondHash || !strings.Contains(string(last.Arguments), "/srv/second") ||
		strings.Contains(string(last.Arguments), "/etc/x") {
		t.Errorf("second batch's record has hash %s (want %s), display %s", last.ArgumentsHash, secondHash, last.Arguments)
	}
	if last.Monitor != nil || last.Reason != "" || last.Rule != "reads" {
		t.Errorf("second batch's record keeps the first batch's: monitor %+v, reason %q, rule %q", last.Monitor, last.Reason, last.Rule)
	}
	res, err := audit.Verify(ctx, db)
	if err != nil || !res.OK || res.Links != 4 {
		t.Fatalf("Verify = %+v, %v", res, err)
	}
}
