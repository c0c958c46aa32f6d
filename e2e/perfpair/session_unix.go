//go:build unix

package main

import (
	"os/exec"
	"syscall"
)

// inOwnSession makes cmd start in a session of its own (setsid(2)), as
// ../shared/perf/run.sh starts each server (`setsid CMD &`). With the
// kernel's autogroup scheduling (CONFIG_SCHED_AUTOGROUP, on by default
// where it is built in: /proc/sys/kernel/sched_autogroup_enabled) a new
// session is a scheduling group of its own, so the server then competes
// for the CPUs apart from loadgen and from the other servers.
func inOwnSession(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid = true
}
