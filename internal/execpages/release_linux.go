package execpages

import (
	"fmt"
	"reflect"
	"syscall"
)

// Release unmaps the executable's read-only pages from the process (see the
// package comment), and those of the other files it maps read-only (the
// shared libraries: libraries), and returns how many bytes of them were
// resident. An error leaves the process as it was, or with fewer pages
// mapped: either is safe.
func Release() (uint64, error) {
	ms, err := readSmaps("/proc/self/smaps")
	if err != nil {
		return 0, fmt.Errorf("release executable pages: %w", err)
	}
	// The executable is the file mapped where this function's code is (as
	// the kernel names it: in a container stat("/proc/self/exe") may give
	// another device than the mapping's).
	exe, ok := containing(ms, uint64(reflect.ValueOf(Release).Pointer()))
	if !ok {
		return 0, fmt.Errorf("release executable pages: no mapping holds the program's code")
	}
	var released uint64
	for _, m := range append(droppable(ms, exe.dev, exe.inode), libraries(ms, exe.dev, exe.inode)...) {
		// Plain integers, not a Go slice: this memory is the program's own
		// code and constants, not Go-allocated memory.
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, uintptr(m.start), uintptr(m.end-m.start), syscall.MADV_DONTNEED); errno != 0 {
			return released, fmt.Errorf("release executable pages: madvise %x-%x: %w", m.start, m.end, errno)
		}
		released += m.rss
	}
	return released, nil
}
