package gateway

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestExposureNamesAndRoutes(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	x := buildExposure([]serverItems{
		{
			name: "a", unprefixed: true, resourcesCap: true,
			prompts:   []*mcp.Prompt{{Name: "greet"}, {Name: "only_a"}},
			resources: []*mcp.Resource{{URI: "file:///shared.txt"}, {URI: "file:///a.txt"}, {URI: "demo://b/item/7"}},
			templates: []*mcp.ResourceTemplate{{URITemplate: "db://{table}"}, {URITemplate: "a://{x}"}},
		},
		{
			name: "b", unprefixed: true, resourcesCap: true,
			prompts:   []*mcp.Prompt{{Name: "greet"}},
			resources: []*mcp.Resource{{URI: "file:///shared.txt"}},
			templates: []*mcp.ResourceTemplate{{URITemplate: "db://{table}"}, {URITemplate: "demo://b/item/{id}"}},
		},
		{
			name:    "c", // prefixed
			prompts: []*mcp.Prompt{{Name: "greet"}},
		},
	}, log)

	var prompts []string
	for _, p := range x.prompts {
		prompts = append(prompts, p.Name+"="+p.Server+"/"+p.Prompt)
	}
	if diff := cmp.Diff([]string{"a__greet=a/greet", "b__greet=b/greet", "c__greet=c/greet", "only_a=a/only_a"}, prompts); diff != "" {
		t.Errorf("prompts (-want +got):\n%s", diff)
	}
	var res []string
	for _, r := range x.resources {
		res = append(res, r.URI)
	}
	want := []string{
		"file:///a.txt",
		"toolgate://a/demo://b/item/7", // listed by a, matched by b's template
		"toolgate://a/file:///shared.txt",
		"toolgate://b/file:///shared.txt",
	}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}
	var tmpls []string
	for _, tp := range x.templates {
		tmpls = append(tmpls, tp.URITemplate)
	}
	if diff := cmp.Diff([]string{"a://{x}", "demo://b/item/{id}", "toolgate://a/db://{table}", "toolgate://b/db://{table}"}, tmpls); diff != "" {
		t.Errorf("templates (-want +got):\n%s", diff)
	}
	if len(x.clashes) != 4 {
		t.Errorf("clashes = %q, want 4 (greet, shared.txt, item/7, db template)", x.clashes)
	}

	configured := func(s string) bool { return s == "a" || s == "b" || s == "c" }
	for _, tc := range []struct {
		uri          string
		server, real string
		ambiguous    bool
		unknown      bool
	}{
		{uri: "file:///a.txt", server: "a", real: "file:///a.txt"},
		{uri: "toolgate://b/file:///shared.txt", server: "b", real: "file:///shared.txt"},
		{uri: "toolgate://a/anything", server: "a", real: "anything"},
		{uri: "file:///shared.txt", ambiguous: true},
		{uri: "demo://b/item/7", ambiguous: true},
		{uri: "demo://b/item/8", server: "b", real: "demo://b/item/8"},
		{uri: "a://zz", server: "a", real: "a://zz"},
		{uri: "db://users", unknown: true}, // both templates are namespaced
		{uri: "toolgate://zz/x", unknown: true},
		{uri: "nobody://x", unknown: true}, // two servers offer resources
	} {
		s, r, ok, err := x.route(tc.uri, configured)
		var amb *errAmbiguousURI
		switch {
		case tc.ambiguous:
			if !errors.As(err, &amb) || ok {
				t.Errorf("route(%q) = %q %q %v %v, want ambiguous", tc.uri, s, r, ok, err)
			}
		case tc.unknown:
			if ok || err != nil {
				t.Errorf("route(%q) = %q %q %v %v, want unknown", tc.uri, s, r, ok, err)
			}
		default:
			if !ok || err != nil || s != tc.server || r != tc.real {
				t.Errorf("route(%q) = %q %q %v %v, want %q %q", tc.uri, s, r, ok, err, tc.server, tc.real)
			}
		}
	}
	if got := x.exposedURI("b", "demo://b/item/8"); got != "demo://b/item/8" {
		t.Errorf("exposedURI(b, item/8) = %q", got)
	}
	if got := x.exposedURI("a", "file:///shared.txt"); got != "toolgate://a/file:///shared.txt" {
		t.Errorf("exposedURI(a, shared) = %q", got)
	}

	// One server with resources answers URIs nobody lists.
	one := buildExposure([]serverItems{{name: "fs", resourcesCap: true}}, log)
	if s, r, ok, err := one.route("file:///x", configured); !ok || err != nil || s != "fs" || r != "file:///x" {
		t.Errorf("single-server fallback = %q %q %v %v", s, r, ok, err)
	}
}
