package session

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func refs(rs ...string) *[]string { return &rs }

func TestClassify(t *testing.T) {
	root := Session{ID: "r", Mode: ModeExplicit, Tools: []string{"fs", "pay__refund"}}
	child := Session{ID: "c", ParentID: "r", Mode: ModeExplicit, Tools: []string{"fs__read"},
		RequireApproval: map[string]Requirement{"fs": {Tools: []string{"read", "write"}}}}
	c := Chain{child, root}
	known := func(s string) bool { return s == "fs" || s == "pay" }
	exposed := func(s, t string) bool { return t != "ghost" }
	tests := []struct {
		name    string
		ch      Change
		widens  []string
		ceiling bool
		err     error
	}{
		{name: "narrower tools", ch: Change{Tools: refs("fs__read")}},
		{name: "no tools", ch: Change{Tools: refs()}},
		{name: "widen within parent", ch: Change{Tools: refs("fs__read", "fs__write")}, widens: []string{"tool fs__write"}},
		{name: "whole server the parent allows", ch: Change{Tools: refs("fs")}, widens: []string{"tool fs"}},
		{name: "past the parent", ch: Change{Tools: refs("pay")}, ceiling: true},
		{name: "unknown server", ch: Change{Tools: refs("db")}, ceiling: true},
		{name: "mixed narrow and past ceiling", ch: Change{Tools: refs("pay__charge"), RequireApproval: map[string]Requirement{"fs": {All: true}}}, ceiling: true},
		{name: "raise requirement", ch: Change{RequireApproval: map[string]Requirement{"fs": {All: true}}}},
		{name: "add requirement", ch: Change{RequireApproval: map[string]Requirement{"pay": {Tools: []string{"refund"}}}}},
		{name: "drop a required tool", ch: Change{RequireApproval: map[string]Requirement{"fs": {Tools: []string{"read"}}}}, widens: []string{"require_approval of fs"}},
		{name: "remove requirement", ch: Change{RequireApproval: map[string]Requirement{"fs": {}}}, widens: []string{"require_approval of fs"}},
		{name: "mixed narrow and widen", ch: Change{Tools: refs(), RequireApproval: map[string]Requirement{"fs": {}}}, widens: []string{"require_approval of fs"}},
		{name: "requirement of unknown server", ch: Change{RequireApproval: map[string]Requirement{"db": {All: true}}}, ceiling: true},
		{name: "empty", ch: Change{}, err: ErrEmptyChange},
		{name: "bad ref", ch: Change{Tools: refs("FS")}, err: ErrBadRef},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, widens, err := c.Classify(tc.ch, known, exposed)
			switch {
			case tc.ceiling:
				var ce *CeilingError
				if !errors.As(err, &ce) || !errors.Is(err, ErrCeiling) {
					t.Fatalf("err = %v, want a CeilingError", err)
				}
				return
			case tc.err != nil:
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				return
			case err != nil:
				t.Fatalf("err = %v", err)
			}
			if diff := cmp.Diff(tc.widens, widens); diff != "" {
				t.Errorf("widens (-want +got):\n%s", diff)
			}
		})
	}
}

func TestClassifyRootCeilingIsTheDeployment(t *testing.T) {
	c := Chain{{ID: "r", Mode: ModeExplicit, Tools: []string{"fs__read"}}}
	exposed := func(s, t string) bool { return t != "ghost" }
	if _, w, err := c.Classify(Change{Tools: refs("fs", "pay__x")}, nil, exposed); err != nil || len(w) != 2 {
		t.Fatalf("widen a root = %v, %v; want two widening parts", w, err)
	}
	if _, _, err := c.Classify(Change{Tools: refs("fs__ghost")}, nil, exposed); !errors.Is(err, ErrCeiling) {
		t.Fatalf("a tool the deployment does not expose = %v, want ErrCeiling", err)
	}
}

func TestChangeApply(t *testing.T) {
	s := Session{Mode: ModeDefault, RequireApproval: map[string]Requirement{"fs": {All: true}, "pay": {All: true}}}
	Change{Tools: refs("fs"), RequireApproval: map[string]Requirement{"fs": {}, "db": {Tools: []string{"q"}}}}.Apply(&s)
	want := Session{Mode: ModeExplicit, Tools: []string{"fs"}, RequireApproval: map[string]Requirement{"pay": {All: true}, "db": {Tools: []string{"q"}}}}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("Apply (-want +got):\n%s", diff)
	}
}
