//go:build unix

package privfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// write makes a file of content with mode under dir and returns its path.
func write(t *testing.T, dir, name, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // past the umask
		t.Fatal(err)
	}
	return p
}

// swapToLink replaces path by a symlink to target, as another user with
// write access to its directory could.
func swapToLink(t *testing.T, path, target string) {
	t.Helper()
	tmp := path + ".swap"
	if err := os.Symlink(target, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestReadSwappedAfterOpen: the path is replaced by a symlink to a 0644
// file right after Read opened it (where CheckTokenFiles' lstat once
// passed and a later os.ReadFile then read the replacement): Read returns
// the bytes of the descriptor it checked, never the replacement's.
func TestReadSwappedAfterOpen(t *testing.T) {
	dir := t.TempDir()
	path := write(t, dir, "bob.token", "checked-token\n", 0o600)
	evil := write(t, dir, "evil", "planted-token\n", 0o644)
	r := Reader{Euid: os.Geteuid(), Open: func(p string) (*os.File, error) {
		f, err := OpenNoFollow(p)
		swapToLink(t, p, evil)
		return f, err
	}}
	b, err := r.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "checked-token\n" {
		t.Errorf("Read = %q, want the checked file's content", b)
	}
	// The next read opens the symlink now at the path: refused.
	if _, err := (Reader{Euid: os.Geteuid()}).Read(path); err == nil || err.Error() != path+" is a symlink; want a regular file" {
		t.Errorf("Read of the swapped path = %v, want a symlink refused", err)
	}
}

// TestReadSwappedBeforeOpen: the path is replaced by a symlink to another
// file (one the service user owns, mode 0600: the old lstat-then-read
// would have read it through the link) just before the open: O_NOFOLLOW
// refuses it.
func TestReadSwappedBeforeOpen(t *testing.T) {
	dir := t.TempDir()
	path := write(t, dir, "bob.token", "checked-token\n", 0o600)
	other := write(t, dir, "other", "planted-token\n", 0o600)
	r := Reader{Euid: os.Geteuid(), Open: func(p string) (*os.File, error) {
		swapToLink(t, p, other)
		return OpenNoFollow(p)
	}}
	b, err := r.Read(path)
	if err == nil {
		t.Fatalf("Read = %q through a symlink, want an error", b)
	}
	if got, want := err.Error(), path+" is a symlink; want a regular file"; got != want {
		t.Errorf("Read error = %q, want %q", got, want)
	}
}

// TestReadFIFO: a FIFO at the path (no writer) is refused at once, not
// waited on.
func TestReadFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	_, err := Reader{Euid: os.Geteuid()}.Read(path)
	if err == nil || err.Error() != path+" is not a regular file" {
		t.Errorf("Read of a FIFO = %v, want not a regular file", err)
	}
}

// TestReadProblems: every way a file is not private, each an *Error whose
// message starts with the path.
func TestReadProblems(t *testing.T) {
	dir := t.TempDir()
	euid := os.Geteuid()
	private := write(t, dir, "private", "secret\n", 0o600)
	readOnly := write(t, dir, "read-only", "secret\n", 0o400)
	groupRead := write(t, dir, "group-read", "secret\n", 0o640)
	worldRead := write(t, dir, "world-read", "secret\n", 0o604)
	atCap := write(t, dir, "at-cap", strings.Repeat("s", MaxBytes), 0o600)
	overCap := write(t, dir, "over-cap", strings.Repeat("s", MaxBytes+1), 0o600)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(private, link); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	tests := []struct {
		name, path string
		euid       int
		want       string // the error; "" for nil
	}{
		{name: "0600", path: private, euid: euid},
		{name: "0400", path: readOnly, euid: euid},
		{name: "at the cap", path: atCap, euid: euid},
		{name: "over the cap", path: overCap, euid: euid, want: overCap + fmt.Sprintf(" is longer than %d bytes; a token or secret file is not that long", MaxBytes)},
		{name: "group bits", path: groupRead, euid: euid, want: groupRead + " has mode 0640; want 0600 (no group or other bits)"},
		{name: "other bits", path: worldRead, euid: euid, want: worldRead + " has mode 0604; want 0600 (no group or other bits)"},
		{name: "symlink to a private file", path: link, euid: euid, want: link + " is a symlink; want a regular file"},
		{name: "directory", path: dir, euid: euid, want: dir + " is not a regular file"},
		{name: "missing", path: missing, euid: euid, want: missing + ": no such file or directory"},
		{name: "other owner", path: private, euid: euid + 1, want: fmt.Sprintf("%s is owned by uid %d; want %d (the service user)", private, euid, euid+1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Reader{Euid: tt.euid}.Read(tt.path)
			got := ""
			if err != nil {
				got = err.Error()
				if pe := (*Error)(nil); !errors.As(err, &pe) || pe.Path != tt.path {
					t.Errorf("error %v is not an *Error of the path", err)
				}
			}
			if got != tt.want {
				t.Errorf("Read = %q, want %q", got, tt.want)
			}
		})
	}
	if _, err := (Reader{Euid: euid}).Read(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file's error %v does not wrap fs.ErrNotExist", err)
	}
}

// TestReadRegular: an agent's token file is read whoever owns it and
// whatever its mode, through a symlink too, but a FIFO is refused without
// blocking and a file over MaxBytes unread.
func TestReadRegular(t *testing.T) {
	dir := t.TempDir()
	open := write(t, dir, "open.token", "tok\n", 0o644)
	link := filepath.Join(dir, "link.token")
	if err := os.Symlink(open, link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{open, link} {
		if b, err := ReadRegular(p); err != nil || string(b) != "tok\n" {
			t.Errorf("ReadRegular(%s) = %q, %v; want the token", p, b, err)
		}
	}
	fifo := filepath.Join(dir, "fifo.token")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	big := write(t, dir, "big.token", strings.Repeat("t", MaxBytes+1), 0o600)
	for p, want := range map[string]string{
		fifo:                             fifo + " is not a regular file",
		big:                              fmt.Sprintf("%s is longer than %d bytes", big, MaxBytes),
		dir:                              dir + " is not a regular file",
		filepath.Join(dir, "missing.tk"): "no such file or directory",
	} {
		_, err := ReadRegular(p)
		if pe := (*Error)(nil); !errors.As(err, &pe) || !strings.Contains(err.Error(), want) {
			t.Errorf("ReadRegular(%s) = %v, want a *privfile.Error saying %q", p, err, want)
		}
	}
}
