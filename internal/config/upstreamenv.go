package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// BaseEnv lists the variables of toolgate's own environment that every
// stdio upstream gets when they are set, besides every LC_* variable: what
// a program needs to find binaries, its home and temporary directory, and
// to speak the user's locale and time zone. Everything else must be given
// in servers.<name>.env or named in servers.<name>.env_passthrough.
var BaseEnv = []string{"PATH", "HOME", "LANG", "TMPDIR", "USER", "TZ"}

// inBaseEnv reports whether name is passed to every stdio upstream.
func inBaseEnv(name string) bool {
	return slices.Contains(BaseEnv, name) || strings.HasPrefix(name, "LC_")
}

// UpstreamEnvs returns the complete environment of every stdio server in c,
// by server name, computed from toolgate's environment environ (as
// os.Environ returns it, "NAME=value"): the set BaseEnv variables, then
// the set variables env_passthrough names, then the server's env (which
// wins). Nothing else of toolgate's environment is passed.
//
// It never passes a secret (see [Config.Secrets]): it returns an error,
// naming the key, when a server's env value, a passed-through variable's
// value or a part of its command line (command, args, dir) is one, or when env_passthrough names a variable that holds one;
// a BaseEnv variable whose value is a secret is left out and listed in
// dropped ("servers.fs: USER"), for serve to log. The error joins every
// problem. Validate already refuses what can be seen without the
// environment (a token_env set in env or named in env_passthrough).
func (c Config) UpstreamEnvs(environ []string, s *Secrets) (envs map[string]map[string]string, dropped []string, err error) {
	own := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			if _, dup := own[k]; !dup { // the first one wins, as for getenv
				own[k] = v
			}
		}
	}
	envs = map[string]map[string]string{}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(c.Servers)) {
		srv := c.Servers[name]
		if srv.Command == "" {
			continue
		}
		where := "servers." + name
		env := map[string]string{}
		for _, k := range slices.Sorted(maps.Keys(own)) {
			if !inBaseEnv(k) {
				continue
			}
			if _, secret := s.Match(own[k]); secret {
				dropped = append(dropped, where+": "+k)
				continue
			}
			if _, secret := s.Name(k); secret {
				dropped = append(dropped, where+": "+k)
				continue
			}
			env[k] = own[k]
		}
		for _, k := range srv.EnvPassthrough {
			if what, secret := s.Name(k); secret {
				errs = append(errs, fmt.Errorf("%s.env_passthrough: %s holds %s; toolgate never passes its secrets to an upstream", where, k, what))
				continue
			}
			v, set := own[k]
			if !set {
				continue
			}
			if what, secret := s.Match(v); secret {
				errs = append(errs, fmt.Errorf("%s.env_passthrough: the value of %s %s %s; toolgate never passes its secrets to an upstream", where, k, s.isOrHolds(v), what))
				continue
			}
			env[k] = v
		}
		for _, k := range slices.Sorted(maps.Keys(srv.Env)) {
			if what, secret := s.Match(srv.Env[k]); secret {
				errs = append(errs, fmt.Errorf("%s.env.%s: the value %s %s; toolgate never passes its secrets to an upstream", where, k, s.isOrHolds(srv.Env[k]), what))
				continue
			}
			env[k] = srv.Env[k]
		}
		// Its command line too (attack20): the server gets it, and every
		// local user sees it.
		line := map[string]string{where + ".command": srv.Command, where + ".dir": srv.Dir}
		for i, a := range srv.Args {
			line[fmt.Sprintf("%s.args[%d]", where, i)] = a
		}
		for _, path := range slices.Sorted(maps.Keys(line)) {
			if what, secret := s.Match(line[path]); secret {
				errs = append(errs, fmt.Errorf("%s: the value is or holds %s; toolgate never passes its secrets to an upstream", path, what))
			}
		}
		envs[name] = env
	}
	if len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	return envs, dropped, nil
}

// validateServerEnv checks what can be seen of a stdio server's environment
// without toolgate's environment: env_passthrough entries are variable
// names, given once, not also set in env, and not holding a secret
// (secretNames); env does not set a token variable (tokenEnvNames) and its
// values do not reference a variable that holds a secret.
func (c Config) validateServerEnv(name string, s Server, secretNames, tokenNames map[string]string) []error {
	var errs []error
	where := "servers." + name
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	seen := map[string]bool{}
	for i, k := range s.EnvPassthrough {
		switch {
		case !validVarName(k):
			add("%s.env_passthrough[%d] %q: not a variable name", where, i, k)
		case seen[k]:
			add("%s.env_passthrough[%d]: %s is listed twice", where, i, k)
		default:
			if _, set := s.Env[k]; set {
				add("%s.env_passthrough[%d]: %s is also set in env; keep one", where, i, k)
			}
			if what, secret := secretNames[k]; secret {
				add("%s.env_passthrough: %s holds %s; toolgate never passes its secrets to an upstream", where, k, what)
			}
		}
		seen[k] = true
	}
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		if what, secret := tokenNames[k]; secret {
			add("%s.env.%s: %s is the variable of %s; an upstream must never receive it", where, k, k, what)
			continue
		}
		for _, ref := range c.Refs.Env[where+".env."+k] {
			if what, secret := secretNames[ref]; secret {
				add("%s.env.%s: references ${%s}, which holds %s; toolgate never passes its secrets to an upstream", where, k, ref, what)
			}
		}
	}
	// Its command line too: the server gets it, and every local user
	// sees it (attack20).
	paths := []string{where + ".command"}
	for i := range s.Args {
		paths = append(paths, fmt.Sprintf("%s.args[%d]", where, i))
	}
	for _, path := range append(paths, where+".dir") {
		for _, ref := range c.Refs.Cmd[path] {
			if what, secret := secretNames[ref]; secret {
				add("%s: references ${%s}, which holds %s; toolgate never passes its secrets to an upstream", path, ref, what)
			}
		}
	}
	return errs
}
