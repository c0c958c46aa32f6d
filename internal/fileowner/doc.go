// Package fileowner reads the uid that owns a file, for the checks that
// refuse a secret or a socket directory another user could read or swap
// (privfile.Reader.Read, api.CheckSocketDir). On systems without uids it
// reports the owner unknown, and those checks fail closed.
package fileowner
