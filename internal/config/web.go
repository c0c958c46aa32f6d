package config

import (
	"fmt"
	"strings"
	"time"
)

// Web configures the approver web inbox served at /ui/ on the admin
// listener (issue 14).
type Web struct {
	// SessionTTL is how long a sign-in lasts: the session cookie and its
	// row in the store expire after it; default 12h.
	SessionTTL time.Duration `yaml:"session_ttl"`
}

// defaultWeb is the web section of Default.
func defaultWeb() Web { return Web{SessionTTL: 12 * time.Hour} }

// validate checks the web section: a session lifetime from 1 minute to 30
// days.
func (w Web) validate() []error {
	if w.SessionTTL < time.Minute || w.SessionTTL > 30*24*time.Hour {
		return []error{fmt.Errorf("web.session_ttl %s: want 1m to 720h", w.SessionTTL)}
	}
	return nil
}

// PublicURL returns approvals.public_url without its trailing slashes.
func (c Config) PublicURL() string { return strings.TrimRight(c.Approvals.PublicURL, "/") }
