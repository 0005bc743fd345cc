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

demo: build
	./scripts/demo.sh $(BIN)

install: build
	install -D -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/corral

clean:
	rm -rf bin
