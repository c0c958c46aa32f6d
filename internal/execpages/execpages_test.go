package execpages

import (
	"strings"
	"testing"
)

const smapsSample = `00400000-0147d000 r-xp 00000000 fe:00 10273766                           /usr/bin/toolgate
Size:              16884 kB
Rss:                5684 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me
0147d000-02703000 r--p 0107d000 fe:00 10273766                           /usr/bin/toolgate
Size:              18968 kB
Rss:               10880 kB
Anonymous:             0 kB
02703000-027cd000 rw-p 02303000 fe:00 10273766                           /usr/bin/toolgate
Size:                808 kB
Rss:                 680 kB
Anonymous:           520 kB
027cd000-0281d000 r--p 023cd000 fe:00 10273766                           /usr/bin/toolgate
Rss:                  40 kB
Anonymous:             4 kB
29a030c00000-29a031400000 rw-p 00000000 00:00 0 
Rss:                3984 kB
Anonymous:          3984 kB
7f795f824000-7f795f97a000 r-xp 00026000 fe:00 326269                     /usr/lib/x86_64-linux-gnu/libc.so.6
Rss:                 816 kB
Anonymous:             0 kB
7ffd1000-7ffd2000 r-xs 00000000 fe:00 10273766                           /usr/bin/toolgate
Rss:                   4 kB
Anonymous:             0 kB
`

// TestDroppable keeps to the executable's read-only private mappings that
// hold no private copy of a page: not its data (written), not a mapping with
// an anonymous page (relocations, a breakpoint), not another file, not a
// shared mapping.
func TestDroppable(t *testing.T) {
	ms, err := parseSmaps(strings.NewReader(smapsSample))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 7 {
		t.Fatalf("parsed %d mappings, want 7: %+v", len(ms), ms)
	}
	exe, ok := containing(ms, 0x00500000)
	if !ok || exe.inode != 10273766 || exe.dev != "fe:00" || exe.rss != 5684<<10 {
		t.Fatalf("containing(0x500000) = %+v, %v", exe, ok)
	}
	got := droppable(ms, exe.dev, exe.inode)
	if len(got) != 2 || got[0].start != 0x00400000 || got[1].start != 0x0147d000 || got[1].end != 0x02703000 {
		t.Fatalf("droppable = %+v, want the r-xp and the first r--p mapping", got)
	}
	if _, ok := containing(ms, 0x10); ok {
		t.Fatal("containing(0x10) found a mapping")
	}
	if got := droppable(ms, "00:00", 0); len(got) != 0 {
		t.Fatalf("droppable(anonymous) = %+v", got)
	}
	// The other files: the C library's code, not the heap, not the
	// executable's own mappings.
	if got := libraries(ms, exe.dev, exe.inode); len(got) != 1 || got[0].start != 0x7f795f824000 {
		t.Fatalf("libraries = %+v, want libc's r-xp mapping", got)
	}
}

func TestParseSmapsRejectsGarbage(t *testing.T) {
	for _, s := range []string{"zz-10 r-xp 0 fe:00 1 /x\n", "00400000 r-xp 0 fe:00 1 /x\n", "00400000-00500000 r-xp\n",
		"00400000-00500000 r-xp 0 fe:00 1 /x\nRss: lots kB\n"} {
		if _, err := parseSmaps(strings.NewReader(s)); err == nil {
			t.Errorf("parseSmaps(%q): no error", s)
		}
	}
}
