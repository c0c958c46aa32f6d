package execpages

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
)

// madvPopulateRead maps a range's pages (Linux 5.14; MADV_POPULATE_READ).
const madvPopulateRead = 22

// exeMappings returns the test binary's mappings that Release may unmap,
// as /proc/self/smaps shows them now.
func exeMappings(t *testing.T) []mapping {
	t.Helper()
	ms, err := readSmaps("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	exe, ok := containing(ms, uint64(reflect.ValueOf(exeMappings).Pointer()))
	if !ok {
		t.Fatal("no mapping holds the test's code")
	}
	return droppable(ms, exe.dev, exe.inode)
}

func residentBytes(ms []mapping) (n uint64) {
	for _, m := range ms {
		n += m.rss
	}
	return n
}

// TestReleaseUnmapsTheExecutable maps all of the test binary's read-only
// pages, releases them, and checks that they left the RSS and that the
// program still runs (its code and constants come back from the page cache).
func TestReleaseUnmapsTheExecutable(t *testing.T) {
	for _, m := range exeMappings(t) {
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, uintptr(m.start), uintptr(m.end-m.start), madvPopulateRead); errno != 0 {
			if errors.Is(errno, syscall.EINVAL) {
				t.Skip("MADV_POPULATE_READ needs Linux 5.14")
			}
			t.Fatalf("madvise(MADV_POPULATE_READ): %v", errno)
		}
	}
	ms := exeMappings(t)
	var size uint64
	for _, m := range ms {
		size += m.end - m.start
	}
	before := residentBytes(ms)
	if before < size/2 {
		t.Fatalf("the test binary's read-only mappings hold %d of %d bytes after MADV_POPULATE_READ, want all", before, size)
	}
	released, err := Release()
	if err != nil {
		t.Fatal(err)
	}
	after := residentBytes(exeMappings(t))
	t.Logf("resident: %d KB → released %d KB → %d KB", before>>10, released>>10, after>>10)
	// What runs between Release and the second read of smaps (this test,
	// the runtime) maps some of the pages again, more than it touches on
	// this kernel (fault-around), but not all of them.
	if released < before || after >= before {
		t.Fatalf("released %d of %d resident bytes, %d still resident: the read-only pages stayed mapped", released, before, after)
	}
	sum := sha256.Sum256([]byte("toolgate"))
	if got, want := hex.EncodeToString(sum[:4]), "f360d91f"; got != want {
		t.Fatalf("sha256 after Release = %s, want %s", got, want)
	}
}

// TestReleaseUnmapsOtherFiles maps a file read-only (as the dynamic loader
// maps the C library), reads all of it, releases, and checks that its pages
// left the RSS and that it still reads the same (from the page cache).
func TestReleaseUnmapsOtherFiles(t *testing.T) {
	const size = 256 << 10
	want := make([]byte, size)
	for i := range want {
		want[i] = byte(i * 7)
	}
	path := filepath.Join(t.TempDir(), "lib.so")
	if err := os.WriteFile(path, want, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	data, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Munmap(data) }()
	resident := func() uint64 {
		ms, err := readSmaps("/proc/self/smaps")
		if err != nil {
			t.Fatal(err)
		}
		m, ok := containing(ms, uint64(reflect.ValueOf(data).Pointer()))
		if !ok {
			t.Fatal("no mapping holds the mapped file")
		}
		return m.rss
	}
	if !bytes.Equal(data, want) {
		t.Fatal("the mapped file does not read as written")
	}
	if got := resident(); got != size {
		t.Fatalf("after reading it, %d of the mapped file's %d bytes are resident, want all", got, size)
	}
	if _, err := Release(); err != nil {
		t.Fatal(err)
	}
	if got := resident(); got != 0 {
		t.Fatalf("after Release, %d of the mapped file's %d bytes are still resident, want none", got, size)
	}
	if !bytes.Equal(data, want) {
		t.Fatal("after Release the mapped file no longer reads as written")
	}
}
