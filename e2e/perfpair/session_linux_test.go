//go:build linux

package main

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// sessionOf is the session id of process pid (proc(5): the sixth field
// of /proc/PID/stat, the fourth after the command's closing parenthesis).
func sessionOf(t *testing.T, pid string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	sid, err := strconv.Atoi(f[3])
	if err != nil {
		t.Fatalf("/proc/%s/stat: %v", pid, err)
	}
	return sid
}

// TestServerCommandSession: with -setsid a server starts in a session of
// its own (its session id is its pid), as run.sh's setsid starts it;
// without, it stays in perfpair's session.
func TestServerCommandSession(t *testing.T) {
	self := sessionOf(t, "self")
	for _, own := range []bool{false, true} {
		cmd := serverCommand("sleep", []string{"30"}, own)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sid := sessionOf(t, strconv.Itoa(cmd.Process.Pid))
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		want := self
		if own {
			want = cmd.Process.Pid
		}
		if sid != want {
			t.Errorf("own session %v: the server's session is %d, want %d (perfpair's is %d)", own, sid, want, self)
		}
	}
}
