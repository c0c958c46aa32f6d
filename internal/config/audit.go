package config

import (
	"errors"
	"fmt"
	"time"
)

// Audit configures the audit trail (issue 14, package audit,
// docs/audit.md).
type Audit struct {
	// QueueSize bounds the calls decided without an approval that wait in
	// memory to be chained; a call decided while it is full is not
	// recorded and counts in toolgate_audit_dropped_total. Default 4096.
	QueueSize int `yaml:"queue_size"`
	// Poll is how often the chain looks for new events when the store's
	// change feed has not woken it. Default 5s.
	Poll time.Duration `yaml:"poll"`
	// Retention, when set, prunes links older than it (hourly), keeping
	// the last pruned link's hash as the chain's anchor. Default 0: keep
	// every link.
	Retention time.Duration `yaml:"retention"`
}

func defaultAudit() Audit { return Audit{QueueSize: 4096, Poll: 5 * time.Second} }

// maxAuditQueue caps audit.queue_size (each queued call keeps its argument
// bytes in memory until chained).
const maxAuditQueue = 1 << 20

func (a Audit) validate() []error {
	var errs []error
	if a.QueueSize < 1 || a.QueueSize > maxAuditQueue {
		errs = append(errs, fmt.Errorf("audit.queue_size: %d, want 1 to %d", a.QueueSize, maxAuditQueue))
	}
	if a.Poll <= 0 {
		errs = append(errs, errors.New("audit.poll: must be positive"))
	}
	if a.Retention < 0 {
		errs = append(errs, errors.New("audit.retention: must not be negative (0 keeps every link)"))
	} else if a.Retention > 0 && a.Retention < time.Hour {
		errs = append(errs, fmt.Errorf("audit.retention: %v is under an hour; pruning runs hourly", a.Retention))
	}
	return errs
}
