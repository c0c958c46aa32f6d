package config

import (
	"fmt"
	"time"
)

// Sessions configures agent sessions' own policy requests (issue 6).
type Sessions struct {
	// RequestTool, when true (the default), lists the built-in MCP tool
	// toolgate__request_policy_change to agent sessions, through which a
	// session asks to change its own policy in band. false removes it (the
	// agent-side POST /v1/sessions/{id}/policy-requests stays).
	RequestTool bool `yaml:"request_tool"`
	// PolicyRequestTimeout is how long a session's widening policy request
	// waits for a decision before it expires; default 300s.
	PolicyRequestTimeout time.Duration `yaml:"policy_request_timeout"`
	// MaxPendingPolicyRequests caps one session's pending policy requests
	// (apart from its pending tool-call approvals); default 32.
	MaxPendingPolicyRequests int `yaml:"max_pending_policy_requests"`
}

// defaultSessions is the sessions section of Default.
func defaultSessions() Sessions {
	return Sessions{RequestTool: true, PolicyRequestTimeout: 300 * time.Second, MaxPendingPolicyRequests: 32}
}

// validate checks the sessions section: a positive timeout and cap.
func (s Sessions) validate() []error {
	var errs []error
	if s.PolicyRequestTimeout <= 0 {
		errs = append(errs, fmt.Errorf("sessions.policy_request_timeout %s: must be positive", s.PolicyRequestTimeout))
	}
	if s.MaxPendingPolicyRequests < 1 {
		errs = append(errs, fmt.Errorf("sessions.max_pending_policy_requests %d: must be at least 1", s.MaxPendingPolicyRequests))
	}
	return errs
}
