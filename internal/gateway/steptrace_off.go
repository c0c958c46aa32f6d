//go:build !steptrace

package gateway

// stepMark marks step i of a lean call's in-path for the steptrace build
// (steptrace_on.go); in every other build it is nothing.
func stepMark(int) {}
