package gateway

import "runtime"

// yieldToAnswered lets the raw call the stdout guard f has just handed
// its answer to (rawCalls.deliver) run before f's reader goes on (issue
// 13, stdio calls at C=1). It is called only when that call was the only
// one waiting: nothing else of the session waits for an answer, so the
// reader's next read of the child's stdout would find nothing (EAGAIN)
// and park. On one P (procs.Follow while the process uses little CPU)
// the woken call is next on the P but runs only once the reader parks,
// so that empty read and the reader's park came before the call's answer
// to its agent;
// yielded, the call answers first and the reader reads after. Nothing is
// yielded while f holds more of stdout (another line is there to hand
// on at once), and a call that is not alone never waits for the reader.
// Only on one P: with more, a yielded reader waits in the global run
// queue behind the goroutines of every other call in flight (at C=16 the
// child, idle most of the time, often has one call at a time, so alone
// says little there), and the woken call may run on another P anyway.
func yieldToAnswered(f *lineFilter) {
	if f.lines.r.Buffered() > 0 || runtime.GOMAXPROCS(0) != 1 {
		return
	}
	runtime.Gosched()
}
