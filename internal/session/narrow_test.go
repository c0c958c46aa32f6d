package session

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCheckRequirements(t *testing.T) {
	root := Session{ID: "r", Mode: ModeDefault, RequireApproval: map[string]Requirement{"fs": {All: true}}}
	mid := Session{ID: "m", ParentID: "r", Mode: ModeInherited, RequireApproval: map[string]Requirement{"pay": {Tools: []string{"refund"}}}}
	c := Chain{mid, root}
	tests := []struct {
		name  string
		asked map[string]Requirement
		want  map[string]Requirement
		widen string // the server named, "" when accepted
	}{
		{name: "nothing stated", asked: nil, want: nil},
		{name: "restates", asked: map[string]Requirement{"fs": {All: true}, "pay": {Tools: []string{"refund"}}},
			want: map[string]Requirement{"fs": {All: true}, "pay": {Tools: []string{"refund"}}}},
		{name: "adds", asked: map[string]Requirement{"pay": {Tools: []string{"transfer", "refund"}}, "db": {All: true}},
			want: map[string]Requirement{"pay": {Tools: []string{"refund", "transfer"}}, "db": {All: true}}},
		{name: "pay all covers the list", asked: map[string]Requirement{"pay": {All: true}}, want: map[string]Requirement{"pay": {All: true}}},
		{name: "false where nothing is required", asked: map[string]Requirement{"db": {}}, want: nil},
		{name: "false under the root's true", asked: map[string]Requirement{"fs": {}}, widen: "fs"},
		{name: "a list under the root's true", asked: map[string]Requirement{"fs": {Tools: []string{"write"}}}, widen: "fs"},
		{name: "a list missing the parent's tool", asked: map[string]Requirement{"pay": {Tools: []string{"transfer"}}}, widen: "pay"},
		{name: "first in name order", asked: map[string]Requirement{"pay": {}, "fs": {}}, widen: "fs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := c.CheckRequirements(tc.asked, nil)
			var we *RequirementWidenError
			if tc.widen != "" {
				if !errors.As(err, &we) || !errors.Is(err, ErrWiden) || we.Server != tc.widen {
					t.Fatalf("err = %v, want a RequirementWidenError naming %s", err, tc.widen)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("requirements mismatch (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := c.CheckRequirements(map[string]Requirement{"db": {All: true}}, func(s string) bool { return s != "db" }); !errors.Is(err, ErrUnknownServer) {
		t.Errorf("unknown server: %v, want ErrUnknownServer", err)
	}
}

func TestRequirementWidenErrorText(t *testing.T) {
	err := &RequirementWidenError{Server: "fs", Asked: Requirement{}, Parent: Requirement{Tools: []string{"b", "a"}}}
	want := `a child session may only narrow its parent's policy, and require_approval.fs = false would drop approvals the parent session requires (its effective require_approval.fs is ["a","b"]); state true, or a list that includes ["a","b"], or leave fs out to inherit it`
	if err.Error() != want {
		t.Errorf("text\n%s\nwant\n%s", err.Error(), want)
	}
	err = &RequirementWidenError{Server: "fs", Asked: Requirement{Tools: []string{"w"}}, Parent: Requirement{All: true}}
	want = `a child session may only narrow its parent's policy, and require_approval.fs = ["w"] would drop approvals the parent session requires (its effective require_approval.fs is true); state true, or leave fs out to inherit it`
	if err.Error() != want {
		t.Errorf("text\n%s\nwant\n%s", err.Error(), want)
	}
}
