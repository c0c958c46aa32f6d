//go:build unix

package fileowner

import (
	"os"
	"path/filepath"
	"testing"
)

// TestOf: the owner of a file this process made is its effective uid.
func TestOf(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	uid, ok := Of(fi)
	if !ok || int(uid) != os.Geteuid() {
		t.Errorf("Of = %d, %v; want %d, true", uid, ok, os.Geteuid())
	}
}
