package audit_test

import (
	"path/filepath"
	"strings"
	"testing"

	"toolgate/internal/audit"
	"toolgate/internal/gate"
)

// TestQuorumRefusalIsChainedWithItsCode (quorum49): a call refused
// because its approval's quorum is out of reach is a refused record with
// code quorum_unreachable and the agent's reason (no raw argument), and
// the chain verifies.
func TestQuorumRefusalIsChainedWithItsCode(t *testing.T) {
	db := openSQLite(t, filepath.Join(t.TempDir(), "tg.db"))
	tr := audit.New(db, nil)
	c := call("write_file")
	c.Principal.OnBehalfOf = "alice"
	g := gate.New(db, testPolicy(), &gate.Options{Recorder: tr, Reviewers: []gate.Reviewer{{ID: "alice"}}})
	if adm := g.Admit(t.Context(), c); adm.Allowed || adm.Code != gate.CodeQuorumUnreachable {
		t.Fatalf("admission %+v, want refused with %q", adm, gate.CodeQuorumUnreachable)
	}
	if err := tr.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	recs := records(t, db, "")
	if len(recs) != 1 {
		t.Fatalf("%d records, want the refusal only: %+v", len(recs), recs)
	}
	r := recs[0]
	if r.Type != audit.TypeRefused || r.Code != gate.CodeQuorumUnreachable || r.Rule != "default" || r.OnBehalfOf != "alice" ||
		!strings.Contains(r.Reason, "acting for alice") {
		t.Errorf("record %+v, want a refusal with code %q", r, gate.CodeQuorumUnreachable)
	}
	for _, l := range mustLinks(t, db) {
		if strings.Contains(string(l.Record), "hunter2") {
			t.Errorf("link %d keeps a raw argument: %s", l.Seq, l.Record)
		}
		if !strings.Contains(string(l.Record), `"code":"quorum_unreachable"`) {
			t.Errorf("link %d does not chain the code: %s", l.Seq, l.Record)
		}
	}
	if res, err := audit.Verify(t.Context(), db); err != nil || !res.OK || res.Links != 1 {
		t.Fatalf("Verify = %+v, %v", res, err)
	}
}
