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

# Everything the binary is built from: a second `make build` does nothing.
SOURCES := $(shell find . -name '*.go' -not -name '*_test.go' -not -path './t/*' -not -path './$(BUILD)/*') go.mod $(wildcard go.sum)

.PHONY: all build install test unit e2e bench fuzz demo clean vet

all: build

build: $(BIN)

$(BIN): $(SOURCES)
	@mkdir -p $(BUILD)
	$(GO) build $(GOFLAGS_B) -ldflags '$(LDFLAGS)' -o $@ .

# Binary once, every applet name as a hardlink of it. FORCE=1 replaces
# conflicting files (e.g. an older install). No sudo in here.
install: $(BIN)
	@mkdir -p '$(DESTDIR)$(PREFIX)/bin'
	$(BIN) install $(if $(FORCE),--force) '$(DESTDIR)$(PREFIX)/bin'

vet:
	$(GO) vet -tags '$(TAGS)' ./...

unit:
	$(GO) test -tags '$(TAGS)' -count=1 $(TESTFLAGS) $$($(GO) list ./... | grep -v '/t$$')

e2e: $(BIN)
	CORTEXFS_BIN=$(abspath $(BIN)) $(GO) test -tags '$(TAGS)' -count=1 -timeout 20m $(TESTFLAGS) ./t/

test: vet unit e2e

# Figures, not pass/fail: each goal is printed as a ratio against a floor
# measured in the same run.
bench: $(BIN)
	CORTEXFS_BIN=$(abspath $(BIN)) CORTEXFS_BENCH=1 $(GO) test -tags '$(TAGS)' -count=1 -timeout 30m -run '^TestBench$$' -v ./t/ | grep -v '^=== RUN\|^--- \|^PASS\|^ok '

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
	@$(BIN) install $(DEMO)/bin
	@echo '== one binary, every applet a hardlink of it:'
	@ls -li $(DEMO)/bin
	@echo '== cortexfs --version'
	@$(DEMO)/bin/cortexfs --version
	@echo '== cortexfs --list'
	@$(DEMO)/bin/cortexfs --list

clean:
	rm -rf $(BUILD)
