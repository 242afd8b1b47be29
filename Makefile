# turngate — the two commands a newcomer needs are `make run` and `make test`.

SHELL     := /bin/bash

GO        ?= go
BIN       := bin/turngate
PKGS      := ./...

# The package tier: every package's own tests (unit and in-process, against
# real Postgres), each run once — those whose code or tests exercise
# concurrency under the race detector. The end-to-end tier (./e2e: real
# processes, Chromium, npm, a pseudo-terminal) runs after the race pass,
# against two turngate binaries built once: one with -race, so the race
# detector watches the server processes the fault tests (kill -9, SIGSTOP,
# chaos) start, and a static plain one for the tests of the clients, of a
# process's memory (the race detector's shadow memory would distort them)
# and of the image (see internal/e2etest). The tier's own test code, a
# client of those processes, runs without -race: its time goes to the
# servers. Longest first: internal/testbin starts the packages in this
# order, two at a time, so the long ones do not run alone at the end.
RACE_PKGS := ./server/... ./runner/... ./turn/... ./callback/... ./sandbox/... ./graph/... ./internal/... ./lease/... \
             ./feed/... ./journal/... ./authority/... ./web/... ./clients/go/... ./runtime/... ./guard/...
# Packages whose files tagged !race hold tests that only run without
# -race (single-goroutine CPU work the detector slows tenfold and watches
# nothing in): the plain pass runs these packages too.
NORACE_PKGS := ./graph/extension
E2E_BIN   := bin/turngate-e2e
# The tier's plain binary is built as the Dockerfile builds the image's:
# static (CGO off) and -trimpath.
STATIC_BIN := bin/turngate-static
TESTOUT   := bin/test
# The passes' test binaries, built with go test -c -o $(TESTBIN)/<pass>/:
# that skips a link whose output is up to date (go test itself links
# every test binary again on every run: ~60 links, ~80 CPU-seconds), and
# internal/testbin runs them as go test -json would, two packages at a
# time, each in its folder, for gotestsum to read.
TESTBIN   := bin/testbin
# run_tests,<pass>,<test flags>,<packages> runs a pass's binaries.
run_tests = $(GOTESTSUM) --jsonfile $(TESTOUT)/$(1).json --raw-command -- \
  $(GO) run ./internal/testbin -dir $(TESTBIN)/$(1) -- -test.count=1 $(2) -- $(3)
# gotestsum prints what go test -json says as people read it, and keeps
# the JSON for the report of the slowest tests.
GOTESTSUM := $(GO) tool gotestsum --format pkgname-and-test-fails --format-hide-empty-pkg

.PHONY: run build test test-passes check-generate-vet test-packages test-race test-plain e2e-binaries test-e2e vet check-generate generate bench chaos fuzz clean npm web check-web

run: build
	$(BIN) serve

build:
	$(GO) build -o $(BIN) ./cmd/turngate

# make test checks the generated code and the built web app first (vet
# after generate, which it reads; the web app's build beside them), then
# runs the passes beside one private PostgreSQL that every test package
# shares (internal/dbtest/withpostgres): one initdb and one server, not
# one per package. The passes run one after the other: each keeps both
# cores busy (measured: run side by side, they starve the tests that bound
# a wall time, the sandbox's and a lease's), and a failure in one still
# runs the others.
test: npm
	@rm -rf $(TESTOUT); mkdir -p $(TESTOUT)
	@$(MAKE) --no-print-directory -j2 check-web check-generate-vet
	@$(GO) run ./internal/dbtest/withpostgres -- $(MAKE) --no-print-directory test-passes

check-generate-vet: check-generate
	@$(MAKE) --no-print-directory vet

# The plain pass runs beside the e2e tier's two links (one core's work
# each, no test's wall time), which the tier then finds done.
test-passes:
	@$(MAKE) --no-print-directory test-race; race=$$?; \
	  $(MAKE) --no-print-directory -k -j2 test-plain e2e-binaries; plain=$$?; \
	  $(MAKE) --no-print-directory test-e2e; rest=$$((plain | $$?)); \
	  echo "the 20 slowest tests of this run:"; \
	  cat $(TESTOUT)/*.json | $(GO) tool gotestsum tool slowest --num 20; exit $$((race | rest))

# test-packages is the package tier on its own.
test-packages: test-race test-plain

test-race:
	@mkdir -p $(TESTOUT)
	$(GO) test -race -c -o $(TESTBIN)/race/ $(RACE_PKGS) >/dev/null
	$(call run_tests,race,-test.timeout=10m,$(RACE_PKGS))

test-plain:
	@mkdir -p $(TESTOUT)
	@pkgs="$$($(GO) list $(PKGS) | grep -v -x -F -f <($(GO) list $(RACE_PKGS) ./e2e)) $(NORACE_PKGS)"; set -x; \
	  $(GO) test -c -o $(TESTBIN)/plain/ $$pkgs >/dev/null && \
	  $(call run_tests,plain,-test.timeout=10m,$$pkgs)

# e2e-binaries builds the two binaries the e2e tier runs: race-built for
# the server's fault tests, static and plain for the rest (see
# internal/e2etest). go build skips a link whose output is up to date.
e2e-binaries:
	$(GO) build -race -o $(E2E_BIN) ./cmd/turngate
	CGO_ENABLED=0 $(GO) build -trimpath -o $(STATIC_BIN) ./cmd/turngate
	$(GO) test -c -o $(TESTBIN)/e2e/ ./e2e

test-e2e: e2e-binaries
	@mkdir -p $(TESTOUT)
	TURNGATE_E2E_BINARY=$(abspath $(E2E_BIN)) TURNGATE_E2E_PLAIN_BINARY=$(abspath $(STATIC_BIN)) \
	  $(call run_tests,e2e,-test.timeout=15m -test.parallel=6,./e2e)

vet:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v -e '^ent/' -e '/generated/')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

# npm installs the TypeScript client's and the web app's packages (exactly
# the locked versions) where they are missing or older than the lockfile
# (npm ci writes node_modules/.package-lock.json last). make run and go
# build need none of it: the built web app is committed.
NPM_DIRS := clients/ts web/app
npm:
	@for d in $(NPM_DIRS); do \
	  [ $$d/node_modules/.package-lock.json -nt $$d/package-lock.json ] || (cd $$d && npm ci --no-audit --no-fund) || exit 1; \
	done

# generate: ent first, then the migration diff (on a throwaway private
# Postgres), then gqlgen, then the clients' typed operations (genqlient for
# the Go client, graphql-codegen for the TypeScript one). A stale generated.go still compiles but fails at run
# time, so the order matters.
generate: npm
	cd ent && $(GO) run entc.go
	cd migrations && $(GO) run gen.go
	$(GO) tool gqlgen generate --config gqlgen.yml
	cd clients/go && $(GO) tool genqlient genqlient.yaml
	cd clients/ts && npx graphql-codegen --config codegen.ts --silent

# check-generate fails when `make generate` changes anything: the committed
# generated code must be exactly what the generators write.
GEN_PATHS := ent graph migrations schema.graphql gqlgen.yml clients/go/generated.go clients/ts/src/generated
gen_state = { git status --porcelain -- $(GEN_PATHS); git diff -- $(GEN_PATHS); } | sha1sum
check-generate:
	@before=$$($(gen_state)); $(MAKE) --no-print-directory generate; after=$$($(gen_state)); \
	  if [ "$$before" != "$$after" ]; then \
	    echo "generated code is stale: run make generate and commit the result"; \
	    git status --porcelain -- $(GEN_PATHS); exit 1; fi

# web rebuilds the chat web app into web/app/dist, which the binary embeds
# (committed, so make run and go build need no Node.js).
web: npm
	cd web/app && npm run --silent typecheck && npm run --silent build

# check-web fails when the committed web app is not what make web builds
# from the committed sources (esbuild's output is byte-identical for the
# same sources and lockfiles).
WEB_PATHS := web/app/dist
web_state = { git status --porcelain -- $(WEB_PATHS); git diff -- $(WEB_PATHS); } | sha1sum
check-web:
	@before=$$($(web_state)); $(MAKE) --no-print-directory web >/dev/null; after=$$($(web_state)); \
	  if [ "$$before" != "$$after" ]; then \
	    echo "the built web app is stale: run make web and commit web/app/dist"; \
	    git status --porcelain -- $(WEB_PATHS); exit 1; fi

# bench prints the benchmarks' figures, each goal as one "goal P<n> ..."
# (or "goal S<n> ...") line ending ok|short: P1 durable acceptance against
# a raw transaction of the same shape; P2 turns at saturation against the
# raw two-commit ceiling, River beside it (and the closed loop's latencies);
# P3 the fan-out to 10,000 journal subscribers in one room, over 100 rooms
# (TURNGATE_FANOUT_SUBSCRIBERS) and to 1,000 SSE streams; P4 the token path
# (provider to subscriber); P5 recovery after kill -9; P6 retrieval over
# 100,000 documents with ACLs; P7 per-turn orchestration CPU; P8 history
# search over 100,000 messages; P9 run_code's start-to-result; P10 long
# rooms (1,000 earlier turns against 50); S1 what anonymous 64 KiB hostile
# documents cost. Each ratio is measured side by side in one run, and one
# package's benchmarks at a time (-p 1): two at once would share the cores.
bench:
	$(GO) test -p 1 -run '^$$' -bench . -benchtime 1x -timeout 30m ./server ./runner ./tools ./sandbox

# chaos runs the fault-injection harness long: 3 replicas, 10 rooms, 400
# turns under kill -9 and SIGSTOP (make test runs a short round).
chaos:
	TURNGATE_CHAOS=long $(GO) test -count=1 -run '^TestChaos$$' -v -timeout 30m ./e2e

# fuzz runs each fuzz target for FUZZTIME, one after the other; make test
# runs their seed corpora (testdata/fuzz and f.Add) as ordinary tests. A
# target is package:FuzzName; add yours with a FUZZ_TARGETS += line.
FUZZTIME     ?= 30s
FUZZ_TARGETS := ./authority:FuzzVerify ./authority:FuzzVerifyMutation ./authority:FuzzVerifyClaims
FUZZ_TARGETS += ./room:FuzzDecodeCursor ./room:FuzzCursorRoundTrip
FUZZ_TARGETS += ./graph:FuzzSubmitInput ./graph/extension:FuzzCheckRawJSON
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
	  echo "$${t#*:} in $${t%%:*} for $(FUZZTIME)"; \
	  $(GO) test -run '^$$' -fuzz "^$${t#*:}\$$" -fuzztime $(FUZZTIME) $${t%%:*}; \
	done

clean:
	rm -rf bin
