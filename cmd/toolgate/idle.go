package main

import (
	"log/slog"
	"os"
	"runtime/debug"

	"toolgate/internal/execpages"
	"toolgate/internal/gctune"
)

// releaseIdle returns what serve gives back once start-up is over and
// whenever the process turns quiet (execpages.WhenQuiet): the pages of the
// executable mapped since the last release and, when toolgate tunes the
// collector (gc: what serve applied; GOGC from the environment leaves the
// collector alone, as gctune.Tune does), the heap's free pages
// (debug.FreeOSMemory: one collection). It logs at debug level: a failure
// leaves only pages mapped that need not be.
func releaseIdle(gc *gctune.Settings, log *slog.Logger) func() {
	return func() {
		if gc != nil && gc.GCPercentSource == "default" && os.Getenv("TOOLGATE_IDLE_NOFREE") == "" {
			debug.FreeOSMemory()
		}
		n, err := execpages.Release()
		if err != nil {
			log.Debug("executable pages not released", "err", err)
			return
		}
		log.Debug("executable pages released", "resident_bytes", n)
	}
}
