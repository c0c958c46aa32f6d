package web

import (
	"runtime"
	"testing"
)

// TestNewParsesNoPage: New leaves the pages' templates to the first page
// served (about 600 KB allocated, 450 KB of it kept), so a gateway whose
// inbox nobody opens does not hold them.
func TestNewParsesNoPage(t *testing.T) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := New(nil, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 100<<10 {
		t.Fatalf("New allocated %d KB, want under 100 KB: it parsed the pages", got>>10)
	}
}

// TestPagesParse: every page parses, with the layout (they are embedded:
// this test is what stands for the check New no longer makes).
func TestPagesParse(t *testing.T) {
	pages, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range pageNames {
		if pages[name] == nil || pages[name].Lookup("layout") == nil {
			t.Errorf("page %s: not parsed with the layout", name)
		}
	}
}
