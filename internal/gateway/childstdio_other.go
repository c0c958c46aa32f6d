//go:build !unix

package gateway

import (
	"fmt"
	"os"
)

// childStdio makes the child's stdin and stdout as pipes (the socket
// pairs of childstdio_unix.go are Unix's). It returns toolgate's ends and
// the child's, which the caller passes as the child's fds 0 and 1 and
// closes once it started.
func childStdio() (stdin, stdout, childIn, childOut *os.File, err error) {
	childIn, stdin, err = os.Pipe()
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("stdin pipe: %w", err)
	}
	stdout, childOut, err = os.Pipe()
	if err != nil {
		_ = stdin.Close()
		_ = childIn.Close()
		return nil, nil, nil, nil, fmt.Errorf("stdout pipe: %w", err)
	}
	return stdin, stdout, childIn, childOut, nil
}
