package config

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"

	"toolgate/internal/policy"
)

// zeroErrors lists the explicit zeros of the config document root that are
// refused (explicitZeros, policy.ExplicitZeros). They are validation
// problems: the document decodes.
func zeroErrors(root *yaml.Node) []error {
	if root == nil {
		return nil
	}
	errs := explicitZeros(root)
	for _, err := range policy.ExplicitZeros(mapValue(root, "policy")) {
		errs = append(errs, fmt.Errorf("policy.%w", err))
	}
	return errs
}

// explicitZeros refuses the config keys where a zero would silently mean
// the default rather than what it reads as: servers.<name>.connect_timeout
// (0 would be 30s, while call_timeout: 0 means no limit) and
// notify.channels[].max_age (0 would be 1h, not "never retry"). Omitting
// the key keeps the default. The other duration and count keys either
// refuse 0 in Validate or document what 0 means (docs/configuration.md, "What 0 means").
// Policy approval overrides are policy.ExplicitZeros'.
func explicitZeros(root *yaml.Node) []error {
	var errs []error
	eachEntry(mapValue(root, "servers"), func(name string, s *yaml.Node) {
		if v := mapValue(s, "connect_timeout"); zeroDuration(v) {
			errs = append(errs, fmt.Errorf("line %d: servers.%s.connect_timeout: %s is not allowed: it would silently mean the default 30s (call_timeout: 0 means no limit, connect_timeout has always one); omit it for 30s or write the bound wanted", v.Line, name, v.Value))
		}
	})
	if ch := mapValue(mapValue(root, "notify"), "channels"); ch != nil && ch.Kind == yaml.SequenceNode {
		for i, c := range ch.Content {
			if v := mapValue(c, "max_age"); zeroDuration(v) {
				errs = append(errs, fmt.Errorf("line %d: notify.channels[%d].max_age: %s is not allowed: it would silently mean the default %s, not \"never retry\"; omit it for %s or write how long a failing delivery is retried", v.Line, i, v.Value, DefaultMaxAge, DefaultMaxAge))
			}
		}
	}
	return errs
}

// zeroDuration reports whether n is a scalar duration that is zero.
func zeroDuration(n *yaml.Node) bool {
	if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		return false
	}
	d, err := time.ParseDuration(n.Value)
	return err == nil && d == 0
}
