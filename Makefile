# Factline. `make help` lists the targets.
SHELL := /bin/bash
GO ?= go
BIN := bin/factline
DATA_DIR ?= ./data
ADDR ?= :8080
PKGS := ./...

.PHONY: help build run test deps fuzz bench vet clean plugins

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

build: plugins ## build bin/factline with the plugins in plugins/ built in
	@echo "Building $(BIN). The first build compiles every dependency (a few minutes on 2 cores); the packages it compiles are listed as it goes."
	$(GO) build -v -trimpath -tags embedplugins -o $(BIN) ./cmd/factline

run: build ## start factline on the embedded store (SQLite in ./data) with the repo's manifests
	@echo "Starting factline on $(ADDR) with the embedded store in $(DATA_DIR)."
	@echo "Get an API key (in another terminal):  $(BIN) keys create --tenant demo --mode live --data-dir $(DATA_DIR)"
	$(BIN) serve --addr $(ADDR) --data-dir $(DATA_DIR) --domain manifests/domain.yaml --manifest manifests/gateway.yaml --watch

deps: ## install what the tests start (PostgreSQL, Redis, Chromium, promtool; apt-get, when missing)
	@bash .ci/deps.sh

# RACE is the race detector, without checkptr's checks of unsafe pointer
# arithmetic in the embedded SQLite (modernc.org/*: SQLite's C source
# translated to Go), which took about half the CPU of every SQLite-backed
# test (docs/decisions.md). The race detector itself stays on everywhere.
RACE := -race -gcflags='modernc.org/...=-d=checkptr=0'

# TESTFLAGS trim what every test binary costs to build and nothing it runs:
# vet's checks (make vet runs all of them, CI runs make vet first) and the
# DWARF tables (stack traces and profiles read the symbol table, not DWARF).
TESTFLAGS := -vet=off -ldflags=-w

# GORACE: a race-enabled binary sleeps a second before it exits, so that
# goroutines still running can report a race. The packages whose tests
# start services fail when goroutines outlive their tests (testutil.Main,
# goleak), so that second is a second per package waited for nothing
# (docs/decisions.md).
NORACE_TESTS := ^(TestHotSwapUnderLoad|TestDistinctMillion|TestDeliveriesViewPagesTenThousand|TestDeliveriesListPagesTenThousand)$$
NORACE_PKGS := ./internal/host/app ./internal/host/projection ./internal/host/console ./internal/host/webhook

test: deps ## run the whole suite with the race detector, Postgres and Redis included
	GORACE=atexit_sleep_ms=0 $(GO) test $(RACE) $(TESTFLAGS) -count=1 -timeout 30m $(PKGS)
	@# What the race detector slows several times over is checked without
	@# it (testutil.Race): the hot-swap test's load floor (200 requests/s),
	@# count_distinct over a million values, and pages of 10,000 webhook
	@# deliveries within 2 s.
	$(GO) test $(TESTFLAGS) -count=1 -timeout 10m -run '$(NORACE_TESTS)' $(NORACE_PKGS)

vet: ## go vet, golangci-lint (.golangci.yml), gofmt and go mod tidy checks
	$(GO) vet $(PKGS)
	@# golangci-lint is pinned in tools/go.mod; go tool builds it once (minutes
	@# on 2 cores) and reuses the build from the Go build cache.
	$(GO) tool -modfile=tools/go.mod golangci-lint run $(PKGS)
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	@$(GO) mod tidy -diff || { echo "go.mod or go.sum is not tidy: run go mod tidy" >&2; exit 1; }

fuzz: ## run every fuzz target for a bounded time (FUZZTIME, default 20s each)
	@bash .ci/fuzz.sh $${FUZZTIME:-20s}

bench: build deps ## run the benchmarks and write bench/RESULTS.md
	@bash bench/run.sh

clean: ## remove build output
	rm -rf bin plugins/*/*.wasm

PLUGINS := $(patsubst plugins/%/main.go,%,$(wildcard plugins/*/main.go))

plugins: ## build every plugin in plugins/ to plugins/<name>/<name>.wasm
	@# The first plugin compiles the standard library for wasip1 once; the
	@# others then build side by side.
	@set -e; ps=($(PLUGINS)); \
	one() { GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -o plugins/$$1/$$1.wasm ./plugins/$$1 && echo "plugins/$$1/$$1.wasm"; }; \
	echo "Building $${#ps[@]} plugins to WebAssembly"; \
	one "$${ps[0]}"; pids=(); \
	for p in "$${ps[@]:1}"; do one "$$p" & pids+=($$!); done; \
	for pid in "$${pids[@]}"; do wait "$$pid"; done
