#!/bin/sh
# Installs the pinned test-only npm peers into $NPM_CACHE (default
# $HOME/.cache/cortexfs-npm), outside the clone, so a fresh checkout reuses
# them. Each package directory under t/npm (this one: codex 0.169.0 and the
# MCP reference server; codex-0.136/: the oldest codex cbth supports) gets
# its own prefix: $NPM_CACHE for this one, $NPM_CACHE/<dir> for the others.
# A second run is a no-op unless a lockfile changed; concurrent runs are
# serialised with flock. Prints nothing when already installed.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cache=${NPM_CACHE:-$HOME/.cache/cortexfs-npm}
mkdir -p "$cache"
exec 9>"$cache/.install.lock"
flock 9

# install SRC DST CHECK: npm ci of SRC's lockfile into DST unless DST's
# stamp says that lockfile is already there and CHECK is executable.
install() {
	src=$1 dst=$2 check=$3
	stamp="$dst/.lock.sha256"
	want=$(cat "$src/package.json" "$src/package-lock.json" | sha256sum | cut -d' ' -f1)
	if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$dst/$check" ]; then
		return 0
	fi
	if ! command -v npm >/dev/null 2>&1; then
		echo "t/npm/install.sh: npm not found; install nodejs and npm (tests run real peers from npm)" >&2
		exit 1
	fi
	mkdir -p "$dst"
	cp "$src/package.json" "$src/package-lock.json" "$dst/"
	rm -f "$stamp"
	# npm install, not npm ci: the registry mirror serves codex 0.136.0's
	# linux-x64 build only, so its lockfile cannot list every platform's
	# optional package and npm ci would refuse it. Versions are exact pins
	# and the lockfile's integrity hashes are still checked.
	(cd "$dst" && npm install --no-audit --no-fund --loglevel=error >/dev/null)
	"$dst/node_modules/.bin/codex" --version >/dev/null 2>&1
	echo "$want" >"$stamp"
	echo "t/npm/install.sh: installed $(basename "$src") test peers into $dst" >&2
}

install "$here" "$cache" node_modules/.bin/mcp-server-everything
install "$here/codex-0.136" "$cache/codex-0.136" node_modules/.bin/codex
