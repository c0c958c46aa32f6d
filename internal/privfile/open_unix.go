//go:build unix

package privfile

import (
	"os"
	"syscall"
)

// OpenNoFollow opens path read-only, close-on-exec (as os.OpenFile always
// does), refusing a symlink at its last element (O_NOFOLLOW: ELOOP on
// Linux) and without blocking on a FIFO (O_NONBLOCK; Read then refuses it
// as not a regular file). Parent directories may still be symlinks.
func OpenNoFollow(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
}

// openNonBlock opens path read-only without blocking on a FIFO
// (O_NONBLOCK), following symlinks.
func openNonBlock(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
