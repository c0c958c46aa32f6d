package main

import (
	"log/slog"
	"runtime/metrics"

	"toolgate/internal/execpages"
)

// releaseIdle returns what serve gives back once start-up is over and
// whenever the process turns quiet (execpages.WhenQuiet): the pages of the
// executable mapped since the last release. It logs at debug level: a
// failure leaves only pages mapped that need not be.
//
// The heap's free pages are returned separately, CollectBefore earlier
// (execpages.Activity.Collect, debug.FreeOSMemory): right before the
// release a collection left the stacks it shrank to grow back after it,
// mapping the executable's stack tables again (docs/performance.md,
// "Idle memory after calls: the heap").
func releaseIdle(log *slog.Logger) func() {
	return func() {
		n, err := execpages.Release()
		if err != nil {
			log.Debug("executable pages not released", "err", err)
			return
		}
		log.Debug("executable pages released", "resident_bytes", n)
	}
}

// gcCycles returns a reader of the collections completed so far
// (runtime/metrics /gc/cycles/total:gc-cycles; 0 if this Go lacks it), for
// execpages.WhenQuiet. Not safe for concurrent use.
func gcCycles() func() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	return func() uint64 {
		metrics.Read(s)
		if s[0].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return s[0].Value.Uint64()
	}
}
