package session

import (
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseItemRef(t *testing.T) {
	tests := []struct {
		ref  string
		want Item
		bad  bool
	}{
		{ref: "fs", want: Item{Server: "fs"}},
		{ref: "fs__read", want: Item{Kind: KindTool, Server: "fs", Name: "read"}},
		{ref: "prompt:fs", want: Item{Kind: KindPrompt, Server: "fs"}},
		{ref: "prompt:fs__review_code", want: Item{Kind: KindPrompt, Server: "fs", Name: "review_code"}},
		{ref: "resource:fs", want: Item{Kind: KindResource, Server: "fs"}},
		{ref: "resource:fs:file:///a/b.txt", want: Item{Kind: KindResource, Server: "fs", Name: "file:///a/b.txt"}},
		{ref: "resource:fs:test://x?y=1#z", want: Item{Kind: KindResource, Server: "fs", Name: "test://x?y=1#z"}},
		{ref: "prompt:fs__", bad: true},
		{ref: "prompt:", bad: true},
		{ref: "resource:fs:", bad: true},
		{ref: "resource:F:x", bad: true},
		{ref: "tool:fs", bad: true},
	}
	for _, tc := range tests {
		t.Run(tc.ref, func(t *testing.T) {
			got, err := ParseItemRef(tc.ref)
			if tc.bad {
				if !errors.Is(err, ErrBadRef) {
					t.Fatalf("ParseItemRef(%q) = %+v, %v; want ErrBadRef", tc.ref, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseItemRef(%q) = %+v, %v; want %+v", tc.ref, got, err, tc.want)
			}
			if got.Ref() != tc.ref {
				t.Errorf("Ref() = %q, want %q back", got.Ref(), tc.ref)
			}
		})
	}
}

func TestAllowsItem(t *testing.T) {
	fsPrompt := Item{Kind: KindPrompt, Server: "fs", Name: "review"}
	fsRes := Item{Kind: KindResource, Server: "fs", Name: "file:///a"}
	fsTool := Item{Kind: KindTool, Server: "fs", Name: "review"}
	cases := []struct {
		name  string
		chain Chain
		it    Item
		want  bool
	}{
		{"default allows a prompt", Chain{{Mode: ModeDefault}}, fsPrompt, true},
		{"the server ref covers prompts", Chain{explicit("a", "fs")}, fsPrompt, true},
		{"the server ref covers resources", Chain{explicit("a", "fs")}, fsRes, true},
		{"a tool ref does not cover a prompt of the same name", Chain{explicit("a", "fs__review")}, fsPrompt, false},
		{"a prompt ref does not cover the tool of the same name", Chain{explicit("a", "prompt:fs__review")}, fsTool, false},
		{"the prompt ref covers it", Chain{explicit("a", "prompt:fs__review")}, fsPrompt, true},
		{"the prompt group covers it", Chain{explicit("a", "prompt:fs")}, fsPrompt, true},
		{"the prompt group does not cover resources", Chain{explicit("a", "prompt:fs")}, fsRes, false},
		{"the resource ref is exact", Chain{explicit("a", "resource:fs:file:///a")}, Item{Kind: KindResource, Server: "fs", Name: "file:///ab"}, false},
		{"the resource group covers it", Chain{explicit("a", "resource:fs")}, fsRes, true},
		{"every explicit level must cover", Chain{explicit("b", "resource:fs"), explicit("a", "fs__x")}, fsRes, false},
		{"a group is not covered by one member", Chain{explicit("a", "prompt:fs__review")}, Item{Kind: KindPrompt, Server: "fs"}, false},
		{"the whole server is not covered by a group", Chain{explicit("a", "prompt:fs", "resource:fs")}, Item{Server: "fs"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.chain.AllowsItem(c.it); got != c.want {
				t.Errorf("AllowsItem(%+v) = %v, want %v", c.it, got, c.want)
			}
		})
	}
}

func TestItemRefsNormalizeAndNarrow(t *testing.T) {
	got, err := NormalizeRefs([]string{"prompt:fs__b", "prompt:fs", "resource:fs:file:///x", "fs", "pay__t", "prompt:pay__p", "resource:pay:u", "resource:pay"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"fs", "pay__t", "prompt:pay__p", "resource:pay"}; !slices.Equal(got, want) {
		t.Errorf("NormalizeRefs = %q, want %q", got, want)
	}
	parent := Chain{explicit("p", "prompt:fs", "resource:fs:file:///a")}
	if _, err := parent.CheckNarrow([]string{"prompt:fs__x", "resource:fs:file:///a"}, nil); err != nil {
		t.Errorf("CheckNarrow within the parent = %v", err)
	}
	var we *WidenError
	if _, err := parent.CheckNarrow([]string{"resource:fs"}, nil); !errors.As(err, &we) || we.Ref != "resource:fs" {
		t.Errorf("CheckNarrow(resource group past the parent's one URI) = %v, want a WidenError naming it", err)
	}
	if _, err := parent.CheckNarrow([]string{"fs__x"}, nil); !errors.Is(err, ErrWiden) {
		t.Errorf("CheckNarrow(a tool past prompt and resource refs) = %v, want ErrWiden", err)
	}
}

func TestItemClassifyAndRequirements(t *testing.T) {
	c := Chain{explicit("s", "fs__read"), explicit("p", "fs")}
	refs := []string{"fs__read", "prompt:fs__review", "resource:fs:file:///a"}
	norm, widens, err := c.Classify(Change{Tools: &refs}, nil, func(server, tool string) bool { return tool == "read" })
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"prompt prompt:fs__review", "resource resource:fs:file:///a"}, widens); diff != "" {
		t.Errorf("widens (-want +got):\n%s", diff)
	}
	if norm.Tools == nil || len(*norm.Tools) != 3 {
		t.Errorf("normalized tools = %v", norm.Tools)
	}
	narrowParent := Chain{explicit("s"), explicit("p", "fs__read")}
	var ce *CeilingError
	if _, _, err := narrowParent.Classify(Change{Tools: &[]string{"prompt:fs__review"}}, nil, nil); !errors.As(err, &ce) {
		t.Errorf("Classify(a prompt the parent does not allow) = %v, want a CeilingError", err)
	}

	req := Chain{{Mode: ModeDefault, RequireApproval: map[string]Requirement{"fs": {Tools: []string{"review"}}, "pay": {All: true}}}}
	for _, tc := range []struct {
		it   Item
		want bool
	}{
		{Item{Kind: KindTool, Server: "fs", Name: "review"}, true},
		{Item{Kind: KindPrompt, Server: "fs", Name: "review"}, false},
		{Item{Kind: KindPrompt, Server: "pay", Name: "refund"}, true},
		{Item{Kind: KindResource, Server: "pay", Name: "pay://x"}, true},
		{Item{Kind: KindResource, Server: "fs", Name: "file:///a"}, false},
	} {
		if got := req.RequiresApprovalItem(tc.it); got != tc.want {
			t.Errorf("RequiresApprovalItem(%+v) = %v, want %v", tc.it, got, tc.want)
		}
	}
}
