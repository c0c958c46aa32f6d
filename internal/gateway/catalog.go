package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
)

// MaxExposedNameLength is the longest exposed tool name, in characters;
// longer names are not exposed and a warning names them (DESIGN, config keys).
const MaxExposedNameLength = 64

// nameSeparator joins a server name and a tool name into an exposed name.
const nameSeparator = "__"

// Tool is one exposed tool of the catalog.
type Tool struct {
	// Name is the exposed name, "<server>__<tool>".
	Name string
	// Server and Tool are the real identity policy is evaluated against.
	Server string
	Tool   string
	// Digest is "sha256:" + the lowercase hex SHA-256 of the canonical JSON
	// (approval.Canonicalize) of Definition; an approval is bound to it.
	Digest string
	// Definition is the tool as the upstream listed it. Treat it as read-only.
	Definition *mcp.Tool
	// TaskSupport is the tool's execution.taskSupport as the upstream
	// listed it: TaskSupportOptional, TaskSupportRequired, or ""
	// (forbidden or not declared).
	TaskSupport string
	// headerParams: the input schema mentions "x-mcp-header" (SEP-2243
	// Mcp-Param-* bindings, which the SDK checks against a 2026-07-28
	// request's headers); the lean front hands such calls to the SDK.
	headerParams bool
}

// ExposedName returns the name under which the tool of server is exposed.
func ExposedName(server, tool string) string {
	return server + nameSeparator + tool
}

// ToolDigestOf returns the digest of a tool definition: "sha256:" followed by
// the lowercase hex SHA-256 of the canonical JSON of the definition as the
// SDK encodes it.
func ToolDigestOf(t *mcp.Tool) (string, error) {
	d, err := digestOf(t)
	if err != nil {
		return "", fmt.Errorf("tool %q: %w", t.Name, err)
	}
	return d, nil
}

// digestOf returns "sha256:" + the lowercase hex SHA-256 of the canonical
// JSON of v as the SDK encodes it (a tool or prompt definition).
func digestOf(v any) (string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encode definition: %w", err)
	}
	c, err := approval.Canonicalize(raw)
	if err != nil {
		return "", fmt.Errorf("canonicalize definition: %w", err)
	}
	sum := sha256.Sum256(c)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// buildTools turns the tools listed by server into catalog entries. Names
// longer than MaxExposedNameLength are skipped with a warning. An exposed
// name that occurs twice is reported in dups and left out of the result:
// nothing is silently overwritten (case C05).
func buildTools(server string, unprefixed bool, listed upstreamTools, log *slog.Logger) (tools []Tool, dups []string) {
	defs := listed.defs
	count := map[string]int{}
	for _, d := range defs {
		count[d.Name]++
	}
	for _, d := range defs {
		name := ExposedName(server, d.Name)
		if unprefixed {
			name = d.Name
		}
		if count[d.Name] > 1 {
			if !slices.Contains(dups, name) {
				dups = append(dups, name)
			}
			continue
		}
		if n := utf8.RuneCountInString(name); n > MaxExposedNameLength {
			log.Warn("tool not exposed: exposed name too long", "server", server, "tool", d.Name, "name", name, "length", n, "max", MaxExposedNameLength)
			continue
		}
		digest, err := ToolDigestOf(d)
		if err != nil {
			log.Warn("tool not exposed", "server", server, "tool", d.Name, "err", err)
			continue
		}
		tools = append(tools, Tool{Name: name, Server: server, Tool: d.Name, Digest: digest, Definition: d, TaskSupport: listed.taskSupport[d.Name],
			headerParams: schemaMentions(d.InputSchema, "x-mcp-header")})
	}
	return tools, dups
}

// schemaMentions reports whether the JSON of schema contains the quoted
// key (or fails to encode: then it is taken to mention it).
func schemaMentions(schema any, key string) bool {
	b, err := json.Marshal(schema)
	return err != nil || bytes.Contains(b, []byte(`"`+key+`"`))
}

// A catalog maps exposed names to tools. Its methods are safe for concurrent use.
type catalog struct {
	mu     sync.RWMutex
	byName map[string]Tool   // guarded by mu
	byPair map[string]string // guarded by mu: server+"\x00"+tool → exposed name
}

func newCatalog() *catalog {
	return &catalog{byName: map[string]Tool{}, byPair: map[string]string{}}
}

func pairKey(server, tool string) string { return server + "\x00" + tool }

func (c *catalog) lookup(name string) (Tool, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	t, ok := c.byName[name]
	return t, ok
}

func (c *catalog) byReal(server, tool string) (Tool, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	t, ok := c.byName[c.byPair[pairKey(server, tool)]]
	if !ok || t.Server != server || t.Tool != tool {
		return Tool{}, false
	}
	return t, true
}

func (c *catalog) remove(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.byName[name]; ok {
		delete(c.byPair, pairKey(t.Server, t.Tool))
	}
	delete(c.byName, name)
}

// taken returns the exposed names in tools that another server's tool
// already has.
func (c *catalog) taken(server string, tools []Tool) []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []string
	for _, t := range tools {
		if old, ok := c.byName[t.Name]; ok && old.Server != server {
			out = append(out, t.Name)
		}
	}
	return out
}

func (c *catalog) list() []Tool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return slices.SortedFunc(maps.Values(c.byName), func(a, b Tool) int { return cmpString(a.Name, b.Name) })
}

// replace sets the tools of server to tools and reports what changed:
// upserted are new or changed (by digest) tools, removed the exposed names
// that are gone.
func (c *catalog) replace(server string, tools []Tool) (upserted []Tool, removed []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	keep := map[string]bool{}
	for _, t := range tools {
		keep[t.Name] = true
		if old, ok := c.byName[t.Name]; !ok || old.Digest != t.Digest || old.TaskSupport != t.TaskSupport {
			upserted = append(upserted, t)
		}
		c.byName[t.Name] = t
		c.byPair[pairKey(t.Server, t.Tool)] = t.Name
	}
	for name, t := range c.byName {
		if t.Server == server && !keep[name] {
			removed = append(removed, name)
			delete(c.byName, name)
			delete(c.byPair, pairKey(t.Server, t.Tool))
		}
	}
	slices.Sort(removed)
	return upserted, removed
}

// applyTools replaces the tools of server in the catalog and in the
// downstream server (which then tells agents tools/list_changed). A
// duplicate exposed name is an error when startup is set (nothing is
// applied); later it is logged and the duplicated tools are left out.
func (g *Gateway) applyTools(server string, listed upstreamTools, startup bool) error {
	_, err := g.replaceTools(server, listed, startup)
	return err
}

// replaceTools is applyTools that also reports whether the catalog
// changed.
func (g *Gateway) replaceTools(server string, listed upstreamTools, startup bool) (bool, error) {
	unprefixed := g.ups[server] != nil && g.ups[server].cfg.Unprefixed
	tools, dups := buildTools(server, unprefixed, listed, g.log)
	if len(dups) > 0 {
		if startup {
			return false, fmt.Errorf("server %q: duplicate exposed tool names %q", server, dups)
		}
		g.log.Error("duplicate exposed tool names: not exposed", "server", server, "names", dups)
	}
	g.toolsMu.Lock()
	defer g.toolsMu.Unlock()
	if taken := g.catalog.taken(server, tools); len(taken) > 0 {
		// Only unprefixed servers can collide with another server's names.
		if startup {
			return false, fmt.Errorf("server %q: tool names %q are already exposed by another server", server, taken)
		}
		g.log.Error("tool names already exposed by another server: not exposed", "server", server, "names", taken)
		tools = slices.DeleteFunc(tools, func(t Tool) bool { return slices.Contains(taken, t.Name) })
	}
	upserted, removed := g.catalog.replace(server, tools)
	if len(removed) > 0 {
		g.server.RemoveTools(removed...)
	}
	for _, t := range upserted {
		if !g.addServerTool(t) {
			g.catalog.remove(t.Name)
		}
	}
	if len(upserted) > 0 || len(removed) > 0 {
		g.log.Info("tools updated", "server", server, "tools", len(tools), "changed", len(upserted), "removed", len(removed))
	}
	return len(upserted) > 0 || len(removed) > 0, nil
}

// addServerTool registers t with the downstream server and reports whether
// it could. The input schema is the upstream's; one the SDK would refuse
// (not an object schema) is replaced by {"type":"object"} with a warning.
func (g *Gateway) addServerTool(t Tool) bool {
	def := *t.Definition
	def.Name = t.Name
	if !isObjectSchema(def.InputSchema) {
		g.log.Warn("tool input schema is not an object schema; exposing {\"type\":\"object\"}", "tool", t.Name)
		def.InputSchema = map[string]any{"type": "object"}
	}
	if err := tryAddTool(g.server, &def, g.handle); err != nil {
		g.log.Warn("tool rejected by the MCP server; retrying with a plain definition", "tool", t.Name, "err", err)
		plain := &mcp.Tool{Name: t.Name, Title: def.Title, Description: def.Description, InputSchema: map[string]any{"type": "object"}}
		if err := tryAddTool(g.server, plain, g.handle); err != nil {
			g.log.Error("tool not exposed", "tool", t.Name, "err", err)
			return false
		}
	}
	return true
}

func tryAddTool(s *mcp.Server, t *mcp.Tool, h mcp.ToolHandler) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	s.AddTool(t, h)
	return nil
}

func isObjectSchema(s any) bool {
	switch v := s.(type) {
	case map[string]any:
		return v["type"] == "object"
	case json.RawMessage:
		var m map[string]any
		return json.Unmarshal(v, &m) == nil && m["type"] == "object"
	}
	return false
}
