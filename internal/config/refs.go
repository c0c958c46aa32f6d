package config

import (
	"fmt"
	"slices"

	"go.yaml.in/yaml/v3"

	"toolgate/internal/policy"
)

// VarRefs records the ${VAR}s a config file referenced in the places that
// matter for keeping secrets away from upstreams (issue 9): the variables
// behind storage.dsn and behind HTTP upstreams' header values hold
// toolgate's credentials, and a stdio server's env value that references
// one of them would hand it over. Load fills it; maps stay nil when
// nothing was referenced.
type VarRefs struct {
	// Secret maps a variable referenced in storage.dsn or in a
	// servers.<name>.headers value to that key's path.
	Secret map[string]string
	// Headers holds the servers.<name>.headers.<key> paths whose value
	// references a variable.
	Headers map[string]bool
	// Env maps servers.<name>.env.<KEY> paths to the variables the value
	// references.
	Env map[string][]string
	// Cmd maps servers.<name>.command, .args[<i>] and .dir paths to the
	// variables the value references: a stdio server's command line is
	// handed to it (and shown to every local user) as its env is
	// (attack20).
	Cmd map[string][]string
}

// collectRefs scans the parsed (not yet expanded) document for the
// references VarRefs keeps. Aliases and merge keys are followed, as the
// decoder applies them (eachEntry, mapValue).
func collectRefs(root *yaml.Node) VarRefs {
	var refs VarRefs
	secret := func(name, path string) {
		if refs.Secret == nil {
			refs.Secret = map[string]string{}
		}
		if _, seen := refs.Secret[name]; !seen {
			refs.Secret[name] = path
		}
	}
	storage := mapValue(root, "storage")
	if dsn := mapValue(storage, "dsn"); dsn != nil {
		for _, v := range referenced(dsn) {
			secret(v, "storage.dsn")
		}
	}
	// The servers as the decoder has them: merged ones too ("servers:
	// {<<: …}").
	eachEntry(mapValue(root, "servers"), func(name string, srv *yaml.Node) {
		eachEntry(mapValue(srv, "headers"), func(key string, v *yaml.Node) {
			path := "servers." + name + ".headers." + key
			for _, ref := range referenced(v) {
				if refs.Headers == nil {
					refs.Headers = map[string]bool{}
				}
				refs.Headers[path] = true
				secret(ref, path)
			}
		})
		eachEntry(mapValue(srv, "env"), func(key string, v *yaml.Node) {
			if names := referenced(v); len(names) > 0 {
				if refs.Env == nil {
					refs.Env = map[string][]string{}
				}
				refs.Env["servers."+name+".env."+key] = names
			}
		})
		cmd := func(path string, v *yaml.Node) {
			if names := referenced(deref(v)); len(names) > 0 {
				if refs.Cmd == nil {
					refs.Cmd = map[string][]string{}
				}
				refs.Cmd[path] = names
			}
		}
		cmd("servers."+name+".command", mapValue(srv, "command"))
		cmd("servers."+name+".dir", mapValue(srv, "dir"))
		if args := mapValue(srv, "args"); args != nil && args.Kind == yaml.SequenceNode {
			for i, a := range args.Content {
				cmd(fmt.Sprintf("servers.%s.args[%d]", name, i), a)
			}
		}
	})
	return refs
}

// deref follows an alias node to what it names.
func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// mapValue returns the value of key in mapping n, or nil; a key n merges
// ("<<: *anchor") counts as the decoder has it (policy.MappingValue).
func mapValue(n *yaml.Node, key string) *yaml.Node {
	return deref(policy.MappingValue(n, key))
}

// eachEntry calls f for each key and value of mapping n (nothing when n is
// not a mapping) as the decoder has them: n's own keys, then those of the
// mappings it merges ("<<: *a", "<<: [*a, *b]", in order, recursively)
// that no earlier one has (attack18: a ${VAR} in a merged header is a
// reference too).
func eachEntry(n *yaml.Node, f func(key string, v *yaml.Node)) {
	eachMerged(n, map[string]bool{}, f, 0)
}

func eachMerged(n *yaml.Node, seen map[string]bool, f func(key string, v *yaml.Node), depth int) {
	n = deref(n)
	if n == nil || n.Kind != yaml.MappingNode || depth > maxMergeDepth {
		return
	}
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind == yaml.ScalarNode && k.Value == "<<" && k.ShortTag() == "!!merge" {
			merges = append(merges, n.Content[i+1])
			continue
		}
		if seen[k.Value] {
			continue
		}
		seen[k.Value] = true
		f(k.Value, deref(n.Content[i+1]))
	}
	for _, m := range merges {
		list := []*yaml.Node{m}
		if m = deref(m); m != nil && m.Kind == yaml.SequenceNode {
			list = m.Content
		}
		for _, e := range list {
			eachMerged(e, seen, f, depth+1)
		}
	}
}

// maxMergeDepth bounds how deep eachEntry follows merges of merges (a
// document that parsed has no cycle; this only bounds the work).
const maxMergeDepth = 64

// referenced lists the variable names a scalar's ${NAME} and
// ${NAME:-default} forms reference, in order, without duplicates.
func referenced(n *yaml.Node) []string {
	if n == nil || n.Kind != yaml.ScalarNode {
		return nil
	}
	var names []string
	expandString(n.Value, func(name string) (string, bool) {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
		return "", true
	})
	return names
}
