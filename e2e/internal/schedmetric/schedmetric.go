// Package schedmetric reads the Go runtime's scheduler gauges from a
// toolgate admin listener's /metrics body (Prometheus text format), for
// the benchmarks and perfpair's -procs that follow procs.Follow.
package schedmetric

import (
	"bytes"
	"strconv"
)

// Gomaxprocs returns the value of go_sched_gomaxprocs_threads (the number
// of Ps) in body, a Prometheus text-format /metrics body, and true; 0 and
// false when body has no such line or its value is not a number.
func Gomaxprocs(body []byte) (int, bool) {
	const name = "\ngo_sched_gomaxprocs_threads "
	i := bytes.Index(body, []byte(name))
	if i < 0 {
		return 0, false
	}
	rest := body[i+len(name):]
	if j := bytes.IndexByte(rest, '\n'); j >= 0 {
		rest = rest[:j]
	}
	v, err := strconv.ParseFloat(string(bytes.TrimSpace(rest)), 64)
	if err != nil {
		return 0, false
	}
	return int(v), true
}
