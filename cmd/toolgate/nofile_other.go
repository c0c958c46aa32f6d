//go:build !unix

package main

// softNofile is nofile_unix.go's: outside Unix there is no such limit to
// read (0: unknown, which preflight does not check).
func softNofile() uint64 { return 0 }
