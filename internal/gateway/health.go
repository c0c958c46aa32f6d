package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"
)

// States of an upstream, as [Gateway.Health] and /readyz report them.
const (
	// StateConnecting: the first connect attempt has not finished.
	StateConnecting = "connecting"
	// StateConnected: a session is up and answered its last health check.
	StateConnected = "connected"
	// StateUnreachable: a session is up but its last health check (a
	// ping) failed; calls are still tried on it. After
	// unreachableLimit failed checks in a row the session is dropped and
	// the upstream is reconnecting.
	StateUnreachable = "unreachable"
	// StateReconnecting: there is no session (it ended, or connecting
	// failed); a new one is tried at least every health interval.
	StateReconnecting = "reconnecting"
)

// unreachableLimit is how many health checks in a row must fail before a
// session that is still open is dropped and re-established. The MCP ping
// utility allows a sender to consider a connection stale when pings go
// unanswered; one failure only marks the upstream unreachable, so that a
// transient error does not cut the calls in flight on a live session.
const unreachableLimit = 3

// minPingTimeout is the shortest time a health check waits for its pong.
const minPingTimeout = 5 * time.Second

// UpstreamHealth is the state of one upstream server.
type UpstreamHealth struct {
	// Name is the server's name in config.
	Name string
	// State is StateConnecting, StateConnected, StateUnreachable or
	// StateReconnecting.
	State string
	// Required is true unless the server is configured required: false;
	// a required upstream that is not connected makes [Gateway.Ready]
	// fail.
	Required bool
	// Since is when State began.
	Since time.Time
	// LastError says why the upstream is not connected; empty when it is.
	// Configured URLs in it have their query and user info removed; the
	// upstream's words in it are escaped and cut to 1 KiB (errText).
	LastError string
}

// Health returns the state of every upstream, sorted by name. It is meant
// for /readyz.
func (g *Gateway) Health() []UpstreamHealth {
	out := make([]UpstreamHealth, 0, len(g.ups))
	for _, name := range g.serverNames() {
		out = append(out, g.ups[name].health())
	}
	return out
}

// Ready returns nil when every required upstream is connected and
// answering its health checks, and otherwise an error naming each required
// upstream that is not, with its state and why. Upstreams configured
// required: false never make it fail.
func (g *Gateway) Ready() error {
	var errs []error
	for _, h := range g.Health() {
		if h.Required && h.State != StateConnected {
			errs = append(errs, fmt.Errorf("upstream %q is %s since %s: %s", h.Name, h.State, h.Since.UTC().Format(time.RFC3339), h.LastError))
		}
	}
	return errors.Join(errs...)
}

func (u *upstream) health() UpstreamHealth {
	u.mu.Lock()
	defer u.mu.Unlock()
	h := UpstreamHealth{Name: u.name, State: u.state, Required: !u.cfg.Optional, Since: u.since}
	switch {
	case u.state == StateUnreachable && u.unreachable != nil:
		h.LastError = u.errText(u.unreachable)
	case u.state != StateConnected && u.downErr != nil:
		h.LastError = u.errText(u.downErr)
	}
	return h
}

// redact removes the query and user info of the configured URL from msg:
// they may carry credentials, and /readyz and agents' error messages must
// not show them.
func (u *upstream) redact(msg string) string {
	if u.cfg.URL == "" {
		return msg
	}
	p, err := url.Parse(u.cfg.URL)
	if err != nil {
		return strings.ReplaceAll(msg, u.cfg.URL, "<url>")
	}
	clean := *p
	clean.User, clean.RawQuery, clean.Fragment = nil, "", ""
	return strings.ReplaceAll(msg, u.cfg.URL, clean.String())
}

// setState moves u to state and logs the change once: a failure while
// already failing is logged at debug level only, so an upstream that stays
// down does not fill the log. Callers hold u.mu.
func (u *upstream) setState(ctx context.Context, state string, err error) {
	prev := u.state
	if prev != state {
		u.since = time.Now()
	}
	u.state = state
	switch {
	case state == StateConnected && prev == StateConnected:
	case state == StateConnected && prev == StateConnecting:
		u.log.InfoContext(ctx, "upstream connected")
	case state == StateConnected:
		u.log.InfoContext(ctx, "upstream available again", "was", prev)
	case errors.Is(err, ErrShutdown):
	case prev == state || (prev == StateUnreachable && state == StateReconnecting):
		u.log.DebugContext(ctx, "upstream still unavailable", "state", state, "err", u.redact(err.Error()))
	case state == StateUnreachable:
		u.log.WarnContext(ctx, "upstream unreachable: its health check failed; calls are still tried", "err", u.redact(err.Error()))
	default:
		u.log.WarnContext(ctx, "upstream unavailable; reconnecting", "state", state, "err", u.redact(err.Error()))
	}
}

// healthInterval is how often a session is checked and, while there is
// none, the longest wait between connect attempts.
func (u *upstream) healthInterval() time.Duration { return u.g.opts.HealthInterval }

// watchHealth pings c every health interval, and at once when a call
// failed in transport (checkHealth), until ctx ends. A failed ping marks
// the upstream unreachable and a good one connected again; it returns an
// error once unreachableLimit pings in a row failed: the session is stale.
func (u *upstream) watchHealth(ctx context.Context, c *upConn) error {
	iv := u.healthInterval()
	t := time.NewTicker(iv)
	defer t.Stop()
	failed := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-u.checkCh:
		}
		start := time.Now()
		pctx, cancel := context.WithTimeout(ctx, u.g.opts.pingTimeout)
		// A broken answer or a 401 fails the ping, counted below, not
		// the session (ping).
		err := u.ping(pctx, c)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, context.DeadlineExceeded) && u.sentSince(start) {
			// No pong in time, but the pong may be queued behind a large
			// result on the same stdio pipe, or the gateway may be slow to
			// read it: an upstream that was sending meanwhile is alive. (Not
			// so when the ping itself failed: an error answer is traffic
			// too.)
			u.log.DebugContext(ctx, "upstream health check unanswered while the upstream was sending; counted as alive", "err", err)
			err = nil
		}
		if err == nil {
			failed = 0
			u.setReachable(ctx, c)
			continue
		}
		failed++
		err = fmt.Errorf("health check (ping): %w", err)
		if failed >= unreachableLimit {
			return fmt.Errorf("%w (%d in a row)", err, failed)
		}
		u.setUnreachable(ctx, c, err)
	}
}

// ping sends one ping on c. On a stdio session that does not speak
// 2026-07-28 it is written as a raw line (rawcall.go) and its answer taken
// from the stdout guard: an idle gateway's only regular upstream traffic
// then runs the code of its raw calls, not the SDK's request machinery,
// which mapped ≈ 3 MiB of the executable back after every release of its
// pages (issue 13, docs/performance.md "The idle loops' pages"). Other
// sessions ping through the SDK, the answer checked as a call's
// (withAnswerCheck): a broken one or a 401 fails the ping, not the
// session.
func (u *upstream) ping(ctx context.Context, c *upConn) error {
	if c.raw != nil && !c.modernEra() {
		return c.raw.ping(ctx)
	}
	return c.cs.Ping(withAnswerCheck(ctx, "ping"), nil)
}

// sawTraffic records that bytes arrived from the upstream.
func (u *upstream) sawTraffic() { u.lastRead.Store(time.Now().UnixNano()) }

// sentSince reports whether bytes arrived from the upstream at or after t.
func (u *upstream) sentSince(t time.Time) bool { return u.lastRead.Load() >= t.UnixNano() }

// activityReader calls saw after every read that returned bytes.
type activityReader struct {
	r   io.Reader
	saw func()
}

func (a activityReader) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if n > 0 {
		a.saw()
	}
	return n, err
}

// activityBody is an activityReader for an HTTP response body.
type activityBody struct {
	io.ReadCloser
	saw func()
}

func (a activityBody) Read(p []byte) (int, error) {
	n, err := a.ReadCloser.Read(p)
	if n > 0 {
		a.saw()
	}
	return n, err
}

// checkHealth asks the health watcher of the current session to check now
// (a call failed in transport).
func (u *upstream) checkHealth() {
	select {
	case u.checkCh <- struct{}{}:
	default:
	}
}

func (u *upstream) setUnreachable(ctx context.Context, c *upConn, err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.conn != c {
		return
	}
	u.unreachable = err
	u.setState(ctx, StateUnreachable, err)
	u.notifyLocked()
}

func (u *upstream) setReachable(ctx context.Context, c *upConn) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.conn != c || u.state == StateConnected {
		return
	}
	u.unreachable = nil
	u.setState(ctx, StateConnected, nil)
	u.notifyLocked()
}

// notifyLocked wakes everyone waiting for a change of u. Callers hold u.mu.
func (u *upstream) notifyLocked() {
	close(u.changed)
	u.changed = make(chan struct{})
}
