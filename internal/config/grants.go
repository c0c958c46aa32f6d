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
	// Enabled is whether grants may be made and used at all (default
	// true). false turns them off for the whole deployment: an approve
	// with grant terms is refused (409 grants_forbidden) and no grant,
	// even one made before, admits a call. A rule's approval.grants: false
	// turns them off for the calls it decides. Read at start (a reload
	// does not change it).
	Enabled bool `yaml:"enabled"`
}

// defaultGrants is the grants section of Default.
func defaultGrants() Grants { return Grants{MaxTTL: 24 * time.Hour, Enabled: true} }

// validate checks the grants section: a positive max_ttl.
func (g Grants) validate() []error {
	if g.MaxTTL <= 0 {
		return []error{fmt.Errorf("grants.max_ttl %s: must be positive", g.MaxTTL)}
	}
	return nil
}
