//go:build unix

package fileowner

import (
	"os"
	"syscall"
)

// Of is the uid that owns the file fi describes (from os.Lstat or
// os.Stat), and false when the system does not say.
func Of(fi os.FileInfo) (uint32, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Uid, true
}
