package main

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/config"
)

// envUpstream switches the test binary into a stdio MCP server (see
// TestMain), which the serve tests run as their upstream.
const envUpstream = "TOOLGATE_CMD_TEST_UPSTREAM"

// envCLI switches the test binary into toolgate itself: run on its
// arguments, exiting with run's code (helpcodes_test.go runs the CLI as a
// separate process so).
const envCLI = "TOOLGATE_CMD_TEST_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(envUpstream) == "stdio" {
		runTestUpstream()
		return
	}
	if os.Getenv(envCLI) == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// runTestUpstream serves two tools on stdio: echo, and env, which answers
// the process's environment, one NAME=value per line.
func runTestUpstream() {
	s := mcp.NewServer(&mcp.Implementation{Name: "cmd-test-upstream", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "env", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(os.Environ(), "\n")}}}, nil
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "upstream:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Tokens the test configs name through token_env.
const (
	testAgentToken    = "cmd-test-agent-token-0b5e7c1d"
	testApproverToken = "cmd-test-approver-token-6a2f9e40"
)

// testSystem returns a system whose environment is env plus the token
// variables and PATH, with a descriptor limit of 4096.
func testSystem(env map[string]string) system {
	all := map[string]string{
		"CMD_TEST_AGENT_TOKEN":    testAgentToken,
		"CMD_TEST_APPROVER_TOKEN": testApproverToken,
		"PATH":                    os.Getenv("PATH"),
	}
	maps.Copy(all, env)
	var environ []string
	for _, k := range slices.Sorted(maps.Keys(all)) {
		environ = append(environ, k+"="+all[k])
	}
	return system{lookupEnv: config.MapEnv(all), environ: environ, readFile: os.ReadFile, euid: os.Geteuid(), nofile: 4096}
}

// principals declares one agent and one admin, by token_env.
const principals = `
agents:
  - { id: agent-1, token_env: CMD_TEST_AGENT_TOKEN }
approvers:
  - { id: alice, token_env: CMD_TEST_APPROVER_TOKEN, roles: [admin] }
`

// testUpstream returns a servers: entry running this test binary as the
// stdio upstream name, exposing its tools under their own names when
// unprefixed.
func testUpstream(name string, unprefixed bool) string {
	s := fmt.Sprintf("  %s:\n    command: %q\n    args: [\"-test.run=^$\"]\n    env: { %s: stdio }\n", name, os.Args[0], envUpstream)
	if unprefixed {
		s += "    tool_prefix: false\n"
	}
	return s
}

// writeConfig writes text into a config file in a fresh directory and
// returns its path; a "DB" in text is replaced by a SQLite path there.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	dir := t.TempDir()
	text = strings.ReplaceAll(text, "DB", filepath.Join(dir, "toolgate.db"))
	path := filepath.Join(dir, "toolgate.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// freePort returns a loopback address nothing listens on (now).
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
