package config

import (
	"fmt"
	"time"
)

// Grants configures remembered grants (issue 12): approvers may attach a
// grant to an approval ("allow this principal to call this tool, for D, at
// most N times, for arguments matching a condition").
type Grants struct {
	// MaxTTL is the longest duration D of a grant. A longer one is refused
	// (the admin API answers 422), never shortened. Default 24h.
	MaxTTL time.Duration `yaml:"max_ttl"`
}

// defaultGrants is the grants section of Default.
func defaultGrants() Grants { return Grants{MaxTTL: 24 * time.Hour} }

// validate checks the grants section: a positive max_ttl.
func (g Grants) validate() []error {
	if g.MaxTTL <= 0 {
		return []error{fmt.Errorf("grants.max_ttl %s: must be positive", g.MaxTTL)}
	}
	return nil
}
