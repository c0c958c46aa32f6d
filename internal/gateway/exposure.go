package gateway

import (
	"cmp"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/yosida95/uritemplate/v3"
)

// namespacePrefix starts the namespaced form of a resource URI or URI
// template: "toolgate://<server>/<real uri>". toolgate exposes a resource
// (or template) in that form when two servers claim it, and accepts the
// form for any resource of any server.
const namespacePrefix = "toolgate://"

// NamespacedURI returns the namespaced form of a real resource URI (or URI
// template) of server.
func NamespacedURI(server, uri string) string {
	return namespacePrefix + server + "/" + uri
}

// splitNamespaced splits a namespaced URI into its server and real URI; ok
// is false when uri is not in that form.
func splitNamespaced(uri string) (server, real string, ok bool) {
	rest, found := strings.CutPrefix(uri, namespacePrefix)
	if !found {
		return "", "", false
	}
	server, real, found = strings.Cut(rest, "/")
	if !found || !validServerName(server) || real == "" {
		return "", "", false
	}
	return server, real, true
}

// A Prompt is one exposed prompt.
type Prompt struct {
	// Name is the exposed name: "<server>__<prompt>", or the prompt's own
	// name for a server with tool_prefix: false (unless another server
	// exposes it too, then both are prefixed).
	Name   string
	Server string
	Prompt string // the real name
	// Digest is the digest of the definition, as for tools; an approval of
	// a prompts/get is bound to it.
	Digest     string
	Definition *mcp.Prompt
}

// A Resource is one exposed resource.
type Resource struct {
	URI        string // exposed: the real URI, or its namespaced form
	Server     string
	Real       string // the real URI
	Definition *mcp.Resource
}

// A Template is one exposed resource template.
type Template struct {
	URITemplate string // exposed: the real template, or its namespaced form
	Server      string
	Real        string
	Definition  *mcp.ResourceTemplate
	re          *regexp.Regexp // matches URIs of the real template; nil if it does not parse
}

// serverItems is what one upstream lists besides tools.
type serverItems struct {
	name       string
	unprefixed bool
	// resourcesCap and promptsCap: the server offers the feature (its
	// initialize result says so).
	resourcesCap, promptsCap bool
	prompts                  []*mcp.Prompt
	resources                []*mcp.Resource
	templates                []*mcp.ResourceTemplate
}

// An exposure is the immutable view of every server's prompts, resources
// and templates as agents see them. Build one with buildExposure.
type exposure struct {
	prompts   []Prompt // sorted by Name
	byPrompt  map[string]int
	resources []Resource // sorted by URI
	byURI     map[string]int
	templates []Template // sorted by URITemplate
	byTmpl    map[string]int
	// resourceServers lists the servers that offer resources, sorted.
	resourceServers []string
	// clashes describes every name claimed by two servers, for the log.
	clashes []string
}

// buildExposure names every server's prompts, resources and templates.
// Prompts are named like tools; a name that two servers would expose
// unprefixed is exposed prefixed for both. A resource URI listed by two
// servers, or listed by one and matching another's template, and a URI
// template listed by two, is exposed in the namespaced form for every
// server claiming it; the clash is reported in clashes. servers must be
// sorted by name.
func buildExposure(servers []serverItems, log *slog.Logger) *exposure {
	x := &exposure{byPrompt: map[string]int{}, byURI: map[string]int{}, byTmpl: map[string]int{}}

	// Prompts.
	plain := map[string][]string{} // unprefixed name → servers
	for _, s := range servers {
		if s.unprefixed {
			for _, p := range s.prompts {
				plain[p.Name] = append(plain[p.Name], s.name)
			}
		}
	}
	for _, s := range servers {
		seen := map[string]bool{}
		for _, p := range s.prompts {
			if seen[p.Name] {
				x.clashes = append(x.clashes, fmt.Sprintf("server %q lists prompt %q twice; not exposed", s.name, p.Name))
				continue
			}
			seen[p.Name] = true
			name := ExposedName(s.name, p.Name)
			if s.unprefixed {
				if len(plain[p.Name]) == 1 {
					name = p.Name
				} else if s.name == plain[p.Name][0] {
					x.clashes = append(x.clashes, fmt.Sprintf("prompt %q is listed by servers %q; exposed as <server>__%s", p.Name, plain[p.Name], p.Name))
				}
			}
			digest, err := digestOf(p)
			if err != nil {
				log.Warn("prompt not exposed", "server", s.name, "prompt", p.Name, "err", err)
				continue
			}
			x.prompts = append(x.prompts, Prompt{Name: name, Server: s.name, Prompt: p.Name, Digest: digest, Definition: p})
		}
	}
	slices.SortFunc(x.prompts, func(a, b Prompt) int { return cmp.Compare(a.Name, b.Name) })
	x.prompts = slices.CompactFunc(x.prompts, func(a, b Prompt) bool {
		if a.Name == b.Name {
			x.clashes = append(x.clashes, fmt.Sprintf("prompt name %q is exposed by servers %q and %q; neither is exposed under it", a.Name, a.Server, b.Server))
		}
		return a.Name == b.Name
	})
	for i, p := range x.prompts {
		x.byPrompt[p.Name] = i
	}

	// Templates: a template string claimed by two servers is namespaced.
	tmplServers := map[string][]string{}
	for _, s := range servers {
		for _, t := range s.templates {
			if !slices.Contains(tmplServers[t.URITemplate], s.name) {
				tmplServers[t.URITemplate] = append(tmplServers[t.URITemplate], s.name)
			}
		}
	}
	type plainTmpl struct {
		server string
		re     *regexp.Regexp
	}
	var plainTmpls []plainTmpl
	for _, s := range servers {
		seen := map[string]bool{}
		for _, t := range s.templates {
			if seen[t.URITemplate] {
				continue
			}
			seen[t.URITemplate] = true
			var re *regexp.Regexp
			if ut, err := uritemplate.New(t.URITemplate); err == nil {
				re = ut.Regexp()
			} else {
				log.Warn("resource template does not parse; it is listed but no URI matches it", "server", s.name, "template", t.URITemplate, "err", err)
			}
			exp := t.URITemplate
			if n := tmplServers[t.URITemplate]; len(n) > 1 {
				exp = NamespacedURI(s.name, t.URITemplate)
				if s.name == n[0] {
					x.clashes = append(x.clashes, fmt.Sprintf("resource template %q is listed by servers %q; exposed as %s<server>/%s", t.URITemplate, n, namespacePrefix, t.URITemplate))
				}
			} else if re != nil {
				plainTmpls = append(plainTmpls, plainTmpl{server: s.name, re: re})
			}
			x.templates = append(x.templates, Template{URITemplate: exp, Server: s.name, Real: t.URITemplate, Definition: t, re: re})
		}
	}
	slices.SortFunc(x.templates, func(a, b Template) int { return cmp.Compare(a.URITemplate, b.URITemplate) })
	for i, t := range x.templates {
		x.byTmpl[t.URITemplate] = i
	}

	// Resources: a URI listed by two servers, or by one and matching
	// another's template, is namespaced for every server listing it.
	claims := map[string][]string{}
	for _, s := range servers {
		for _, r := range s.resources {
			if !slices.Contains(claims[r.URI], s.name) {
				claims[r.URI] = append(claims[r.URI], s.name)
			}
		}
	}
	for uri, srvs := range claims {
		for _, pt := range plainTmpls {
			if !slices.Contains(srvs, pt.server) && pt.re.MatchString(uri) {
				claims[uri] = append(claims[uri], pt.server)
			}
		}
	}
	for _, s := range servers {
		if s.resourcesCap {
			x.resourceServers = append(x.resourceServers, s.name)
		}
		seen := map[string]bool{}
		for _, r := range s.resources {
			if seen[r.URI] {
				continue
			}
			seen[r.URI] = true
			exp := r.URI
			if n := claims[r.URI]; len(n) > 1 {
				exp = NamespacedURI(s.name, r.URI)
				if s.name == n[0] {
					x.clashes = append(x.clashes, fmt.Sprintf("resource %q is claimed by servers %q; exposed as %s<server>/%s", r.URI, n, namespacePrefix, r.URI))
				}
			}
			x.resources = append(x.resources, Resource{URI: exp, Server: s.name, Real: r.URI, Definition: r})
		}
	}
	slices.SortFunc(x.resources, func(a, b Resource) int { return cmp.Compare(a.URI, b.URI) })
	for i, r := range x.resources {
		x.byURI[r.URI] = i
	}
	slices.Sort(x.clashes)
	return x
}

// prompt returns the exposed prompt name.
func (x *exposure) prompt(name string) (Prompt, bool) {
	i, ok := x.byPrompt[name]
	if !ok {
		return Prompt{}, false
	}
	return x.prompts[i], true
}

// promptByReal returns the exposed prompt of server with real name.
func (x *exposure) promptByReal(server, name string) (Prompt, bool) {
	for _, p := range x.prompts {
		if p.Server == server && p.Prompt == name {
			return p, true
		}
	}
	return Prompt{}, false
}

// errAmbiguousURI is returned by route for a URI that templates of several
// servers match.
type errAmbiguousURI struct {
	uri     string
	servers []string
}

func (e *errAmbiguousURI) Error() string {
	return fmt.Sprintf("resource URI %q matches resource templates of servers %q; name one with %s<server>/%s", e.uri, e.servers, namespacePrefix, e.uri)
}

// route finds the server and real URI of an exposed resource URI: the
// namespaced form names them; else an exposed resource with that URI;
// else the one server whose (plain) template matches it; else the only
// server offering resources, if there is exactly one (it answers unknown
// URIs itself). ok is false when no server claims uri; err is set when
// several do (*errAmbiguousURI), also for a URI that is listed only in
// namespaced form.
func (x *exposure) route(uri string, configured func(string) bool) (server, real string, ok bool, err error) {
	if s, r, isNS := splitNamespaced(uri); isNS && configured(s) {
		return s, r, true, nil
	}
	if i, found := x.byURI[uri]; found {
		r := x.resources[i]
		return r.Server, r.Real, true, nil
	}
	// A URI listed only in namespaced form (claimed by two servers) is
	// never routed plainly: the caller must name the server.
	if x.listedElsewhere(uri) {
		return "", "", false, &errAmbiguousURI{uri: uri, servers: x.serversListing(uri)}
	}
	var servers []string
	for _, t := range x.templates {
		if t.URITemplate != t.Real || t.re == nil {
			continue // namespaced templates take namespaced URIs
		}
		if t.re.MatchString(uri) && !slices.Contains(servers, t.Server) {
			servers = append(servers, t.Server)
		}
	}
	switch len(servers) {
	case 1:
		return servers[0], uri, true, nil
	case 0:
	default:
		slices.Sort(servers)
		return "", "", false, &errAmbiguousURI{uri: uri, servers: servers}
	}
	if len(x.resourceServers) == 1 {
		return x.resourceServers[0], uri, true, nil
	}
	return "", "", false, nil
}

// serversListing returns the servers that list real URI uri.
func (x *exposure) serversListing(uri string) []string {
	var out []string
	for _, r := range x.resources {
		if r.Real == uri {
			out = append(out, r.Server)
		}
	}
	slices.Sort(out)
	return out
}

// listedElsewhere reports whether uri is listed under a namespaced form,
// which must then be used.
func (x *exposure) listedElsewhere(uri string) bool {
	for _, r := range x.resources {
		if r.Real == uri && r.URI != r.Real {
			return true
		}
	}
	return false
}

// exposedURI returns the URI under which an agent knows real URI uri of
// server: the plain URI when routing it plainly reaches server, else the
// namespaced form.
func (x *exposure) exposedURI(server, uri string) string {
	if s, _, ok, err := x.route(uri, func(string) bool { return false }); ok && err == nil && s == server {
		return uri
	}
	return NamespacedURI(server, uri)
}

// template returns the exposed template with that exposed URI template.
func (x *exposure) template(exposed string) (Template, bool) {
	i, ok := x.byTmpl[exposed]
	if !ok {
		return Template{}, false
	}
	return x.templates[i], true
}
