// Package privfile reads a secret file (an approver's token_file, a
// notification channel's url_file, secret_file or token_file) once, and
// only if the file it opened is private to the service user: a regular
// file owned by the process's effective uid with no group or other
// permission bits, at most [MaxBytes] long. The check is made on the
// opened descriptor (fstat) and the content read from that same
// descriptor, so a path swapped between a check and a read (a symlink or
// another user's file put there, in a directory such as /tmp) cannot be
// what is used: the rule of issue 6 ("Out of the agent's reach") holds
// for the bytes toolgate uses, not only for the name it checked.
//
// Outside Unix a file's owner is unknown and every read fails (closed).
package privfile
