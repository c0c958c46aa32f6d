package gateway

import (
	"context"
	"time"
)

// dialContext is the context of an upstream session's connect that starts
// while the gateway runs (its initialize handshake, for stdio the process
// start too): it ends after d, or Options.ShutdownGrace after Close began,
// not at once (branch flake50). It carries parent's values, not its
// cancellation. An initialize the upstream already served
// opened a session there that only a DELETE naming its id ends; a connect
// cut before that answer arrived knows no id, so the session stayed open
// upstream until the upstream's own idle timeout (never, on a go-sdk
// server without SessionTimeout: TestCloseEndsTheUpstreamSessionItWasOpening).
// Within the grace the answer arrives and the caller closes the session it
// got (DELETE). cancel releases the context's resources; call it once the
// connect returned.
func (g *Gateway) dialContext(parent context.Context, d time.Duration) (ctx context.Context, cancel context.CancelFunc) {
	ctx, end := context.WithTimeout(context.WithoutCancel(parent), d)
	stop := context.AfterFunc(g.root, func() {
		g.log.Debug(msgDialAtClose, "grace", g.opts.ShutdownGrace)
		t := time.NewTimer(g.opts.ShutdownGrace)
		defer t.Stop()
		select {
		case <-t.C:
			end()
		case <-ctx.Done():
		}
	})
	return ctx, func() {
		stop()
		end()
	}
}

// msgDialAtClose is the log line (debug) of a connect in flight when Close
// began.
const msgDialAtClose = "closing: an upstream session's connect is in flight; letting it end within the shutdown grace, to close the session it opens"
