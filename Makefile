# mailsink: every command a developer or CI needs.
GO       ?= go
BIN      ?= bin/mailsink
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X main.version=$(VERSION)
PKGS     := ./...
FUZZTIME ?= 30s
BENCH_DOC ?= docs/benchmarks.md
BENCH_FLAGS ?=
# CANIEMAIL_VERSION: the npm version or tag of caniemail that make caniemail fetches (a bare name would pick
# the newest release whose engines match this Node.js, not the newest)
CANIEMAIL_VERSION ?= latest

.PHONY: all build run release test test-go test-node openapi caniemail test-short install-check lint vet fmt bench bench-go bench-large bench-reads bench-search bench-redis-instructions bench-redis-floor fuzz cluster-up cluster-down failover-test clean

all: lint test build

## build: the one binary, at bin/mailsink
build:
	@echo "build: $(BIN), version $(VERSION) (the first build fetches the Go modules: a minute or two)"
	@CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/mailsink

## run: build, then run mailsink on the embedded store under ./data (SMTP :1025, HTTP :8025); Ctrl-C stops it.
## The binary runs as a job of its own (set -m), so that Ctrl-C reaches it and not make: it drains and exits 0.
run: build
	@echo "run: $(BIN) serve (MAILSINK_* variables configure it; $(BIN) --help lists them)"
	@bash -c 'set -m; $(BIN) serve; exit $$?'

## release: the binaries a user downloads, static and stamped with VERSION, for linux, darwin and windows on
## amd64 and arm64, with their SHA256SUMS, in dist/ (PLATFORMS=linux/amd64 builds one)
release:
	@VERSION='$(VERSION)' OUT=dist $(if $(PLATFORMS),PLATFORMS='$(PLATFORMS)') scripts/release.sh

## test: the whole suite: Go with the race detector (Redis at 127.0.0.1:6379 adds the Redis variants; the
## dashboard's browser tests need Chromium and axe-core, see .ci/run), then the Node.js tests
test: test-go test-node

test-go:
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

## test-node: nodemailer over TLS and the MCP TypeScript SDK (e2e/node), the JavaScript client with its Playwright example (clients/js)
## and the Cloudflare Email Worker example, each against the binary built here (needs node and npm)
test-node: build
	cd e2e/node && npm ci --no-audit --no-fund --silent && MAILSINK_BIN="$(CURDIR)/$(BIN)" npm test
	cd clients/js && npm ci --no-audit --no-fund --silent && npm run typecheck && \
		MAILSINK_BIN="$(CURDIR)/$(BIN)" CHROMIUM_PATH="$$(command -v chromium)" npm test
	cd examples/cloudflare-email-worker && MAILSINK_BIN="$(CURDIR)/$(BIN)" node --test worker.test.js

## openapi: regenerate the JS client's types (clients/js/types.d.ts) from the API contract, api/openapi.yaml
openapi:
	cd clients/js && npm ci --no-audit --no-fund --silent && npm run gen

## caniemail: refresh the HTML check's data (internal/checks/htmlcompat/caniemail) from the npm package caniemail
caniemail:
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
		(cd "$$tmp" && npm pack "caniemail@$(CANIEMAIL_VERSION)" --silent >/dev/null && tar xzf caniemail-*.tgz); \
		cp "$$tmp/package/data/caniemail.json" "$$tmp/package/LICENSE" internal/checks/htmlcompat/caniemail/; \
		grep -o '"last_update_date": *"[^"]*"' internal/checks/htmlcompat/caniemail/caniemail.json

## install-check: `go install github.com/mailsink/mailsink/cmd/mailsink@VERSION` works (a local module proxy, no network)
install-check:
	scripts/go-install-check.sh

## test-short: the suite without the slow end-to-end package
test-short:
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -v /e2e)

## lint: gofmt and go vet
lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

## bench: Go micro-benchmarks, then the load tool's standard suite against a mailsink it starts on the
## embedded store, on Redis (127.0.0.1:6379, own key prefix) and in memory, and against Inbucket in the same
## run when MAILSINK_BENCH_INBUCKET names its binary (docs/benchmarks.md says how to build it), then the large
## set (as bench-large), so that every target of issue 38 is marked; results go into $(BENCH_DOC). BENCH_FLAGS
## adds suite flags (e.g. -scale 0.05 for a short trial).
bench:
	@mkdir -p bin
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS) > bin/gobench.txt 2>&1; st=$$?; cat bin/gobench.txt; exit $$st
	$(GO) run ./tools/mailsink-bench suite -with-large -timeout 75m -doc $(BENCH_DOC) -gobench bin/gobench.txt -command 'make bench' $(BENCH_FLAGS)

## bench-go: only the Go micro-benchmarks of the parser and the stores
bench-go:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

## bench-large: the large set alone (bench runs it too): 1,000,000 emails in one account on each store, list
## latency idle and under an SMTP ingest, and RSS there
bench-large:
	$(GO) run ./tools/mailsink-bench suite -large -timeout 60m -doc $(BENCH_DOC) -command 'make bench-large' $(BENCH_FLAGS)

## bench-reads: each hostile message of the hardening issue stored at the default size limit and read through
## every endpoint, eight requests at once, on the embedded store and on Redis (127.0.0.1:6379, own key prefix);
## the server's CPU per request, its peak RSS and another account's list p99 go into $(BENCH_DOC)
bench-reads:
	$(GO) run ./tools/mailsink-bench reads -doc $(BENCH_DOC) -command 'make bench-reads' $(BENCH_FLAGS)

## bench-search: issue 33's search costs: a varied corpus of 100,000 emails sent over SMTP to one account on the
## embedded store and on Redis (127.0.0.1:6379, own key prefix), queries timed at 10k/30k/100k, how soon new mail's
## body words are found, digest CPU and size, a restart's load and RSS; results and targets go into $(BENCH_DOC)
bench-search:
	$(GO) run ./tools/mailsink-bench search -doc $(BENCH_DOC) -command 'make bench-search' $(BENCH_FLAGS)

## bench-redis-instructions: redis-server's instructions per 2 KB message of an SMTP ingest, and the commands and
## script work they go to, counted by valgrind's callgrind on a redis-server of its own (needs valgrind,
## redis-server and redis-cli): counts that hardly move with the machine's load, for comparing two builds at one
## MESSAGES (2000 by default); CALLGRIND_BIN counts a mailsink binary built elsewhere rather than this tree's
bench-redis-instructions:
	GO='$(GO)' scripts/callgrind-redis.sh $(or $(MESSAGES),2000) $(CALLGRIND_BIN)

## bench-redis-floor: redis-server's instructions per 2 KB create as mailsink sends it (the create script, search's
## digests) and as plain commands would (MULTI/EXEC, no script): what a Redis layout without Lua could save at
## most (needs python3, valgrind and redis-server; MESSAGES, 2000 by default). CPU=1 (any value but empty)
## measures redis-server's CPU time instead, without valgrind (20000 messages by default)
bench-redis-floor:
	python3 scripts/redis-create-floor.py $(if $(CPU),-cpu) $(or $(MESSAGES),$(if $(CPU),20000,2000))

## fuzz: every fuzz target of the module (each `func Fuzz...` in a _test.go file) for FUZZTIME
fuzz:
	@set -e; for pkg in $$($(GO) list -f '{{.ImportPath}}:{{.Dir}}' $(PKGS)); do \
		for name in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $${pkg#*:}/*_test.go 2>/dev/null); do \
			echo "fuzz $${pkg%%:*} $$name"; \
			$(GO) test $${pkg%%:*} -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME); \
		done; \
	done

## cluster-up / cluster-down: a Redis Cluster on loopback (3 masters, a replica each) for the cluster tests
cluster-up:
	@scripts/redis-cluster.sh start .cluster

cluster-down:
	@scripts/redis-cluster.sh stop .cluster

## failover-test: SMTP load on a throwaway Redis Cluster (3 masters, 2 replicas each) through a master's SIGKILL,
## then a lagging replica promoted by CLUSTER FAILOVER TAKEOVER (1 replica each), then a running master demoted
## by a graceful CLUSTER FAILOVER, with an event stream per account and a held wait; fails if acknowledged mail
## is lost or missing from the streams, or the wait misses its email
failover-test:
	$(GO) run ./tools/mailsink-failover -max-resume 1s
	$(GO) run ./tools/mailsink-failover -takeover -replicas 1
	$(GO) run ./tools/mailsink-failover -demote failover -max-resume 1s

clean:
	rm -rf bin .cluster
