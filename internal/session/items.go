package session

import (
	"fmt"
	"strings"
)

// ItemKind is what a ref or a call names: a tool, a prompt or a resource
// (issue 10). KindServer is a whole server: all its tools, prompts and
// resources.
type ItemKind string

const (
	KindServer   ItemKind = ""
	KindTool     ItemKind = "tool"
	KindPrompt   ItemKind = "prompt"
	KindResource ItemKind = "resource"
)

// Ref prefixes of prompt and resource refs. Tool refs have none, as before
// issue 10.
const (
	promptPrefix   = "prompt:"
	resourcePrefix = "resource:"
)

// An Item is what a session uses: a tool, prompt or resource of a server,
// by its real name (the resource's real URI). A ref names an item or a
// group of them:
//
//	<server>                      everything of the server: tools, prompts, resources
//	<server>__<tool>              one tool
//	prompt:<server>               every prompt of the server
//	prompt:<server>__<prompt>     one prompt
//	resource:<server>             every resource of the server
//	resource:<server>:<uri>       one resource, by its exact real URI
//
// Name "" in a prompt or resource Item means all of that kind.
type Item struct {
	Kind   ItemKind
	Server string
	Name   string
}

// ToolItem is the item of tool of server; tool "" is the whole server.
func ToolItem(server, tool string) Item {
	if tool == "" {
		return Item{Server: server}
	}
	return Item{Kind: KindTool, Server: server, Name: tool}
}

// Ref returns the ref that names exactly it.
func (it Item) Ref() string {
	switch it.Kind {
	case KindTool:
		return it.Server + refSeparator + it.Name
	case KindPrompt:
		if it.Name == "" {
			return promptPrefix + it.Server
		}
		return promptPrefix + it.Server + refSeparator + it.Name
	case KindResource:
		if it.Name == "" {
			return resourcePrefix + it.Server
		}
		return resourcePrefix + it.Server + ":" + it.Name
	}
	return it.Server
}

// ParseItemRef parses a ref (see Item). Errors wrap ErrBadRef.
func ParseItemRef(ref string) (Item, error) {
	bad := func() (Item, error) {
		return Item{}, fmt.Errorf("%w: %q: want <server>, <server>__<tool>, prompt:<server>[__<prompt>] or resource:<server>[:<uri>] with server [a-z0-9][a-z0-9-]*", ErrBadRef, ref)
	}
	switch {
	case strings.HasPrefix(ref, promptPrefix):
		server, name, found := strings.Cut(strings.TrimPrefix(ref, promptPrefix), refSeparator)
		if !ValidServerName(server) || (found && name == "") {
			return bad()
		}
		return Item{Kind: KindPrompt, Server: server, Name: name}, nil
	case strings.HasPrefix(ref, resourcePrefix):
		server, uri, found := strings.Cut(strings.TrimPrefix(ref, resourcePrefix), ":")
		if !ValidServerName(server) || (found && uri == "") {
			return bad()
		}
		return Item{Kind: KindResource, Server: server, Name: uri}, nil
	}
	server, tool, err := ParseRef(ref)
	if err != nil {
		return bad()
	}
	return ToolItem(server, tool), nil
}

// group returns the ref covering every item of it's kind on its server
// ("prompt:<server>", "resource:<server>"), or "" for tools and servers.
func (it Item) group() string {
	switch it.Kind {
	case KindPrompt:
		return promptPrefix + it.Server
	case KindResource:
		return resourcePrefix + it.Server
	}
	return ""
}

// coversItem reports whether refs (an explicit level) allow it: the whole
// server's ref covers everything of it; a group ref covers its kind; an
// exact ref covers itself. A whole server (KindServer) is covered only by
// "<server>", and a whole group only by its group ref or "<server>".
func coversItem(refs []string, it Item) bool {
	for _, r := range refs {
		switch {
		case r == it.Server:
			return true
		case it.Kind == KindServer:
		case r == it.group():
			return true
		case r == it.Ref() && (it.Kind == KindTool || it.Name != ""):
			return true
		}
	}
	return false
}

// AllowsItem reports whether the session may use it: every explicit level
// must have a ref covering it (see Item). An empty chain allows nothing.
func (c Chain) AllowsItem(it Item) bool {
	if len(c) == 0 {
		return false
	}
	for _, s := range c {
		if s.Mode == ModeExplicit && !coversItem(s.Tools, it) {
			return false
		}
	}
	return true
}

// RequiresApprovalItem reports whether any level of c requires approval
// for it: require_approval true covers every tool, prompt and resource of
// the server; a list names tools only.
func (c Chain) RequiresApprovalItem(it Item) bool {
	for _, s := range c {
		r := s.RequireApproval[it.Server]
		if r.All || (it.Kind == KindTool && r.Covers(it.Name)) {
			return true
		}
	}
	return false
}

// describe names it in a widening list ("tool github__merge", "prompt
// prompt:fs__review", "server fs").
func (it Item) describe() string {
	switch it.Kind {
	case KindServer:
		return "tool " + it.Server // the wording before issue 10
	case KindTool:
		return "tool " + it.Ref()
	}
	return string(it.Kind) + " " + it.Ref()
}
