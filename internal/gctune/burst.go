package gctune

// burstWatch follows the goroutine stacks each look reads (Stats.Stacks)
// and says when a burst ended: the stacks rose from their lowest since the
// last burst's end by a peak BurstEnded counts as a burst, and fell back
// to an eighth of that rise. Measured from that low, so that what is left
// at one burst's end (stacks still falling, 17 MiB out of 157 at 10,000)
// does not count as the next burst when it falls further.
type burstWatch struct {
	low, peak uint64 // since the last burst's end or the lowest after it
}

// see takes the stacks of one look and reports whether they end a burst.
func (w *burstWatch) see(stacks uint64) bool {
	w.peak = max(w.peak, stacks)
	var above uint64
	if stacks > w.low {
		above = stacks - w.low
	}
	if BurstEnded(w.peak-w.low, above) {
		w.low, w.peak = stacks, stacks
		return true
	}
	if stacks < w.low {
		w.low, w.peak = stacks, stacks
	}
	return false
}
