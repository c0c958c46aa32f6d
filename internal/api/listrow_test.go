package api

import "testing"

// TestListRowAllocatesLittle (list28): a listed request allocates what
// its row's strings, its conversion and its encoding need, not also a
// requestRow and 34 Scan destinations per row, a request moved to the
// heap by its decode, json.Unmarshal of its plain string lists, or the
// page's buffers grown afresh: ≈ 1.4 KB per listed request (1,000 with
// small arguments), ≈ 3.7 KB on main 37478e1.
func TestListRowAllocatesLittle(t *testing.T) {
	perRow := allocPerListedRow(t)
	limit := 2500.0
	if raceEnabled {
		limit = 4000 // ≈ 2,800–3,000 now under -race, ≈ 5,300 on the base
	}
	if perRow > limit {
		t.Errorf("listing 1,000 requests allocated %.0f B per listed request, want at most %.0f (one requestRow and Scan destinations for the page, the decode's request on the stack, plain lists without json.Unmarshal, the page's buffers kept)", perRow, limit)
	}
}
