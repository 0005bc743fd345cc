# corral: build, test, demo, install. `make test` is what CI runs.
GO        ?= go
PREFIX    ?= /usr/local
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
BIN       := bin/corral

export CGO_ENABLED := 0

.PHONY: build test vet fmt-check demo install bench bench-smoke clean

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/corral

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

# The race detector needs cgo; everything else builds static.
test: fmt-check vet
	CGO_ENABLED=1 $(GO) test -race -count=1 ./...

# A runner that leaves two detached helpers behind (one in its own session
# ignoring SIGTERM, one double-forked), then exits; corral adopts, reaps and
# kills them, and its state file says so.
DEMO_STATE ?= /tmp/corral-demo-state.json
define DEMO_RUNNER
setsid sh -c 'trap "" TERM; exec sleep 1000' &
( sleep 1000 & )
sleep 0.3
echo "runner: left two detached helpers behind; exiting with status 3"
exit 3
endef
export DEMO_RUNNER

demo: build
	@echo '$$ corral -v --grace 1 --state $(DEMO_STATE) -- /bin/sh -c "$$DEMO_RUNNER"'
	@$(BIN) -v --grace 1 --poll 0.05 --state $(DEMO_STATE) -- /bin/sh -c "$$DEMO_RUNNER"; \
	  echo "corral exited with status $$? (the runner's own)"
	@echo '$$ cat $(DEMO_STATE)'
	@cat $(DEMO_STATE)

# Benchmarks (docs/benchmarks.md, test/bench/README.md): corral in each mode beside tini, dumb-init,
# catatonit, bwrap and unshare (those installed), one markdown table per
# workload. Run as root: some rows run as uid 65534. bench-smoke runs every
# workload once at a tiny size and fails if anything is broken.
BENCH_FLAGS ?=
# BENCH_BASE: another corral binary (the build before a change) that the
# file-heavy workload runs beside this one; empty: this build alone.
BENCH_BASE ?=
define BENCH_BUILD
	$(GO) build -trimpath -o bin/bench ./test/bench
	$(GO) build -trimpath -o bin/bench-runner ./test/bench/runner
endef

bench: build
	$(BENCH_BUILD)
	bin/bench -corral $(BIN) -runner bin/bench-runner $(BENCH_FLAGS)
	@echo '## The egress proxy: bulk throughput and connection setup, against a direct loopback connection'
	$(GO) test -run '^$$' -bench . -benchtime 2s ./sandbox/internal/egress/ > bin/bench-egress.txt; st=$$?; cat bin/bench-egress.txt; exit $$st
	@echo '## The socket checker: one checked connect (seccomp user notification) against an unchecked one, blocking and non-blocking; one checked chmod and one checked open for writing (subreaper mode'"'"'s filesystem rules); a 200 MB download on a socket the checker connected; one DNS lookup over UDP; a sendmsg under subreaper mode'"'"'s UDP checks'
	$(GO) test -run '^$$' -bench 'Checked|DirectDownload|UDPDNSLookup|SendmsgUnderUDP' -benchtime 2s ./sandbox/internal/sockcheck/ > bin/bench-sockcheck.txt; st=$$?; cat bin/bench-sockcheck.txt; exit $$st
	@echo '## The filesystem rules on a file-heavy run: tar -x of 20,000 files, plain and under --writable, in each mode (BENCH_BASE=PATH: beside that corral build, interleaved), each beside this build without the naming of refused writes; npm ci of 150 packages into --writable, the same way'
	CORRAL_BENCH_BASE=$(BENCH_BASE) $(GO) test -run '^$$' -bench 'BenchmarkMountsTar|BenchmarkNamingNpmCI' -benchtime 5x -timeout 60m ./test/ > bin/bench-fs.txt; st=$$?; cat bin/bench-fs.txt; exit $$st
	@echo '## The copy-on-write workspace: tar -x of 20,000 files into DIR, then grep -r of DIR, through --overlay against directly on DIR (--writable); changes apply of 10,000 changed files'
	$(GO) test -run '^$$' -bench BenchmarkOverlay -benchtime 5x -timeout 60m ./test/ > bin/bench-overlay.txt; st=$$?; cat bin/bench-overlay.txt; exit $$st
	@awk -f test/bench/goals.awk bin/bench-egress.txt bin/bench-sockcheck.txt bin/bench-fs.txt bin/bench-overlay.txt

bench-smoke: build
	$(BENCH_BUILD)
	bin/bench -smoke -corral $(BIN) -runner bin/bench-runner $(BENCH_FLAGS)
	CORRAL_BENCH_FILES=200 $(GO) test -run '^$$' -bench 'BenchmarkMountsTar|BenchmarkNamingNpmCI' -benchtime 1x ./test/
	CORRAL_BENCH_FILES=200 $(GO) test -run '^$$' -bench BenchmarkOverlay -benchtime 1x ./test/

# The binary and its man page (docs/corral.1, written by hand;
# test/manpage_test.go keeps it in step with --help).
MANDIR    ?= $(PREFIX)/share/man

install: build
	install -D -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/corral
	install -D -m 0644 docs/corral.1 $(DESTDIR)$(MANDIR)/man1/corral.1

clean:
	rm -rf bin
