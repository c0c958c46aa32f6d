package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// peerTBXark is the one peer perfpair knows: TBXark/mcp-proxy (Go, mcp-go),
// issue 13's fastest plain proxy, started as ../shared/perf/run.sh's
// tbxark_cfg starts it.
const peerTBXark = "tbxark"

// peerFlag collects repeated -peer NAME=PATH values.
type peerFlag []target

func (p *peerFlag) String() string { return fmt.Sprint(len(*p)) }

func (p *peerFlag) Set(s string) error {
	name, path, ok := strings.Cut(s, "=")
	if !ok || path == "" {
		return fmt.Errorf("want NAME=PATH, got %q", s)
	}
	if name != peerTBXark {
		return fmt.Errorf("unknown peer %q (known: %s)", name, peerTBXark)
	}
	*p = append(*p, target{label: name, bin: path, peer: true})
	return nil
}

// tbxarkServerName is the name of the echo upstream in the peer's
// configuration, and so the first segment of the URL path it serves.
const tbxarkServerName = "echo"

// tbxarkPath is the URL path at which TBXark/mcp-proxy serves the echo
// upstream over Streamable HTTP (its route is baseURL's path, the server's
// name and a slash).
const tbxarkPath = "/" + tbxarkServerName + "/"

// writeTBXarkConfig writes the JSON configuration of a TBXark/mcp-proxy row
// listening on 127.0.0.1:port into a new directory under dir and returns
// its path: the one run.sh's tbxark_cfg writes (Streamable HTTP towards the
// agents, logging off, exit if the upstream fails to connect), with one
// server, "echo": an HTTP upstream at upstreamURL when kind is "http",
// else the stdio command echo with no arguments, which the peer spawns and
// keeps for all agent sessions.
func writeTBXarkConfig(dir string, port int, kind, upstreamURL, echo string) (string, error) {
	d, err := os.MkdirTemp(dir, "tbxark-")
	if err != nil {
		return "", err
	}
	server := map[string]any{"command": echo, "args": []string{}}
	if kind == "http" {
		server = map[string]any{"transportType": "streamable-http", "url": upstreamURL}
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	conf := map[string]any{
		"mcpProxy": map[string]any{
			"baseURL": "http://" + addr, "addr": addr, "name": "perf", "version": "1.0.0",
			"type":    "streamable-http",
			"options": map[string]any{"logEnabled": false, "panicIfInvalid": true},
		},
		"mcpServers": map[string]any{tbxarkServerName: server},
	}
	b, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(d, "config.json")
	return path, os.WriteFile(path, append(b, '\n'), 0o600)
}

// waitRoute waits until an empty HTTP POST to url gets an answer other than
// 404 (mcp-go's Streamable HTTP handler refuses it with 400 without starting
// a session; a GET could open a stream). TBXark/mcp-proxy listens before its
// upstream has connected and registers the upstream's route only then, so
// an open port does not yet mean the row can be loaded. It returns an error
// after within, or when ctx ends.
func waitRoute(ctx context.Context, url string, within time.Duration) error {
	deadline := time.Now().Add(within)
	client := &http.Client{Timeout: time.Second}
	for {
		status := 0
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, http.NoBody)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			status = resp.StatusCode
			_ = resp.Body.Close()
			if status != http.StatusNotFound {
				return nil
			}
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("%s not served after %s: %w", url, within, err)
			}
			return fmt.Errorf("%s not served after %s: status %d", url, within, status)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
