package policyfile

import (
	"testing"

	"toolgate/internal/config"
	"toolgate/internal/policy"
)

// TestReloadNeverPairsTheNewPolicyWithGrantsStillOn (review51b): a reload
// that turns grants off hands grants.enabled: false over before it puts
// the new policy in force, and one that turns them on hands it over after,
// so the moment between the two always has grants off. The new policy
// with the old grants.enabled: true would let a grant admit a call that
// neither the old config (the rule said grants: false) nor the new one
// (grants off) lets a grant admit. On 89d66645 both were handed over
// after the swap.
func TestReloadNeverPairsTheNewPolicyWithGrantsStillOn(t *testing.T) {
	var f *fixture
	type seen struct {
		enabled  bool
		revision string // of the policy in force when grants were handed over
	}
	var got []seen
	f = setup(t, denyEcho, &Options{Grants: func(g config.Grants) {
		got = append(got, seen{g.Enabled, policy.Revision(f.holder.Load())})
	}})
	oldRev := policy.Revision(f.holder.Load())
	f.write(t, allowEcho+"grants: { enabled: false }\n")
	if err := f.r.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	offRev := policy.Revision(f.holder.Load())
	if offRev == oldRev {
		t.Fatal("the reload did not change the policy")
	}
	if len(got) != 1 || got[0].enabled || got[0].revision != oldRev {
		t.Fatalf("turning grants off: handed over %+v, want enabled false while the old policy %s was still in force", got, oldRev)
	}

	f.write(t, denyEcho+"grants: { enabled: true }\n")
	if err := f.r.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	onRev := policy.Revision(f.holder.Load())
	if len(got) != 2 || !got[1].enabled || got[1].revision != onRev || onRev == offRev {
		t.Fatalf("turning grants on: handed over %+v, want enabled true once the new policy %s was in force", got, onRev)
	}
}
