package session

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func explicit(id ID, refs ...string) Session {
	if refs == nil {
		refs = []string{}
	}
	return Session{ID: id, Mode: ModeExplicit, Tools: refs}
}

func TestParseRef(t *testing.T) {
	tests := []struct {
		ref          string
		server, tool string
		bad          bool
	}{
		{ref: "fs", server: "fs"},
		{ref: "fs__read_text_file", server: "fs", tool: "read_text_file"},
		{ref: "my-srv__a__b", server: "my-srv", tool: "a__b"},
		{ref: "", bad: true},
		{ref: "Fs", bad: true},
		{ref: "-fs", bad: true},
		{ref: "fs__", bad: true},
		{ref: "__x", bad: true},
		{ref: "f_s__x", bad: true},
	}
	for _, tc := range tests {
		t.Run(tc.ref, func(t *testing.T) {
			s, tool, err := ParseRef(tc.ref)
			if tc.bad {
				if !errors.Is(err, ErrBadRef) {
					t.Fatalf("ParseRef(%q) = %q, %q, %v; want ErrBadRef", tc.ref, s, tool, err)
				}
				return
			}
			if err != nil || s != tc.server || tool != tc.tool {
				t.Fatalf("ParseRef(%q) = %q, %q, %v; want %q, %q", tc.ref, s, tool, err, tc.server, tc.tool)
			}
		})
	}
}

func TestNormalizeRefs(t *testing.T) {
	known := func(s string) bool { return s == "fs" || s == "pay" }
	tests := []struct {
		name string
		in   []string
		want []string
		err  error
	}{
		{name: "nil stays unset", in: nil, want: nil},
		{name: "empty stays empty", in: []string{}, want: []string{}},
		{name: "sorted and deduplicated", in: []string{"pay__refund", "fs", "pay__refund"}, want: []string{"fs", "pay__refund"}},
		{name: "server covers its tools", in: []string{"fs__read", "fs"}, want: []string{"fs"}},
		{name: "unknown server", in: []string{"db"}, err: ErrUnknownServer},
		{name: "bad ref", in: []string{"FS"}, err: ErrBadRef},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NormalizeRefs(tc.in, known)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" || (tc.want == nil) != (got == nil) {
				t.Errorf("NormalizeRefs mismatch (-want +got):\n%s (nil want %v got %v)", diff, tc.want == nil, got == nil)
			}
		})
	}
}

func TestChainAllows(t *testing.T) {
	parent := explicit("p", "fs", "pay__refund")
	tests := []struct {
		name         string
		chain        Chain
		server, tool string
		want         bool
	}{
		{"default allows everything", Chain{{ID: "d", Mode: ModeDefault}}, "db", "drop", true},
		{"explicit server", Chain{parent}, "fs", "write_file", true},
		{"explicit tool", Chain{parent}, "pay", "refund", true},
		{"outside", Chain{parent}, "pay", "transfer", false},
		{"whole server needs a server ref", Chain{parent}, "pay", "", false},
		{"child narrows", Chain{explicit("c", "fs__read_text_file"), parent}, "fs", "write_file", false},
		{"child within", Chain{explicit("c", "fs__read_text_file"), parent}, "fs", "read_text_file", true},
		{"inherited keeps the parent's", Chain{{ID: "c", Mode: ModeInherited}, parent}, "pay", "transfer", false},
		{"empty explicit allows nothing", Chain{explicit("c"), parent}, "fs", "read_text_file", false},
		{"every level counts", Chain{explicit("c", "pay__transfer"), parent}, "pay", "transfer", false},
		{"empty chain", Chain{}, "fs", "x", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.chain.Allows(tc.server, tc.tool); got != tc.want {
				t.Errorf("Allows(%s, %s) = %v, want %v", tc.server, tc.tool, got, tc.want)
			}
		})
	}
}

func TestCheckNarrow(t *testing.T) {
	known := func(s string) bool { return s == "fs" || s == "pay" || s == "db" }
	parent := Chain{explicit("p", "fs", "pay__refund")}
	tests := []struct {
		name  string
		chain Chain
		refs  []string
		want  []string
		widen string // the ref named in the error
		err   error
	}{
		{name: "tool within a server", chain: parent, refs: []string{"fs__read_text_file"}, want: []string{"fs__read_text_file"}},
		{name: "whole server the parent has", chain: parent, refs: []string{"fs"}, want: []string{"fs"}},
		{name: "whole server the parent has one tool of", chain: parent, refs: []string{"pay"}, widen: "pay"},
		{name: "another tool", chain: parent, refs: []string{"fs", "pay__transfer"}, widen: "pay__transfer"},
		{name: "empty is a narrowing", chain: parent, refs: []string{}, want: []string{}},
		{name: "not given", chain: parent, refs: nil, want: nil},
		{name: "default parent allows any known server", chain: Chain{{ID: "p", Mode: ModeDefault}}, refs: []string{"db"}, want: []string{"db"}},
		{name: "grandparent limits too", chain: Chain{{ID: "c", Mode: ModeInherited}, explicit("p", "fs__read")}, refs: []string{"fs"}, widen: "fs"},
		{name: "unknown server", chain: parent, refs: []string{"nope"}, err: ErrUnknownServer},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.chain.CheckNarrow(tc.refs, known)
			if tc.widen != "" {
				var we *WidenError
				if !errors.As(err, &we) || we.Ref != tc.widen || !errors.Is(err, ErrWiden) {
					t.Fatalf("err = %v, want a WidenError naming %q", err, tc.widen)
				}
				if want := "child tools may only narrow the parent session tool policy: " + tc.widen; err.Error() != want {
					t.Errorf("message %q, want %q", err.Error(), want)
				}
				return
			}
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("refs mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestChildMode(t *testing.T) {
	tests := []struct {
		name   string
		parent Chain
		refs   []string
		want   Mode
	}{
		{"explicit", Chain{{Mode: ModeDefault}}, []string{}, ModeExplicit},
		{"inherited from explicit", Chain{explicit("p", "fs")}, nil, ModeInherited},
		{"default keeps tracking", Chain{{Mode: ModeInherited}, {Mode: ModeDefault}}, nil, ModeDefault},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.parent.ChildMode(tc.refs); got != tc.want {
				t.Errorf("ChildMode = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRequirementJSON(t *testing.T) {
	tests := []struct {
		in, out string
		want    Requirement
		bad     bool
	}{
		{in: `true`, out: `true`, want: Requirement{All: true}},
		{in: `false`, out: `false`, want: Requirement{}},
		{in: `["b","a","a"]`, out: `["a","b"]`, want: Requirement{Tools: []string{"a", "b"}}},
		{in: `[]`, out: `false`, want: Requirement{}},
		{in: `null`, bad: true},
		{in: `"x"`, bad: true},
		{in: `[""]`, bad: true},
		{in: `{"a":1}`, bad: true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			var r Requirement
			err := json.Unmarshal([]byte(tc.in), &r)
			if tc.bad {
				if err == nil {
					t.Fatalf("Unmarshal(%s) = %+v, want an error", tc.in, r)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, r); diff != "" {
				t.Errorf("decoded mismatch (-want +got):\n%s", diff)
			}
			b, err := json.Marshal(r)
			if err != nil || string(b) != tc.out {
				t.Errorf("Marshal = %s, %v; want %s", b, err, tc.out)
			}
		})
	}
	if !(Requirement{Tools: []string{}}).Equal(Requirement{}) {
		t.Errorf("[] does not equal false")
	}
}

func TestRequiresApprovalIsTheUnion(t *testing.T) {
	parent := Session{ID: "p", Mode: ModeDefault, RequireApproval: map[string]Requirement{"fs": {Tools: []string{"write_file"}}}}
	// A child that "sets fs: false" stores nothing for fs.
	child := Session{ID: "c", Mode: ModeInherited, RequireApproval: map[string]Requirement{"pay": {All: true}}}
	c := Chain{child, parent}
	tests := []struct {
		server, tool string
		want         bool
	}{
		{"fs", "write_file", true},
		{"fs", "read_text_file", false},
		{"pay", "anything", true},
		{"db", "query", false},
	}
	for _, tc := range tests {
		if got := c.RequiresApproval(tc.server, tc.tool); got != tc.want {
			t.Errorf("RequiresApproval(%s, %s) = %v, want %v", tc.server, tc.tool, got, tc.want)
		}
	}
	want := map[string]Requirement{"fs": {Tools: []string{"write_file"}}, "pay": {All: true}}
	if diff := cmp.Diff(want, c.Requirements()); diff != "" {
		t.Errorf("Requirements mismatch (-want +got):\n%s", diff)
	}
	got, err := NormalizeRequirements(map[string]Requirement{"fs": {}, "pay": {Tools: []string{}}, "db": {Tools: []string{"b", "a", "a"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]Requirement{"db": {Tools: []string{"a", "b"}}}, got); diff != "" {
		t.Errorf("NormalizeRequirements mismatch (-want +got):\n%s", diff)
	}
}

func TestRevokedAndEffectiveTools(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	parent := explicit("p", "fs", "pay__refund")
	parent.RevokedAt = at
	c := Chain{{ID: "c", Mode: ModeInherited}, parent}
	if !c.Revoked() || !c.RevokedAt().Equal(at) {
		t.Errorf("Revoked() = %v at %v, want true at %v", c.Revoked(), c.RevokedAt(), at)
	}
	refs, from, ok := Chain{explicit("c", "fs__read", "pay__transfer"), explicit("p", "fs")}.EffectiveTools()
	if diff := cmp.Diff([]string{"fs__read"}, refs); diff != "" || from != "c" || !ok {
		t.Errorf("EffectiveTools = %v from %q ok %v; want [fs__read] from c", refs, from, ok)
	}
	if _, _, ok := (Chain{{Mode: ModeDefault}}).EffectiveTools(); ok {
		t.Errorf("a default chain reports explicit tools")
	}
}
