# warren — two commands set everything up on a fresh Debian/Ubuntu machine (as root):
#   make run    builds, provisions the data directory and the `base` template, serves on 127.0.0.1:3000
#   make test   installs what the tests need and runs every test suite
SHELL       := /bin/bash
DATA_DIR    ?= /var/lib/warren
# Slow build artefacts (debootstrap trees) live outside the clone and survive it.
CACHE_DIR   ?= /var/cache/warren
LISTEN      ?= 127.0.0.1:3000
GO          ?= go
# runc's libcontainer needs cgo (nsenter) and the seccomp tag (libseccomp).
GO_TAGS     := seccomp
APT_PKGS    := btrfs-progs libseccomp-dev debootstrap busybox-static pkg-config gcc
TEST_FLAGS  ?= -count=1 -timeout 40m

.PHONY: all build deps run test test-unit test-e2e bench vet generate clean

all: build

deps:
	@missing=""; for p in $(APT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

build: deps
	@mkdir -p bin
	CGO_ENABLED=1 $(GO) build -tags '$(GO_TAGS)' -o bin/warren ./cmd/warren
	cd agent && CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o ../bin/warren-agent ./cmd/warren-agent

run: build
	mkdir -p $(CACHE_DIR)
	./bin/warren serve --data-dir $(DATA_DIR) --cache-dir $(CACHE_DIR) --listen $(LISTEN)

vet:
	$(GO) vet -tags '$(GO_TAGS)' ./...
	cd agent && $(GO) vet ./...
	cd api && $(GO) vet ./...

test: build vet
	@test "$$(id -u)" = 0 || { echo "make test needs root (namespaces, cgroups, btrfs)"; exit 1; }
	mkdir -p $(CACHE_DIR)
	cd api && $(GO) test $(TEST_FLAGS) ./...
	cd agent && $(GO) test $(TEST_FLAGS) ./...
	WARREN_TEST_DEBOOTSTRAP=1 WARREN_CACHE_DIR=$(CACHE_DIR) WARREN_BIN=$(CURDIR)/bin \
		$(GO) test -tags '$(GO_TAGS)' $(TEST_FLAGS) -p 2 ./...

bench: build
	./bin/warren bench --data-dir $$(mktemp -d /tmp/warren-bench.XXXX)

generate:
	./scripts/gen-proto.sh

clean:
	rm -rf bin
