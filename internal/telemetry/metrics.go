// Package telemetry builds toolgate's Prometheus metrics. It holds no
// globals: cmd creates one registry and passes the Metrics to the parts
// that record them.
package telemetry

import (
	"maps"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the gate's instruments. A nil *Metrics records nothing; every
// method is safe on nil.
type Metrics struct {
	toolCalls         *prometheus.CounterVec
	approvalRequests  prometheus.Counter
	approvalDecisions *prometheus.CounterVec
	approvalWait      prometheus.Histogram
	approvalsPending  *pendingGauge
	dispatchRefusals  *prometheus.CounterVec
	policyReloads     prometheus.Counter
	policyReloadFails prometheus.Counter
	policyMonitored   *prometheus.CounterVec
	connectionsShed   *prometheus.CounterVec
	storeErrors       *prometheus.CounterVec
	leasesTakenOver   *prometheus.CounterVec
	tasksResumed      *prometheus.CounterVec

	// toolCallSeries keeps toolCalls' counter per label pair (at most
	// maxCachedToolCalls), so that counting a call is a map read: the
	// vec's WithLabelValues checked, hashed and looked its labels up
	// under a read lock on every decided call (branch stdio46). Copied
	// on write under toolCallMu, read without a lock. The vec's series
	// are never deleted, so a kept counter is always the exported one.
	toolCallSeries atomic.Pointer[map[toolCallKey]prometheus.Counter]
	toolCallMu     sync.Mutex
}

// Store operations whose failures toolgate_store_errors_total counts (its
// op label). Each is exported at 0 from the start, as is each reason of
// toolgate_dispatch_refusals_total, so an alert on its increase fires on
// the first failure (a series that first appears at 1 shows no increase).
const (
	// StoreOpLeaseRenewal: renewing this instance's claims (leases) on the
	// calls it holds and the dispatches it runs.
	StoreOpLeaseRenewal = "lease_renewal"
	// StoreOpSweep: listing the requests due to expire.
	StoreOpSweep = "sweep"
	// StoreOpCall: a gated call (or a session's policy request) refused
	// because the store failed; its agent read an error id.
	StoreOpCall = "call"
)

// How a claim of another instance was taken over (LeaseTakenOver).
const (
	// TakenOverResend: an identical re-send or a resume held a call here
	// whose holder elsewhere had gone.
	TakenOverResend = "resend"
	// TakenOverOutcomeUnknown: the sweeper recorded the dispatch outcome
	// of a call another instance consumed as unknown, that instance's
	// dispatch lease having lapsed (it stopped before the upstream answered).
	TakenOverOutcomeUnknown = "outcome_unknown"
)

// Who found a task whose runner was gone (TaskResumed's foundBy).
const (
	// FoundBySweep: the sweep every instance runs every approvals.lease/3
	// for approved tasks nobody holds.
	FoundBySweep = "sweep"
	// FoundByTasksGet: the agent's tasks/get.
	FoundByTasksGet = "tasks_get"
)

// NewMetrics creates the metrics and registers them (and the Go and process
// collectors) on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_tool_calls_total",
			Help: "tools/call requests by upstream server and what decided them: the policy's effect (allow, deny, approve) or grant (a remembered grant allowed the call in place of an approval).",
		}, []string{"server", "effect"}),
		approvalRequests: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolgate_approval_requests_total",
			Help: "Approval requests created.",
		}),
		approvalDecisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_approval_decisions_total",
			Help: "Approval requests settled by this instance, by decision (approved, denied, expired, cancelled).",
		}, []string{"decision"}),
		approvalWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "toolgate_approval_wait_seconds",
			Help:    "Seconds a held call waited for its decision.",
			Buckets: []float64{0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600},
		}),
		approvalsPending: newPendingGauge(),
		dispatchRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_dispatch_refusals_total",
			Help: "Approved calls refused at dispatch, by reason (invalidated, not_approved, store_error, policy_moved).",
		}, []string{"reason"}),
		policyReloads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolgate_policy_reloads_total",
			Help: "Reloads of the deployment policy from the config file (SIGHUP or --watch) that succeeded, changed or not.",
		}),
		policyReloadFails: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolgate_policy_reload_failures_total",
			Help: "Reloads of the deployment policy refused because the config file was unreadable or invalid; the previous policy stayed in force.",
		}),
		policyMonitored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_policy_monitor_total",
			Help: "Calls that monitor mode let proceed, by upstream server and verdict (would_deny, would_hold).",
		}, []string{"server", "verdict"}),
		connectionsShed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_http_connections_shed_total",
			Help: "Connections closed by a listener's connection cap, by listener (mcp, admin) and how: evicted (idle, closed to make room) or refused (answered 503: every other connection carried a request).",
		}, []string{"listener", "how"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_store_errors_total",
			Help: "Failed store operations of this instance, by op: lease_renewal (renewing its claims on held calls and dispatches; failing for approvals.lease lets other instances take them over), sweep (expiring due requests), call (a gated call refused, its agent given an error id that the log line with the cause carries).",
		}, []string{"op"}),
	}
	m.leasesTakenOver = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolgate_leases_taken_over_total",
		Help: "Claims of another instance this instance took over after they lapsed or were let go (it died, lost the store for approvals.lease, or its caller left), by how: resend (an identical re-send or a resume held the call here), outcome_unknown (the sweeper recorded the outcome of a call it was dispatching as unknown).",
	}, []string{"how"})
	m.tasksResumed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolgate_tasks_resumed_total",
		Help: "Approved MCP tasks whose runner was gone (the instance that answered with the task stopped or died) that this instance took up, by found_by (sweep: its own sweep for them; tasks_get: the agent's tasks/get) and result (started: it ran the call; cannot_run: its call could not be read here or its tool is not in this instance's catalog, so it did not).",
	}, []string{"found_by", "result"})
	for _, by := range []string{FoundBySweep, FoundByTasksGet} {
		m.tasksResumed.WithLabelValues(by, "started")
		m.tasksResumed.WithLabelValues(by, "cannot_run")
	}
	for _, how := range []string{TakenOverResend, TakenOverOutcomeUnknown} {
		m.leasesTakenOver.WithLabelValues(how)
	}
	for _, op := range []string{StoreOpLeaseRenewal, StoreOpSweep, StoreOpCall} {
		m.storeErrors.WithLabelValues(op)
	}
	for _, reason := range []string{"invalidated", "not_approved", "store_error", "policy_moved"} {
		m.dispatchRefusals.WithLabelValues(reason)
	}
	// A dashboard's rate of denials or expiries, and an alert on shed
	// connections, need their series before the first one (newuser48:
	// they appeared only then).
	for _, decision := range []string{"approved", "denied", "expired", "cancelled"} {
		m.approvalDecisions.WithLabelValues(decision)
	}
	for _, listener := range []string{"mcp", "admin"} {
		m.connectionsShed.WithLabelValues(listener, "evicted")
		m.connectionsShed.WithLabelValues(listener, "refused")
	}
	reg.MustRegister(m.toolCalls, m.approvalRequests, m.approvalDecisions, m.approvalWait, m.approvalsPending, m.dispatchRefusals,
		m.policyReloads, m.policyReloadFails, m.policyMonitored, m.connectionsShed, m.storeErrors, m.leasesTakenOver,
		m.tasksResumed,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the metrics of g in the Prometheus text format.
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}

// EffectGrant is the effect label of a call a remembered grant allowed in
// place of an approval (toolgate_tool_calls_total).
const EffectGrant = "grant"

// ToolCall counts one tools/call decided with effect (a policy effect or
// EffectGrant).
func (m *Metrics) ToolCall(server, effect string) {
	if m == nil {
		return
	}
	k := toolCallKey{server, effect}
	if s := m.toolCallSeries.Load(); s != nil {
		if c, ok := (*s)[k]; ok {
			c.Inc()
			return
		}
	}
	c := m.toolCalls.WithLabelValues(server, effect)
	c.Inc()
	m.keepToolCallSeries(k, c)
}

// A toolCallKey is the labels of a toolgate_tool_calls_total series.
type toolCallKey struct{ server, effect string }

// maxCachedToolCalls bounds Metrics.toolCallSeries (servers are the
// configured upstreams, effects four: a few dozen pairs in practice).
// Pairs beyond it are counted through the vec as before.
const maxCachedToolCalls = 256

// keepToolCallSeries adds c, the counter of the labels k, to
// toolCallSeries (a copy with it), unless it is there or full.
func (m *Metrics) keepToolCallSeries(k toolCallKey, c prometheus.Counter) {
	m.toolCallMu.Lock()
	defer m.toolCallMu.Unlock()
	var old map[toolCallKey]prometheus.Counter
	if s := m.toolCallSeries.Load(); s != nil {
		old = *s
	}
	if _, ok := old[k]; ok || len(old) >= maxCachedToolCalls {
		return
	}
	s := make(map[toolCallKey]prometheus.Counter, len(old)+1)
	maps.Copy(s, old)
	// Own copies: the caller's strings may be parts of a larger text.
	s[toolCallKey{strings.Clone(k.server), strings.Clone(k.effect)}] = c
	m.toolCallSeries.Store(&s)
}

// ApprovalRequested counts one created request.
func (m *Metrics) ApprovalRequested() {
	if m != nil {
		m.approvalRequests.Inc()
	}
}

// ApprovalDecided counts one request settled as decision.
func (m *Metrics) ApprovalDecided(decision string) {
	if m != nil {
		m.approvalDecisions.WithLabelValues(decision).Inc()
	}
}

// ApprovalWaited observes how long a held call waited, in seconds.
func (m *Metrics) ApprovalWaited(seconds float64) {
	if m != nil {
		m.approvalWait.Observe(seconds)
	}
}

// PendingApprovals sets the pending gauge.
func (m *Metrics) PendingApprovals(n int) {
	if m != nil {
		m.approvalsPending.set(float64(n), true)
	}
}

// PendingUnknown marks the pending count unknown (the store could not
// count it): toolgate_approvals_pending is left out of /metrics until the
// next PendingApprovals, rather than report the last count through an
// outage.
func (m *Metrics) PendingUnknown() {
	if m != nil {
		m.approvalsPending.set(0, false)
	}
}

// DispatchRefused counts one approved call refused at dispatch.
func (m *Metrics) DispatchRefused(reason string) {
	if m != nil {
		m.dispatchRefusals.WithLabelValues(reason).Inc()
	}
}

// PolicyReloaded counts one successful reload of the deployment policy.
func (m *Metrics) PolicyReloaded() {
	if m != nil {
		m.policyReloads.Inc()
	}
}

// PolicyReloadFailed counts one refused reload of the deployment policy.
func (m *Metrics) PolicyReloadFailed() {
	if m != nil {
		m.policyReloadFails.Inc()
	}
}

// PolicyMonitored counts one call that monitor mode let proceed with
// verdict would_deny or would_hold.
func (m *Metrics) PolicyMonitored(server, verdict string) {
	if m != nil {
		m.policyMonitored.WithLabelValues(server, verdict).Inc()
	}
}

// ConnectionShed counts one connection closed by the connection cap of
// listener; how is "evicted" or "refused".
func (m *Metrics) ConnectionShed(listener, how string) {
	if m != nil {
		m.connectionsShed.WithLabelValues(listener, how).Inc()
	}
}

// LeaseTakenOver counts one claim of another instance taken over, how
// (TakenOver…).
func (m *Metrics) LeaseTakenOver(how string) {
	if m != nil {
		m.leasesTakenOver.WithLabelValues(how).Inc()
	}
}

// TaskResumed counts one approved task whose runner was gone that
// foundBy (FoundBy…) took up here: started (the call ran) or not (it
// cannot run here).
func (m *Metrics) TaskResumed(foundBy string, started bool) {
	if m == nil {
		return
	}
	result := "cannot_run"
	if started {
		result = "started"
	}
	m.tasksResumed.WithLabelValues(foundBy, result).Inc()
}

// StoreError counts one failed store operation op (StoreOp…).
func (m *Metrics) StoreError(op string) {
	if m != nil {
		m.storeErrors.WithLabelValues(op).Inc()
	}
}

// pendingGauge is toolgate_approvals_pending: a gauge that is collected
// only while its value is known (see Metrics.PendingUnknown). It starts
// known at 0, as a plain gauge does.
type pendingGauge struct {
	desc  *prometheus.Desc
	mu    sync.Mutex
	n     float64 // guarded by mu
	known bool    // guarded by mu
}

func newPendingGauge() *pendingGauge {
	return &pendingGauge{
		desc: prometheus.NewDesc("toolgate_approvals_pending",
			"Pending approval requests in the store, as of the last sweep; absent while the store cannot count them.", nil, nil),
		known: true,
	}
}

func (p *pendingGauge) set(n float64, known bool) {
	p.mu.Lock()
	p.n, p.known = n, known
	p.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (p *pendingGauge) Describe(ch chan<- *prometheus.Desc) { ch <- p.desc }

// Collect implements prometheus.Collector: nothing while the count is
// unknown.
func (p *pendingGauge) Collect(ch chan<- prometheus.Metric) {
	p.mu.Lock()
	n, known := p.n, p.known
	p.mu.Unlock()
	if known {
		ch <- prometheus.MustNewConstMetric(p.desc, prometheus.GaugeValue, n)
	}
}
