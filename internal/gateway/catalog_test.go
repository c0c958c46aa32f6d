package gateway

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestListExposedNames(t *testing.T) {
	// Two servers with overlapping tool names (case C05): both listed,
	// namespaced, in a deterministic order.
	srvA := mcp.NewServer(&mcp.Implementation{Name: "a"}, nil)
	srvB := mcp.NewServer(&mcp.Implementation{Name: "b"}, nil)
	for _, name := range []string{"send_email", "read"} {
		srvA.AddTool(&mcp.Tool{Name: name, InputSchema: objectSchema}, nil)
		srvB.AddTool(&mcp.Tool{Name: name, InputSchema: objectSchema}, nil)
	}
	g := newGateway(t, []ServerConfig{
		{Name: "outlook", URL: httpUpstream(t, srvB)},
		{Name: "gmail", URL: httpUpstream(t, srvA)},
	}, allowAll(), nil)
	cs := connectHTTP(t, serveHTTP(t, g, nil), aliceToken, nil, nil)

	for range 2 { // the order is the same every time
		res, err := cs.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, tl := range res.Tools {
			got = append(got, tl.Name)
		}
		want := []string{"gmail__read", "gmail__send_email", "outlook__read", "outlook__send_email"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("tools/list names (-want +got):\n%s", diff)
		}
	}

	var cat []string
	for _, tl := range g.Catalog() {
		cat = append(cat, tl.Server+"/"+tl.Tool+"="+tl.Name)
		if d, ok := g.ToolDigest(tl.Server, tl.Tool); !ok || d != tl.Digest || !strings.HasPrefix(d, "sha256:") {
			t.Errorf("ToolDigest(%s, %s) = %q, %v; want %q", tl.Server, tl.Tool, d, ok, tl.Digest)
		}
	}
	want := []string{"gmail/read=gmail__read", "gmail/send_email=gmail__send_email", "outlook/read=outlook__read", "outlook/send_email=outlook__send_email"}
	if diff := cmp.Diff(want, cat); diff != "" {
		t.Errorf("Catalog (-want +got):\n%s", diff)
	}
	if _, ok := g.ToolDigest("gmail", "nope"); ok {
		t.Error("ToolDigest of an unknown tool: ok")
	}
}

func TestDuplicateExposedNameIsStartupError(t *testing.T) {
	// An upstream that lists one tool twice cannot be exposed without hiding
	// one of them.
	srv := mcp.NewServer(&mcp.Implementation{Name: "dup"}, nil)
	srv.AddTool(&mcp.Tool{Name: "send", InputSchema: objectSchema}, nil)
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if lr, ok := res.(*mcp.ListToolsResult); ok && err == nil {
				lr.Tools = append(lr.Tools, lr.Tools[0])
			}
			return res, err
		}
	})
	_, err := New(t.Context(), []ServerConfig{{Name: "mail", URL: httpUpstream(t, srv)}}, allowAll(), nil)
	if err == nil || !strings.Contains(err.Error(), "mail__send") {
		t.Fatalf("New = %v, want an error naming mail__send", err)
	}
}

func TestLongExposedNameSkipped(t *testing.T) {
	long := strings.Repeat("x", MaxExposedNameLength-len("srv__")+1)
	srv := mcp.NewServer(&mcp.Implementation{Name: "long"}, nil)
	srv.AddTool(&mcp.Tool{Name: long, InputSchema: objectSchema}, nil)
	srv.AddTool(&mcp.Tool{Name: "short", InputSchema: objectSchema}, nil)
	var logs logBuffer
	g := newGateway(t, []ServerConfig{{Name: "srv", URL: httpUpstream(t, srv)}}, allowAll(), &Options{Logger: logs.logger()})

	var names []string
	for _, tl := range g.Catalog() {
		names = append(names, tl.Name)
	}
	if diff := cmp.Diff([]string{"srv__short"}, names); diff != "" {
		t.Errorf("catalog (-want +got):\n%s", diff)
	}
	if !strings.Contains(logs.String(), "srv__"+long) || !strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("no warning naming srv__%s in logs:\n%s", long, logs.String())
	}
}

func TestBuildTools(t *testing.T) {
	tool := func(name string) *mcp.Tool { return &mcp.Tool{Name: name, InputSchema: objectSchema} }
	tests := []struct {
		name     string
		defs     []*mcp.Tool
		want     []string
		wantDups []string
	}{
		{name: "plain", defs: []*mcp.Tool{tool("a"), tool("b")}, want: []string{"s__a", "s__b"}},
		{name: "tool name with separator", defs: []*mcp.Tool{tool("x__y")}, want: []string{"s__x__y"}},
		{name: "duplicate", defs: []*mcp.Tool{tool("a"), tool("b"), tool("a")}, want: []string{"s__b"}, wantDups: []string{"s__a"}},
		{name: "64 characters", defs: []*mcp.Tool{tool(strings.Repeat("y", 61))}, want: []string{"s__" + strings.Repeat("y", 61)}},
		{name: "65 characters", defs: []*mcp.Tool{tool(strings.Repeat("y", 62))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tools, dups := buildTools("s", false, upstreamTools{defs: tt.defs}, slog.New(slog.DiscardHandler))
			var got []string
			for _, tl := range tools {
				got = append(got, tl.Name)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("names (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantDups, dups); diff != "" {
				t.Errorf("dups (-want +got):\n%s", diff)
			}
		})
	}
}

func TestToolDigest(t *testing.T) {
	base := &mcp.Tool{Name: "t", Description: "d", InputSchema: map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "string"}}}}
	same := &mcp.Tool{Name: "t", Description: "d", InputSchema: map[string]any{"properties": map[string]any{"a": map[string]any{"type": "string"}}, "type": "object"}}
	changed := &mcp.Tool{Name: "t", Description: "d2", InputSchema: base.InputSchema}
	d1, err := ToolDigestOf(base)
	if err != nil {
		t.Fatal(err)
	}
	d2, _ := ToolDigestOf(same)
	d3, _ := ToolDigestOf(changed)
	if d1 != d2 {
		t.Errorf("digest depends on key order: %s vs %s", d1, d2)
	}
	if d1 == d3 {
		t.Errorf("digest ignores the description: %s", d1)
	}
	if !strings.HasPrefix(d1, "sha256:") || len(d1) != len("sha256:")+64 {
		t.Errorf("digest %q: want sha256:<64 hex>", d1)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name    string
		servers []ServerConfig
	}{
		{name: "underscore", servers: []ServerConfig{{Name: "a_b", URL: "http://127.0.0.1:1/mcp"}}},
		{name: "separator", servers: []ServerConfig{{Name: "a__b", URL: "http://127.0.0.1:1/mcp"}}},
		{name: "empty", servers: []ServerConfig{{Name: "", URL: "http://127.0.0.1:1/mcp"}}},
		{name: "both", servers: []ServerConfig{{Name: "a", URL: "http://127.0.0.1:1/mcp", Command: "x"}}},
		{name: "neither", servers: []ServerConfig{{Name: "a"}}},
		{name: "twice", servers: []ServerConfig{{Name: "a", Command: "x"}, {Name: "a", Command: "y"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if g, err := New(t.Context(), tt.servers, allowAll(), nil); err == nil {
				_ = g.Close()
				t.Fatal("New succeeded")
			}
		})
	}
}

func TestUnprefixedServer(t *testing.T) {
	mk := func(tools ...string) string {
		srv := mcp.NewServer(&mcp.Implementation{Name: "u"}, nil)
		for _, name := range tools {
			srv.AddTool(&mcp.Tool{Name: name, InputSchema: objectSchema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
		}
		return httpUpstream(t, srv)
	}
	g := newGateway(t, []ServerConfig{
		{Name: "gmail", URL: mk("send_email"), Unprefixed: true},
		{Name: "outlook", URL: mk("send_email")},
	}, allowAll(), nil)
	var names []string
	for _, tl := range g.Catalog() {
		names = append(names, tl.Name+"="+tl.Server+"/"+tl.Tool)
	}
	if want := []string{"outlook__send_email=outlook/send_email", "send_email=gmail/send_email"}; !slices.Equal(names, want) {
		t.Fatalf("catalog %v, want %v", names, want)
	}
	if _, ok := g.ToolDigest("gmail", "send_email"); !ok {
		t.Error("ToolDigest(gmail, send_email) not found")
	}
	// Two unprefixed servers with one name: a startup error, never an overwrite (C05).
	_, err := New(t.Context(), []ServerConfig{
		{Name: "gmail", URL: mk("send_email"), Unprefixed: true},
		{Name: "outlook", URL: mk("send_email"), Unprefixed: true},
	}, allowAll(), nil)
	if err == nil || !strings.Contains(err.Error(), "send_email") {
		t.Fatalf("New = %v, want an error naming send_email", err)
	}
}
