# cortexfs: one static multi-call binary. `make demo` runs it on embedded
# defaults; `make test` is the one test command (CI runs it via .ci/run).

GO        ?= go
PREFIX    ?= /usr/local
DESTDIR   ?=
BUILD     := build
BIN       := $(BUILD)/cortexfs
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
TAGS      := osusergo netgo sqlite_omit_load_extension
LDFLAGS   := -X github.com/cortexfs/cortexfs/applets.Version=$(VERSION) -linkmode external -extldflags "-static"
GOFLAGS_B := -tags '$(TAGS)' -trimpath
FUZZTIME  ?= 10s
TESTFLAGS ?=

export CGO_ENABLED := 1

# Recipes that pipe go test into a filter must fail when go test fails.
SHELL       := bash
.SHELLFLAGS := -o pipefail -c

# The native plugin host: a small C program linked dynamically against the
# system libc (so plugins that start threads load as in any host), embedded
# into the static binary from core/plughost/bin and run from a memfd.
HOSTCC    ?= gcc
PLUGHOST  := core/plughost/bin/cortexfs-plugin-host

# Everything the binary is built from: a second `make build` does nothing.
SOURCES := $(shell find . -name '*.go' -not -name '*_test.go' -not -path './t/*' -not -path './$(BUILD)/*') go.mod $(wildcard go.sum) $(PLUGHOST)

.PHONY: all build install test unit e2e bench fuzz soak demo tour clean vet peers

all: build

build: $(BIN)

$(BIN): $(SOURCES)
	@mkdir -p $(BUILD)
	@if [ "$$($(GO) list $(GOFLAGS_B) -f '{{.Stale}}' github.com/mattn/go-sqlite3 2>/dev/null)" != false ]; then \
	  echo "make: the first build compiles SQLite into the binary (cgo): expect a minute or two; later builds are incremental"; fi
	$(GO) build $(GOFLAGS_B) -ldflags '$(LDFLAGS)' -o $@ .

$(PLUGHOST): core/plughost/host/cortexfs-plugin-host.c
	$(HOSTCC) -O2 -s -Wall -Wextra -Werror -o $@ $<

# Binary once, every applet name as a hardlink of it, and the shell
# completion of every applet (generated from the command tables). FORCE=1
# replaces conflicting files (e.g. an older install). No sudo in here.
SHARE := $(DESTDIR)$(PREFIX)/share
install: $(BIN)
	@mkdir -p '$(DESTDIR)$(PREFIX)/bin' '$(SHARE)/bash-completion/completions' '$(SHARE)/zsh/site-functions' \
	  '$(SHARE)/fish/vendor_completions.d'
	$(BIN) install $(if $(FORCE),--force) '$(DESTDIR)$(PREFIX)/bin'
	$(BIN) completion bash > '$(SHARE)/bash-completion/completions/cortexfs'
	$(BIN) completion zsh > '$(SHARE)/zsh/site-functions/_cortexfs'
	$(BIN) completion fish > '$(SHARE)/fish/vendor_completions.d/cortexfs.fish'
	@# bash-completion and fish load a command's completion by its name.
	@for a in $$($(BIN) --list); do [ "$$a" = cortexfs ] && continue; \
	  ln -sf cortexfs '$(SHARE)/bash-completion/completions/'"$$a"; \
	  ln -sf cortexfs.fish '$(SHARE)/fish/vendor_completions.d/'"$$a.fish"; done

vet:
	$(GO) vet -tags '$(TAGS)' ./...

# Progress as it happens: packages (unit) and tests (e2e) as they finish,
# the output of whatever failed, go test's exit status (t/progress).
PROGRESS := $(GO) run ./t/progress

unit:
	@echo "== unit tests (packages as they finish)"
	@$(PROGRESS) $(GO) test -json -tags '$(TAGS)' -count=1 $(TESTFLAGS) $$($(GO) list ./... | grep -v '/t$$')

# Test-only peers from npm (pinned, lockfile under t/npm), cached outside the
# clone so a fresh CI checkout does not download them every run.
NPM_CACHE ?= $(HOME)/.cache/cortexfs-npm
peers:
	@if [ -x t/npm/install.sh ]; then NPM_CACHE='$(NPM_CACHE)' t/npm/install.sh; fi

e2e: $(BIN) peers
	@echo "== end-to-end tests through the installed applets (tests as they finish)"
	@NPM_CACHE='$(NPM_CACHE)' CORTEXFS_BIN=$(abspath $(BIN)) $(PROGRESS) -tests $(GO) test -json -tags '$(TAGS)' -count=1 -timeout 20m $(TESTFLAGS) ./t/

# The first hour as a script (t/tour.sh): README's offline examples in order
# through the installed applets; any failure or error text fails it.
tour: $(BIN)
	@echo "== tour: README's examples, offline, through the installed applets"
	@t/tour.sh $(abspath $(BIN))

test: vet unit e2e tour

# Figures, not pass/fail: each goal is printed as a ratio against a floor
# measured in the same run.
bench: $(BIN) peers
	@# PF4 compares our sandbox with Debian's bubblewrap: install it when we can.
	@command -v bwrap >/dev/null || [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null || \
	  { apt-get install -y -qq bubblewrap >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq bubblewrap; } >/dev/null 2>&1; } || \
	  echo "make bench: bubblewrap could not be installed; PF4 is skipped"
	NPM_CACHE='$(NPM_CACHE)' CORTEXFS_BIN=$(abspath $(BIN)) CORTEXFS_BENCH=1 $(GO) test -tags '$(TAGS)' -count=1 -timeout 60m -run '^TestBench$$' -v ./t/ | grep -v '^ *=== RUN\|^ *--- PASS\|^PASS\|^ok '

# The long runs of the randomized checks make test keeps short: the cbth
# kill campaign (SIGKILLs of the daemon under concurrent task runs, with
# pid-reuse decoys) and the model-based FIFO test. SOAK_ROUNDS sizes both.
SOAK_ROUNDS ?= 200
soak: $(BIN) peers
	CBTH_MODEL_SEEDS=$$(( $(SOAK_ROUNDS) * 3 )) $(GO) test -tags '$(TAGS)' -count=1 -timeout 2h -run 'TestJobsAgainstModel' ./core/cbth/jobs/
	NPM_CACHE='$(NPM_CACHE)' CORTEXFS_BIN=$(abspath $(BIN)) CBTH_KILL_ROUNDS=$(SOAK_ROUNDS) $(GO) test -tags '$(TAGS)' -count=1 -timeout 4h -v -run '^TestCbthKillCampaign$$' ./t/ | grep -v '^=== RUN'

# A short campaign of every fuzz target (FUZZTIME each).
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -tags '$(TAGS)' -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; \
	    $(GO) test -tags '$(TAGS)' -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

DEMO := $(BUILD)/demo
demo: $(BIN)
	@rm -rf $(DEMO) && mkdir -p $(DEMO)
	@$(BIN) install $(DEMO)/bin >/dev/null
	@echo '== one binary, every applet a hardlink of it:'
	@ls -li $(DEMO)/bin
	@$(DEMO)/bin/cortexfs --version
	@echo '== ctx init (embedded defaults: debug/echo, built-in tools)'
	@$(DEMO)/bin/ctx init --root $(DEMO)/ctx --runner $(abspath $(DEMO))/bin/cortexfs-object-runner
	@$(DEMO)/bin/ctx ls --root $(DEMO)/ctx
	@echo '== $(DEMO)/ctx/model/main hello   (through the kernel shebang)'
	@$(DEMO)/ctx/model/main hello
	@echo '== echo {"cmd":"uname -s"} | tool/shell.exec'
	@echo '{"cmd":"uname -s"}' | $(DEMO)/ctx/tool/shell.exec
	@echo '== cortexfsd + ctx send: two turns of one socket session'
	@$(DEMO)/bin/cortexfsd --root $(DEMO)/ctx 2>$(DEMO)/cortexfsd.log & pid=$$!; \
	  for i in 1 2 3 4 5 6 7 8 9 10; do [ -S $(DEMO)/ctx/model/debug/echo.sock ] && break; sleep 0.2; done; \
	  $(DEMO)/bin/ctx send --session demo $(DEMO)/ctx/model/main first turn; \
	  $(DEMO)/bin/ctx send --session demo $(DEMO)/ctx/model/main second turn; \
	  kill $$pid; wait $$pid
	@echo '== cbth: a job submitted, completed and batched for its thread'
	@export CBTH_HOME=$(abspath $(DEMO))/cbth; \
	  job=$$($(DEMO)/bin/cbth job submit --target cli --thread-id demo-thread --task-kind demo --summary 'demo job' --json | sed 's/.*"job_id":"\([^"]*\)".*/\1/'); \
	  echo "result of $$job" > $(DEMO)/result.txt; \
	  $(DEMO)/bin/cbth job complete --job-id $$job --summary 'done' --result-file $(DEMO)/result.txt; \
	  $(DEMO)/bin/cbth batch inspect-head --source-thread-id demo-thread; \
	  $(DEMO)/bin/cbth daemon stop

clean:
	rm -rf $(BUILD) $(PLUGHOST)
