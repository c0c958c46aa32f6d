package privfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"toolgate/internal/fileowner"
)

// MaxBytes is the largest private file Read returns: 64 KiB. A token,
// signing secret or webhook URL is far shorter; a longer file is refused
// unread rather than held in memory (it is most likely the wrong path).
const MaxBytes = 64 << 10

// Error is a private file's problem. Its message starts with the path
// ("/run/bob.token is a symlink; want a regular file", "/run/bob.token: no
// such file or directory"), so that a caller names the config key by
// prefixing it ("token_file " + err). It unwraps to the system's error
// where there is one (fs.ErrNotExist for a missing file).
type Error struct {
	Path string
	// problem follows Path in the message: " is …" or ": …".
	problem string
	err     error
}

func (e *Error) Error() string { return e.Path + e.problem }

// Unwrap returns the system's error, or nil.
func (e *Error) Unwrap() error { return e.err }

// Reader reads private files for the service user Euid. The zero value
// reads for uid 0 with [OpenNoFollow].
type Reader struct {
	// Euid is the uid that must own the file: the process's effective uid
	// at serve time (os.Geteuid).
	Euid int
	// Open opens a path for reading; nil is OpenNoFollow. Whatever it
	// returns is checked on its descriptor before a byte is read (tests
	// pass one that swaps the path after opening it).
	Open func(path string) (*os.File, error)
}

// Read returns the content of the file at path, read from one open
// descriptor after fstat on that descriptor showed a regular file owned by
// r.Euid without group or other bits and at most MaxBytes long. Every
// failure is an *Error naming path: it cannot be opened (missing, a
// symlink at its last element, unreadable), is not a regular file (a
// directory or a FIFO, which is opened without blocking and refused), is
// owned by another uid or by one unknown on this system, has mode bits
// beyond 0600, or is longer than MaxBytes.
func (r Reader) Read(path string) ([]byte, error) {
	open := r.Open
	if open == nil {
		open = OpenNoFollow
	}
	f, err := open(path)
	if err != nil {
		if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&os.ModeSymlink != 0 {
			return nil, &Error{Path: path, problem: " is a symlink; want a regular file", err: err}
		}
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			err = pe.Err // the path is the message's first word already
		}
		return nil, &Error{Path: path, problem: ": " + err.Error(), err: err}
	}
	return readChecked(f, path, func(fi os.FileInfo) error { return check(fi, r.Euid) })
}

// ReadRegular returns the content of the file at path if it is a regular
// file of at most MaxBytes, whoever owns it and whatever its mode: an
// agent's token_file, which the agent may own. It follows symlinks (a
// Kubernetes secret volume's files are links), opens without blocking
// (O_NONBLOCK on Unix: a FIFO there is refused, not waited on; outside
// Unix a plain open) and checks the opened descriptor (fstat). Every
// failure is an *Error naming path: it cannot be opened, is not a regular
// file, or is longer than MaxBytes.
func ReadRegular(path string) ([]byte, error) {
	f, err := openNonBlock(path)
	if err != nil {
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, &Error{Path: path, problem: ": " + err.Error(), err: err}
	}
	return readChecked(f, path, func(fi os.FileInfo) error {
		if !fi.Mode().IsRegular() {
			return errors.New(" is not a regular file")
		}
		return nil
	})
}

// readChecked reads f, opened from path, once fstat on it passes check,
// refusing more than MaxBytes, and closes it.
func readChecked(f *os.File, path string, check func(os.FileInfo) error) ([]byte, error) {
	defer f.Close() //nolint:errcheck // read-only
	fi, err := f.Stat()
	if err != nil {
		return nil, &Error{Path: path, problem: ": " + err.Error(), err: err}
	}
	if err := check(fi); err != nil {
		return nil, &Error{Path: path, problem: err.Error()}
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return nil, &Error{Path: path, problem: ": " + err.Error(), err: err}
	}
	if len(b) > MaxBytes {
		return nil, &Error{Path: path, problem: fmt.Sprintf(" is longer than %d bytes; a token or secret file is not that long", MaxBytes)}
	}
	return b, nil
}

// check says why fi, the fstat of an opened file, is not a private file of
// euid; the message follows the path.
func check(fi os.FileInfo, euid int) error {
	switch {
	case fi.Mode()&os.ModeSymlink != 0: // an Open that follows no link cannot return one; refuse anyway
		return errors.New(" is a symlink; want a regular file")
	case !fi.Mode().IsRegular():
		return errors.New(" is not a regular file")
	}
	uid, ok := fileowner.Of(fi)
	if !ok {
		return errors.New(": owner unknown on this system")
	}
	if int64(uid) != int64(euid) {
		return fmt.Errorf(" is owned by uid %d; want %d (the service user)", uid, euid)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf(" has mode %04o; want 0600 (no group or other bits)", perm)
	}
	return nil
}
