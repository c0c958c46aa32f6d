package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestApprovalsListPagesWithCursors (page41): `toolgate approvals list`,
// a separate process against a real gateway holding three calls, pages
// one approval at a time by the cursor it prints ("more: … --cursor C",
// now an opaque list position), oldest first and newest first, and the
// pages together list each held call once, in the order the gateway
// created them.
func TestApprovalsListPagesWithCursors(t *testing.T) {
	g, _ := startUpstreamGateway(t, heldEchoPolicy)
	cs := g.connect(t, nil, nil)
	var created []string
	for n := range 3 {
		callAsync(t.Context(), cs, toolCall("t__echo_raw", fmt.Sprintf(`{"n":%d}`, n)))
		for _, a := range waitPending(t, g.Admin, n+1) {
			if !slices.Contains(created, a.ID) {
				created = append(created, a.ID)
			}
		}
	}
	for _, oldest := range []bool{true, false} {
		args := []string{"list", "--state", "pending", "--limit", "1"}
		if oldest {
			args = append(args, "--oldest")
		}
		var (
			listed []string
			cursor string
		)
		for page := 0; ; page++ {
			pageArgs := args
			if cursor != "" {
				pageArgs = append(slices.Clip(args), "--cursor", cursor)
			}
			out := mustCLI(t, g.Admin, pageArgs...)
			lines := strings.Split(out, "\n")
			if f := strings.Fields(lines[1]); len(f) > 0 {
				listed = append(listed, f[0])
			}
			i := strings.Index(out, "--cursor ")
			if i < 0 {
				break
			}
			if page > 5 {
				t.Fatalf("more than 5 pages of 3 approvals:\n%s", out)
			}
			cursor = strings.Fields(out[i+len("--cursor "):])[0]
		}
		want := slices.Clone(created)
		if !oldest {
			slices.Reverse(want)
		}
		if !slices.Equal(listed, want) {
			t.Errorf("list --limit 1 (oldest %v) paged %v, want %v", oldest, listed, want)
		}
	}
}
