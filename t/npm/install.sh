#!/bin/sh
# Installs the pinned test-only npm peers (t/npm/package-lock.json) into
# $NPM_CACHE (default $HOME/.cache/cortexfs-npm), outside the clone, so a
# fresh checkout reuses them. A second run is a no-op unless the lockfile
# changed. Prints nothing when already installed.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cache=${NPM_CACHE:-$HOME/.cache/cortexfs-npm}
stamp="$cache/.lock.sha256"
want=$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$cache/node_modules/.bin/codex" ]; then
	exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
	echo "t/npm/install.sh: npm not found; install nodejs and npm" >&2
	exit 1
fi
mkdir -p "$cache"
cp "$here/package.json" "$here/package-lock.json" "$cache/"
rm -f "$stamp"
(cd "$cache" && npm ci --no-audit --no-fund --loglevel=error)
"$cache/node_modules/.bin/codex" --version >/dev/null 2>&1
echo "$want" >"$stamp"
echo "t/npm/install.sh: installed test peers into $cache" >&2
