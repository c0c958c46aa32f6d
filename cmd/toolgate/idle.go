package main

import (
	"log/slog"

	"toolgate/internal/execpages"
)

// releaseIdle returns what serve gives back once start-up is over and
// whenever the process turns quiet (execpages.WhenQuiet): the pages of the
// executable mapped since the last release. It logs at debug level: a
// failure leaves only pages mapped that need not be.
//
// It does not also return the heap's free pages (debug.FreeOSMemory):
// measured with it, RssAnon at rest was about 1 MB lower but RssFile 2–4 MB
// higher, at start and after calls alike (docs/performance.md, "Idle
// memory after calls").
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
