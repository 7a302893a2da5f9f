# Folio build targets. `make test` is the README's test command and what CI runs.
GO ?= go
# pipefail: a recipe that filters a command's output through grep still
# fails when the command does.
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
# Fuzz smoke runs count executions, not seconds: Go 1.26's fuzz coordinator
# can report a spurious failure when a -fuzztime duration expires (golang/go#75804).
FUZZTIME ?= 100000x
PROTOS := internal/wire/v3/protocolpb/bookkeeper_protocol.proto internal/metadata/formatpb/data_formats.proto

# TAGS are the build tags of the test targets: invariants compiles in the
# expensive cross-checks of internal/ledger's write pipeline and recovery
# (internal/ledger/invariants.go), which panic at the first inconsistency.
# Production builds (build, release) never set it.
TAGS ?= invariants

.PHONY: all build test vet unit allocs sim fuzz-smoke compat bench-java bench-compare bench-scale fuzz proto proto-check bench sim-long release docs

all: build

build:
	$(GO) build ./...

# test: everything CI checks.
test: vet unit allocs sim fuzz-smoke compat

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go') | grep -v '\.pb\.go$$')" || \
		{ echo "gofmt would change:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
	$(GO) vet -tags '$(TAGS)' ./...

unit:
	$(GO) test -race -tags '$(TAGS)' -timeout 20m ./...

# allocs runs the allocation-count tests without -race: the race detector
# changes allocation behaviour (sync.Pool drops items), so under -race they skip.
# client/ has one too (TestAppendAllocs: the client's allocations per append,
# on bookie processes).
allocs:
	$(GO) test -count=1 -run 'Alloc' ./internal/... ./client/

# sim runs the simulator's seeds and mutation tests without -race: under
# -race they shrink to a few seeds and the mutation tests skip. With TAGS,
# every seed also runs the machines' invariant checks.
sim:
	$(GO) test -tags '$(TAGS)' -count=1 -v -run 'TestDeterminism|TestSeeds|TestRecoveryRace|TestMutation|TestIssue21Paths|TestLACNeverAhead' ./internal/sim/ | grep -E '^(=== RUN|--- |PASS|FAIL|ok)|seeds in|found with'

# fuzz-smoke runs every fuzz target for FUZZTIME so that a crash fails CI.
fuzz-smoke:
	./scripts/fuzz.sh $(FUZZTIME)

# compat runs the interop harness (its own module, compat/): Apache
# BookKeeper's Java code from Maven Central against Folio. It needs Java 17+
# and Maven: without them it skips with a message saying so, or fails if
# FOLIO_COMPAT=require (as .ci/run sets). FOLIO_COMPAT=off skips it.
# compat: one package at a time (-p 1): each starts JVMs and bookies, and two
# at once on two cores would slow both past the per-package budget.
compat:
	cd compat && $(GO) vet ./... && $(GO) test -p 1 -count=1 -v -timeout 20m ./...

# bench-java: Apache BookKeeper's own benchmark tools (BenchThroughputLatency,
# BenchBookie, from org.apache.bookkeeper:bookkeeper-benchmark) against Java
# bookies and then Folio bookies on one ZooKeeper, with the raw fdatasync
# baseline of the same run (compat/benchjava; docs/performance.md). Not part
# of CI. Knobs: FOLIO_BENCH_SECONDS, FOLIO_BENCH_ENTRY_SIZE,
# FOLIO_BENCH_THROTTLES, FOLIO_BENCH_BOOKIES, FOLIO_BENCH_LATENCY_COUNT,
# FOLIO_BENCH_THROUGHPUT_COUNT, FOLIO_BENCH_ORDER (Java,Folio or Folio,Java).
bench-java:
	cd compat && $(GO) test -tags benchjava -count=1 -v -timeout 30m -run TestBenchJava ./benchjava/

# bench-scale: the "Many ledgers" benchmark (docs/performance.md): 10k and
# 100k ledgers in one store on the real disk, memory before and after an
# eviction sweep, start-up and replay, one GC pass. Not part of CI. Knobs:
# FOLIO_SCALE_LEDGERS (counts, comma-separated), FOLIO_SCALE_HEAP_PROFILES.
bench-scale:
	$(GO) test -tags scalebench -count=1 -v -timeout 30m -run TestScaleManyLedgers ./internal/storage/ledgerstore/

# bench-compare: the side-by-side benchmark of issue 22 (compat/benchcompare;
# docs/performance.md "Side-by-side harness"): Java 4.17 bookies (BookKeeper's
# defaults, then journalFlushWhenQueueEmpty=true) and Folio bookies on one
# ZooKeeper, each driven by BookKeeper's own Java code and by Folio's Go
# client, one workload at a time; prints a Markdown table and writes it to
# FOLIO_BCMP_OUT. Not part of CI. FOLIO_BCMP_QUICK=1 is a few-minute smoke
# run; the other knobs (FOLIO_BCMP_SECONDS, _ROWS, _CLUSTERS, _DRIVERS,
# _WARMUP, _GO_WARMUP, _CATCHUP_MB, _CATCHUP_LEDGERS, _CATCHUP_ENTRY,
# _TAIL_RATE) are in docs/performance.md.
bench-compare:
	cd compat && $(GO) test -tags benchcompare -count=1 -v -timeout 4h -run TestBenchCompare ./benchcompare/

# fuzz: the long run, not part of CI.
fuzz:
	./scripts/fuzz.sh 10000000x

# docs regenerates the generated parts of docs/ (the bk_server.conf key
# table in docs/operations.md; internal/bookie/server's tests check it).
docs:
	$(GO) run ./internal/bookie/server/cmd/keytable -w docs/operations.md

# proto regenerates the committed Go code from the .proto files.
proto:
	for p in $(PROTOS); do \
		protoc --plugin=protoc-gen-go="$$($(GO) tool -n protoc-gen-go)" \
			-I $$(dirname $$p) --go_out=$$(dirname $$p) --go_opt=paths=source_relative $$p || exit 1; \
	done

# proto-check fails when the committed generated code differs from `make proto`.
proto-check: proto
	git diff --exit-code -- '*.pb.go'

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# sim-long: many more simulator seeds than CI's TestSeeds and
# TestRecoveryRace (not part of `make test`).
SIM_SEEDS ?= 5000
RACE_SEEDS ?= 50000
sim-long:
	$(GO) run ./cmd/folio sim -seed 1 -seeds $(SIM_SEEDS) | grep -E '^(VIOLATION|replay|elapsed)'
	$(GO) run ./cmd/folio sim -seed 100001 -seeds $$(( $(SIM_SEEDS) / 5 )) -full-intensity | grep -E '^(VIOLATION|replay|elapsed)'
	$(GO) run ./cmd/folio sim -workload recovery-race -seed 1000001 -seeds $(RACE_SEEDS) | grep -E '^(VIOLATION|replay|elapsed)'

# release: static folio binaries for linux/amd64 and linux/arm64 in dist/,
# with the version from `git describe` and the commit linked in, and their
# SHA-256 checksums (dist/SHA256SUMS; check with `sha256sum -c`).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
RELEASE_LDFLAGS = -s -w -X github.com/foliodb/folio/internal/cli.version=$(VERSION) -X github.com/foliodb/folio/internal/cli.commit=$(COMMIT)
release:
	rm -rf dist && mkdir -p dist
	for arch in amd64 arm64; do \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -buildvcs=false -ldflags "$(RELEASE_LDFLAGS)" \
			-o dist/folio-$(VERSION)-linux-$$arch ./cmd/folio || exit 1; \
	done
	cd dist && sha256sum folio-* > SHA256SUMS
	@cat dist/SHA256SUMS
