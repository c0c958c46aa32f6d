//go:build !unix

package privfile

import "os"

// OpenNoFollow opens path read-only. Outside Unix there is no O_NOFOLLOW,
// but nothing opened is read: the file's owner is unknown, and Read
// refuses it (open_unix.go).
func OpenNoFollow(path string) (*os.File, error) {
	return os.Open(path)
}

// openNonBlock opens path read-only. Outside Unix there is no O_NONBLOCK
// for open; ReadRegular refuses what is not a regular file after opening.
func openNonBlock(path string) (*os.File, error) {
	return os.Open(path)
}
