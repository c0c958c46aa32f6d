// Package execpages gives back, once start-up is over, the pages of the
// executable that start-up mapped into the process.
//
// toolgate's executable is about 50 MB (two SQL drivers, CEL, protobuf,
// Prometheus, OTel, the web inbox). Start-up (package init, config,
// migrations, the first use of the serve path) touches code and read-only
// data all over it, and on Linux each read fault on a file mapping maps the
// page's neighbourhood too (fault-around, large page-cache folios): about
// 29 MB of the executable stay mapped, although an idle gateway touches
// 4–6 MB of it again (docs/performance.md, "Memory"). Those pages are
// clean and belong to the page cache; the process's RSS counts them all the
// same.
//
// [Release] unmaps them (madvise MADV_DONTNEED on the executable's
// read-only mappings). The pages stay in the page cache: what the process
// uses afterwards it maps again with a minor fault, without reading the
// disk. The kernel does the same to any process when it reclaims memory,
// so nothing the program sees changes. A mapping that holds a private copy
// of a page (a debugger's breakpoint, relocations written by the dynamic
// loader) is left alone: MADV_DONTNEED would drop the copy. The shared
// libraries' read-only mappings (libc and the dynamic loader, in a cgo
// build) go the same way: an idle Go process does not run them.
//
// [WhenQuiet] decides when: once start-up is over, and again each time the
// process turns quiet after calls (they map part of the executable back),
// or collects while quiet (growing the stacks the collection shrank maps
// the executable's stack tables back). It can also have the heap collected
// and its free pages returned before the quiet release: the garbage of the
// calls is most of what the heap grew by (docs/performance.md, "Idle
// memory after calls: the heap").
package execpages

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// mapping is one entry of /proc/PID/smaps.
type mapping struct {
	start, end uint64
	perms      string
	dev        string // major:minor, hex, as the kernel prints it
	inode      uint64
	rss        uint64 // bytes
	anonymous  uint64 // bytes: private copies of the file's pages
}

// readSmaps reads the mappings of the smaps file at path.
func readSmaps(path string) ([]mapping, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("smaps: %w", err)
	}
	defer func() { _ = f.Close() }()
	return parseSmaps(f)
}

// parseSmaps reads the mappings of /proc/PID/smaps. Of each mapping's
// fields it keeps Rss and Anonymous, and it allocates only for the
// mappings' headers: each release parses the file once, in a quiet
// process, and what it allocates stays on the heap until a collection.
func parseSmaps(r io.Reader) ([]mapping, error) {
	var out []mapping
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if k, v, ok := bytes.Cut(line, []byte(":")); ok && bytes.IndexByte(k, ' ') < 0 && !bytes.Contains(k, []byte("-")) {
			// A field of the current mapping ("Rss:   1234 kB").
			var dst *uint64
			switch {
			case len(out) == 0:
				continue
			case string(k) == "Rss":
				dst = &out[len(out)-1].rss
			case string(k) == "Anonymous":
				dst = &out[len(out)-1].anonymous
			default:
				continue
			}
			num, _, _ := bytes.Cut(bytes.TrimLeft(v, " \t"), []byte(" "))
			kb, err := strconv.ParseUint(string(num), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("smaps: %q: %w", line, err)
			}
			*dst = kb << 10
			continue
		}
		f := strings.Fields(string(line))
		if len(f) == 0 {
			continue
		}
		// A mapping's header: start-end perms offset dev inode [path].
		if len(f) < 5 {
			return nil, fmt.Errorf("smaps: unexpected line %q", line)
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			return nil, fmt.Errorf("smaps: unexpected line %q", line)
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		inode, err3 := strconv.ParseUint(f[4], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || end < start {
			return nil, fmt.Errorf("smaps: unexpected line %q", line)
		}
		out = append(out, mapping{start: start, end: end, perms: f[1], dev: f[3], inode: inode})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("smaps: %w", err)
	}
	return out, nil
}

// droppable returns the mappings of the file (dev, inode) that Release may
// unmap: read-only, private, and holding no private copy of a page.
func droppable(ms []mapping, dev string, inode uint64) []mapping {
	var out []mapping
	for _, m := range ms {
		if m.dev != dev || m.inode != inode || inode == 0 {
			continue
		}
		if clean(m) {
			out = append(out, m)
		}
	}
	return out
}

// libraries returns the mappings of files other than the executable (dev,
// inode) that Release may unmap: read-only, private, holding no private
// copy of a page, and resident. In a dynamically linked toolgate (the
// default `go build`: cgo) these are the C library's and the dynamic
// loader's code and constants, which start-up maps (about 1.4 MB) and an
// idle Go process does not run: the runtime calls into them only to start
// a thread or to map memory. Anonymous mappings (inode 0: the heap, the
// vDSO) are not files.
func libraries(ms []mapping, dev string, inode uint64) []mapping {
	var out []mapping
	for _, m := range ms {
		if m.inode == 0 || (m.dev == dev && m.inode == inode) || m.rss == 0 {
			continue
		}
		if clean(m) {
			out = append(out, m)
		}
	}
	return out
}

// clean reports whether m is read-only, private, and holds no private copy
// of a page: what MADV_DONTNEED only unmaps (the pages stay in the page
// cache), not a mapping whose pages it would drop (written data,
// relocations, a breakpoint) nor a shared one.
func clean(m mapping) bool {
	return len(m.perms) >= 4 && m.perms[1] != 'w' && m.perms[3] == 'p' && m.anonymous == 0
}

// containing returns the mapping that holds addr.
func containing(ms []mapping, addr uint64) (mapping, bool) {
	for _, m := range ms {
		if m.start <= addr && addr < m.end {
			return m, true
		}
	}
	return mapping{}, false
}

// StartupTail is how long after serve is ready WhenQuiet first releases: the
// listeners' and background loops' first rounds (the first sweep, poll and
// health check, the upstreams' tool lists) are start-up too, and map about
// 10 MB more of the executable than they touch again later.
const StartupTail = 10 * time.Second
