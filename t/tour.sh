#!/usr/bin/env bash
# The first hour, as a script: README's examples that run offline, in order,
# through the installed applet names. Any non-zero exit, or output that
# carries an error (a panic, an "(ECODE)" error line, a FAIL, the shell's
# "not found"), fails the tour and shows what the step printed.
#
# usage: t/tour.sh BINARY   (make tour; make test runs it too)
set -uo pipefail

bin=${1:?usage: t/tour.sh BINARY}
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
T=$(mktemp -d "${TMPDIR:-/tmp}/cortexfs-tour-XXXXXX")
B=$T/bin
R=$T/ctx
export CBTH_HOME=$T/cbth
unset CTX_ROOT
daemon=
steps=0

cleanup() {
	[ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
	[ -x "$B/cbth" ] && "$B/cbth" daemon stop >/dev/null 2>&1
	rm -rf "$T"
}
trap cleanup EXIT

# Error text no step of the tour may print.
bad='panic:|goroutine [0-9]|\(E[A-Z0-9]+\)$|^FAIL|[^0-9] failed|not found|Traceback|unknown command'

# step NAME CMD… runs CMD, prints NAME, and stops the tour on a failure.
step() {
	local name=$1
	shift
	steps=$((steps + 1))
	out=$("$@" 2>&1)
	local rc=$?
	if [ $rc -ne 0 ] || grep -Eq "$bad" <<<"$out"; then
		echo "tour: FAIL step $steps, $name (exit $rc): $*"
		echo "$out" | sed 's/^/    /' | head -40
		exit 1
	fi
	echo "ok   $name"
}

# expect NAME TEXT: the last step's output contains TEXT.
expect() {
	if ! grep -Fq -- "$2" <<<"$out"; then
		echo "tour: FAIL $1: the output has no \"$2\""
		echo "$out" | sed 's/^/    /' | head -40
		exit 1
	fi
}

start=$(date +%s)

step "cortexfs install DIR (one binary, every applet a hardlink)" "$bin" install "$B"
step "cortexfs --version" "$B/cortexfs" --version
step "cortexfs --help lists the applets" "$B/cortexfs" --help
expect "cortexfs --help" "ctx"

# CortexFS in five commands (README), without --runner: the runner beside ctx.
step "ctx init --root DIR" "$B/ctx" init --root "$R"
expect "ctx init" "runner $B/cortexfs-object-runner"
step "ctx init again changes nothing" "$B/ctx" init --root "$R"
expect "ctx init again" "0 created, 0 updated"
step "model/debug/echo hello (through the kernel's shebang)" "$R/model/debug/echo" hello
expect "echo" '"status":"ok"'
step "model/main is an alias of debug/echo" "$R/model/main" hi there
expect "model/main" '"text":"hi there"'
step "tool/fs.read" bash -c "echo '{\"path\":\"/etc/hostname\"}' | '$R/tool/fs.read'"
step "tool/shell.exec" bash -c "echo '{\"cmd\":\"uname -s\"}' | '$R/tool/shell.exec'"
expect "shell.exec" "Linux"

"$B/cortexfsd" --root "$R" 2>"$T/cortexfsd.log" &
daemon=$!
for _ in $(seq 50); do [ -S "$R/model/debug/echo.sock" ] && break; sleep 0.1; done
step "cortexfsd serves model/debug/echo.sock" test -S "$R/model/debug/echo.sock"
step "ctx send, first turn" "$B/ctx" send --session tour "$R/model/main" first turn
expect "ctx send" '"status":"ok"'
step "ctx send, second turn of the session" "$B/ctx" send --session tour "$R/model/main" second turn
step "ctx ls" "$B/ctx" ls --root "$R"
expect "ctx ls" "model/debug/echo"
step "ctx status" "$B/ctx" status --root "$R"
expect "ctx status" "broken   0"
step "ctx doctor (cortexfsd running: nothing fails)" "$B/ctx" doctor --root "$R"
expect "ctx doctor" "0 failed"

# Agents: created against the echo model, run once through its shebang.
step "ctx agent create" "$B/ctx" agent create coder --root "$R" --model debug/echo --tool fs.read
step "ctx agent ls" "$B/ctx" agent ls --root "$R"
expect "ctx agent ls" "stopped"
step "ctx agent show" "$B/ctx" agent show --root "$R" coder
step "agent/coder TASK (the agent loop in its sandbox)" "$R/agent/coder" hello agent
expect "agent/coder" '"status":"ok"'

kill "$daemon" && wait "$daemon" 2>/dev/null
daemon=
if grep -Eq 'panic:|goroutine [0-9]' "$T/cortexfsd.log"; then
	echo "tour: FAIL cortexfsd log:"
	sed 's/^/    /' "$T/cortexfsd.log" | head -40
	exit 1
fi

# cbth: a job submitted, completed and batched for its thread (README).
step "cbth job submit" "$B/cbth" job submit --target cli --thread-id tour-thread --task-kind ci --summary 'wait for CI' \
	--delivery-read-only true --delivery-requires-approval false \
	--delivery-requires-network false --delivery-requires-write-access false --json
job=$(sed -n 's/.*"job_id":"\([^"]*\)".*/\1/p' <<<"$out")
step "the submit answered a job id" test -n "$job"
echo "CI green" >"$T/out.txt"
step "cbth job complete" "$B/cbth" job complete --job-id "$job" --summary 'CI green' --result-file "$T/out.txt" --json
step "cbth job query" "$B/cbth" job query --job-id "$job" --json
expect "cbth job query" "$job"
step "cbth batch inspect-head" "$B/cbth" batch inspect-head --source-thread-id tour-thread --json
step "cbth daemon stop" "$B/cbth" daemon stop

echo "tour: $steps steps ok in $(($(date +%s) - start)) s"
