# warren — two commands set everything up on a fresh Debian/Ubuntu machine (as root):
#   make run    builds, provisions the data directory and the `base` template, serves on 127.0.0.1:3000
#   make test   installs what the tests need and runs every test suite
# make install puts warren and its systemd unit on this host (docs/operations.md).
SHELL       := /bin/bash
DATA_DIR    ?= /var/lib/warren
# Slow build artefacts (debootstrap trees) live outside the clone and survive it.
CACHE_DIR   ?= /var/cache/warren
LISTEN      ?= 127.0.0.1:3000
GO          ?= go
# runc's libcontainer needs cgo (nsenter) and the seccomp tag (libseccomp).
GO_TAGS     := seccomp
# warren-fleet is the same CLI built with the kube tag: the gateway, node drain|uncordon, node mode and
# the fleet suite, which need client-go and controller-runtime. bin/warren links none of them, since
# libcontainer re-executes it at every sandbox start (docs/kubernetes-binsplit.md). Its tag-only packages:
FLEET_TAGS  := seccomp,kube
FLEET_PKGS  := ./cmd/warren ./internal/bench ./internal/daemon
APT_PKGS    := btrfs-progs libseccomp-dev debootstrap busybox-static pkg-config gcc iproute2 nftables patch libnss-myhostname chromium
TEST_FLAGS  ?= -count=1 -timeout 40m
# The packages with goroutines and locks of their own: make test-unit runs their tests under the race
# detector (which needs cgo: gcc, from make deps). The store's are SQLite's, not its own.
RACE_PKGS       := ./cmd/warren ./internal/agentconn ./internal/bench ./internal/daemon ./internal/keylock ./internal/mcpserver \
	./internal/metrics ./internal/network/... ./internal/procs ./internal/runtime/runtimeset ./internal/sandbox \
	./internal/sandboxlog ./internal/server ./internal/session
# (envdfs has goroutines too, but every test of it needs root.)
AGENT_RACE_PKGS := ./internal/link ./internal/process ./internal/reaper ./internal/tools ./internal/tunnel
# The rest of each module's packages (test/e2e apart), tested without it.
UNIT_PKGS        = $(filter-out $(shell $(GO) list -tags '$(GO_TAGS)' $(RACE_PKGS)) %/test/e2e,$(shell $(GO) list -tags '$(GO_TAGS)' ./...))
AGENT_UNIT_PKGS  = $(filter-out $(shell cd agent && $(GO) list $(AGENT_RACE_PKGS)),$(shell cd agent && $(GO) list ./...))
# What the privileged tests are told: where the binaries, the cache and runsc are.
ROOT_TEST_ENV    = WARREN_CACHE_DIR=$(CACHE_DIR) WARREN_BIN=$(CURDIR)/bin WARREN_RUNSC=$(RUNSC) $(KUBE_TEST_ENV)
# Fuzzing: each target's time in make test, and in make fuzz.
TEST_FUZZTIME ?= 20s
FUZZTIME      ?= 5m
# The E2B compatibility suite runs the real `e2b` npm package (pinned in its package.json).
E2B_DIR     := test/e2e/e2b
# The MCP conformance test runs the real `@modelcontextprotocol/sdk` npm package, pinned the same way.
MCP_DIR     := test/e2e/mcp
# The web dashboard's sources (built into internal/ui/dist, committed) and its browser test, which drives
# Debian's chromium with the `playwright-core` npm package (nothing downloads a browser).
UI_DIR      := ui
UI_TEST_DIR := test/e2e/ui
# gVisor's runsc (the gvisor runtime), built once from the Go module proxy into the cache, outside the
# clone (about 4 minutes, 80 MB). Static: a cgo build fails at run time.
RUNSC_VERSION := v0.0.0-20260905035102-160fafc42237
RUNSC         := $(CACHE_DIR)/runsc/$(RUNSC_VERSION)/runsc
# staticcheck (make vet), built the same way from the Go module proxy into the cache.
STATICCHECK_VERSION := v0.8.2
STATICCHECK         := $(CACHE_DIR)/staticcheck/$(STATICCHECK_VERSION)/staticcheck
# The Kubernetes API's deepcopy functions and CRDs (make generate), by controller-gen built the same way.
CONTROLLER_GEN_VERSION := v0.21.0
CONTROLLER_GEN         := $(CACHE_DIR)/controller-gen/$(CONTROLLER_GEN_VERSION)/controller-gen
# envtest's control plane (etcd and kube-apiserver, for the tests of warren's Kubernetes resources on a real
# API server), built from the Go module proxy through the throwaway modules of scripts/envtest/ (whose go.mod
# templates pin these versions) into the cache, outside the clone: etcd about 4 minutes, kube-apiserver 15-20.
ENVTEST_K8S_VERSION  := v1.36.3
ENVTEST_ETCD_VERSION := v3.6.16
ENVTEST_DIR          := $(CACHE_DIR)/envtest/k8s-$(ENVTEST_K8S_VERSION:v%=%)
ENVTEST_BINS         := $(ENVTEST_DIR)/etcd $(ENVTEST_DIR)/kube-apiserver
# What the tests of the Kubernetes resources are told: where the control plane and controller-gen are.
KUBE_TEST_ENV    = KUBEBUILDER_ASSETS=$(ENVTEST_DIR) WARREN_CONTROLLER_GEN=$(CONTROLLER_GEN)
# make install: the three binaries side by side in LIBDIR (the daemon finds
# warren-agent and warren-gvisor-init beside its own binary), warren linked
# into BINDIR, the unit in UNITDIR, docs/operations.md in DOCDIR. DESTDIR
# stages it all elsewhere.
PREFIX      ?= /usr/local
LIBDIR      ?= $(PREFIX)/lib/warren
BINDIR      ?= $(PREFIX)/bin
DOCDIR      ?= $(PREFIX)/share/doc/warren
UNITDIR     ?= /etc/systemd/system

.PHONY: all build install deps e2b-deps ui ui-deps runsc staticcheck controller-gen envtest run test test-unit test-e2e torture fuzz bench bench-e2b vet generate generate-proto generate-k8s clean

all: build

deps:
	@missing=""; for p in $(APT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
	@# Port URLs on the default domain are <port>-<id>.localhost: libnss-myhostname resolves every
	@# *.localhost name to loopback (RFC 6761), once nsswitch.conf's hosts line names it (added once,
	@# right after `files`, before any source that could end the lookup).
	@if ! grep -Eq '^hosts:.*[[:space:]]myhostname([[:space:]]|$$)' /etc/nsswitch.conf; then \
		echo "adding myhostname to the hosts line of /etc/nsswitch.conf (*.localhost resolves to loopback)"; \
		if grep -Eq '^hosts:.*[[:space:]]files([[:space:]]|$$)' /etc/nsswitch.conf; then \
			sed -i -E '/^hosts:/ s/([[:space:]])files([[:space:]]|$$)/\1files myhostname\2/' /etc/nsswitch.conf; \
		else \
			sed -i -E '/^hosts:/ s/$$/ myhostname/' /etc/nsswitch.conf; \
		fi; \
	fi

# npm ci (from the npm registry only) in each node suite whose node_modules is missing or older
# than its lock file: the E2B suite and the MCP conformance test. node itself is not installed here
# (Debian's is too old), so a missing node fails, unless WARREN_TEST_ALLOW_SKIP=1 (see the README).
e2b-deps:
	@command -v node >/dev/null || { \
		echo "node not found: the E2B SDK suite (TestE2BSDK, TestNetworkE2BSDK) and the MCP conformance test (TestMCPNode) need node >= 20.18.1 (<21) or >= 22 and npm: install them (nodejs.org, NodeSource)"; \
		if [ "$$WARREN_TEST_ALLOW_SKIP" = 1 ]; then echo "WARREN_TEST_ALLOW_SKIP=1: those tests will be skipped"; exit 0; fi; \
		exit 1; }; \
	node -e 'const [a,b,c]=process.versions.node.split(".").map(Number); process.exit(a>=22||(a===20&&(b>18||(b===18&&c>=1)))?0:1)' || \
		{ echo "node $$(node --version) is too old for the e2b SDK: it needs >= 20.18.1 (<21) or >= 22"; exit 1; }; \
	command -v npm >/dev/null || { echo "npm not found: it installs the e2b and MCP SDKs for the node suites"; exit 1; }; \
	for d in $(E2B_DIR) $(MCP_DIR); do \
		m=$$d/node_modules/.package-lock.json; \
		if [ ! -f $$m ] || [ $$d/package-lock.json -nt $$m ] || [ $$d/package.json -nt $$m ]; then \
			(cd $$d && npm ci --no-audit --no-fund) || exit 1; \
		fi; \
	done

# npm ci (npm's cache outside the clone) for the dashboard's build and its browser test, when node_modules
# is missing or older than the lock file.
ui-deps:
	@command -v npm >/dev/null || { \
		echo "npm not found: the dashboard's build check and browser test need node >= 20.19 and npm"; \
		if [ "$$WARREN_TEST_ALLOW_SKIP" = 1 ]; then echo "WARREN_TEST_ALLOW_SKIP=1: those tests will be skipped"; exit 0; fi; \
		exit 1; }
	@command -v npm >/dev/null || exit 0; for d in $(UI_DIR) $(UI_TEST_DIR); do \
		m=$$d/node_modules/.package-lock.json; \
		if [ ! -f $$m ] || [ $$d/package-lock.json -nt $$m ] || [ $$d/package.json -nt $$m ]; then \
			(cd $$d && npm ci --cache $(CACHE_DIR)/npm --no-audit --no-fund) || exit 1; \
		fi; \
	done

# Rebuild the dashboard into internal/ui/dist (commit the result: make run and go build need no node;
# TestCommittedBuildIsFresh fails when it is stale).
ui: ui-deps
	cd $(UI_DIR) && npm run build

build: deps
	@mkdir -p bin
	CGO_ENABLED=1 $(GO) build -tags '$(GO_TAGS)' -o bin/warren ./cmd/warren
	CGO_ENABLED=1 $(GO) build -tags '$(FLEET_TAGS)' -o bin/warren-fleet ./cmd/warren
	cd agent && CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o ../bin/warren-agent ./cmd/warren-agent
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o bin/warren-gvisor-init ./internal/runtime/gvisor/gvisorinit

# install(1) replaces each file by a new one (the old is unlinked), so it is
# safe while the old daemon and sandboxes run: running sandboxes keep the
# agent they started with. The unit names the installed paths.
install: build
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(BINDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(DOCDIR)
	install -m 0755 bin/warren bin/warren-fleet bin/warren-agent bin/warren-gvisor-init $(DESTDIR)$(LIBDIR)/
	ln -sfn $(LIBDIR)/warren $(DESTDIR)$(BINDIR)/warren
	sed -e 's|/usr/local/bin/warren|$(BINDIR)/warren|' -e 's|/usr/local/share/doc/warren|$(DOCDIR)|' dist/systemd/warren.service \
		> $(DESTDIR)$(UNITDIR)/warren.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/warren.service
	install -m 0644 docs/operations.md $(DESTDIR)$(DOCDIR)/
	@if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then systemctl daemon-reload; fi
	@echo "installed; start it with: systemctl enable --now warren (or, after an upgrade: systemctl restart warren)"

# Built only when missing: into a scratch directory first, so that an interrupted build leaves no
# half-written binary behind.
runsc: $(RUNSC)
$(RUNSC):
	@echo "building runsc $(RUNSC_VERSION) into $(@D) (once; takes a few minutes)"
	rm -rf $(@D).tmp && mkdir -p $(@D).tmp
	CGO_ENABLED=0 GOFLAGS=-mod=mod GOBIN=$(@D).tmp $(GO) install -ldflags='-s -w' gvisor.dev/gvisor/runsc@$(RUNSC_VERSION)
	mkdir -p $(@D) && mv $(@D).tmp/runsc $@ && rmdir $(@D).tmp

staticcheck: $(STATICCHECK)
$(STATICCHECK):
	@echo "building staticcheck $(STATICCHECK_VERSION) into $(@D) (once)"
	rm -rf $(@D).tmp && mkdir -p $(@D).tmp
	CGO_ENABLED=0 GOFLAGS=-mod=mod GOBIN=$(@D).tmp $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mkdir -p $(@D) && mv $(@D).tmp/staticcheck $@ && rmdir $(@D).tmp

controller-gen: $(CONTROLLER_GEN)
$(CONTROLLER_GEN):
	@echo "building controller-gen $(CONTROLLER_GEN_VERSION) into $(@D) (once)"
	rm -rf $(@D).tmp && mkdir -p $(@D).tmp
	CGO_ENABLED=0 GOFLAGS=-mod=mod GOBIN=$(@D).tmp $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mkdir -p $(@D) && mv $(@D).tmp/controller-gen $@ && rmdir $(@D).tmp

envtest: $(ENVTEST_BINS)
$(ENVTEST_DIR)/etcd:
	GO=$(GO) ./scripts/envtest/build.sh etcd $@ $(ENVTEST_ETCD_VERSION)
$(ENVTEST_DIR)/kube-apiserver:
	GO=$(GO) ./scripts/envtest/build.sh kube-apiserver $@ $(ENVTEST_K8S_VERSION)

run: build runsc
	mkdir -p $(CACHE_DIR)
	WARREN_RUNSC=$(RUNSC) ./bin/warren serve --data-dir $(DATA_DIR) --cache-dir $(CACHE_DIR) --listen $(LISTEN)

vet: $(STATICCHECK)
	$(GO) vet -tags '$(GO_TAGS)' ./...
	$(GO) vet -tags '$(FLEET_TAGS)' $(FLEET_PKGS)
	cd agent && $(GO) vet ./...
	cd api && $(GO) vet ./...
	cd deploy && $(GO) vet ./...
	cd agent && $(STATICCHECK) -tags '$(GO_TAGS)' ./...
	cd api && $(STATICCHECK) -tags '$(GO_TAGS)' ./...
	cd deploy && $(STATICCHECK) ./...
	$(STATICCHECK) -tags '$(GO_TAGS)' ./...
	$(STATICCHECK) -tags '$(FLEET_TAGS)' $(FLEET_PKGS)

# Everything: the unit tests (make test-unit), then as root the agent's and the main module's
# privileged tests (btrfs, the runtimes, namespaces, cgroups; the unit tests run again beside them, without
# -race) and test/e2e (what make test-e2e runs) in one go test, two packages at a time and four parallel tests
# of a package at a time (test/e2e's mostly wait on their daemons; each daemon has its own cgroup parent, which
# its teardown removes), then the fuzzers.
test: build vet e2b-deps ui-deps runsc test-unit
	@test "$$(id -u)" = 0 || { echo "make test needs root (namespaces, cgroups, btrfs)"; exit 1; }
	mkdir -p $(CACHE_DIR)
	cd agent && $(GO) test $(TEST_FLAGS) ./...
	$(ROOT_TEST_ENV) $(GO) test -tags '$(GO_TAGS)' $(TEST_FLAGS) -p 2 -parallel 4 ./...
	FUZZTIME=$(TEST_FUZZTIME) GO=$(GO) ./scripts/fuzz.sh

# The tests that need no root (-short skips the privileged ones, testutil.RequireRoot), in api/, agent/,
# deploy/ (the manifests, rendered by kustomize's and Helm's libraries and applied to envtest's API server: a
# module of its own, as Helm needs newer k8s.io modules than the main module's) and the main module but
# test/e2e; the concurrent packages under the race detector. A couple of minutes.
test-unit: envtest $(CONTROLLER_GEN)
	cd api && $(GO) test -short $(TEST_FLAGS) ./...
	cd agent && CGO_ENABLED=1 $(GO) test -short -race $(TEST_FLAGS) $(AGENT_RACE_PKGS)
	cd agent && $(GO) test -short $(TEST_FLAGS) $(AGENT_UNIT_PKGS)
	CGO_ENABLED=1 $(GO) test -tags '$(GO_TAGS)' -short -race $(TEST_FLAGS) $(RACE_PKGS)
	CGO_ENABLED=1 $(GO) test -tags '$(FLEET_TAGS)' -short -race $(TEST_FLAGS) $(FLEET_PKGS)
	$(KUBE_TEST_ENV) $(GO) test -tags '$(GO_TAGS)' -short $(TEST_FLAGS) $(UNIT_PKGS)
	cd deploy && $(KUBE_TEST_ENV) $(GO) test -short $(TEST_FLAGS) ./...

# The end-to-end tests of the real binaries (test/e2e), as root, four at a time (each daemon on its own data
# directory, port, fake network host and cgroup parent).
test-e2e: build e2b-deps ui-deps runsc
	@test "$$(id -u)" = 0 || { echo "make test-e2e needs root (namespaces, cgroups, btrfs)"; exit 1; }
	mkdir -p $(CACHE_DIR)
	$(ROOT_TEST_ENV) $(GO) test -tags '$(GO_TAGS)' $(TEST_FLAGS) -parallel 4 ./test/e2e/

# Every fuzz target for FUZZTIME each (make test runs them for TEST_FUZZTIME).
fuzz:
	FUZZTIME=$(FUZZTIME) GO=$(GO) ./scripts/fuzz.sh

# The torture at full size: crash consistency (50 clients, the daemon kill -9ed 20 times) and a soak
# (20 agent-like clients for 10 minutes; WARREN_SOAK=1h for longer). make test runs short versions.
torture: build
	@test "$$(id -u)" = 0 || { echo "make torture needs root"; exit 1; }
	WARREN_TORTURE=long WARREN_CACHE_DIR=$(CACHE_DIR) WARREN_BIN=$(CURDIR)/bin WARREN_RUNSC=$(RUNSC) \
		$(GO) test -tags '$(GO_TAGS)' -count=1 -timeout 60m -v -run 'TestTorture' ./test/e2e/

# Every suite in one report: JSON on stdout (bench.json), a readable table on stderr, a chart beside it.
BENCH_SUITE ?= all
bench: build runsc
	WARREN_RUNSC=$(RUNSC) ./bin/warren bench --suite $(BENCH_SUITE) --plot bench.svg --data-dir $$(mktemp -d /tmp/warren-bench.XXXX) | tee bench.json

# E2B SDK latency (JSON): against E2B_API_URL/E2B_SANDBOX_URL/E2B_API_KEY/E2B_DOMAIN when set,
# else against a throwaway daemon started from ./bin/warren.
bench-e2b: build e2b-deps
	CACHE_DIR=$(CACHE_DIR) $(E2B_DIR)/bench.sh

# The generated code is committed: the agent protocol's (protoc) and the Kubernetes API's deepcopy functions and
# CRDs (controller-gen; a test in make test-unit fails when the committed ones differ from a fresh generation).
generate: generate-proto generate-k8s
generate-proto:
	./scripts/gen-proto.sh
generate-k8s: $(CONTROLLER_GEN)
	CONTROLLER_GEN=$(CONTROLLER_GEN) ./scripts/gen-k8s.sh

clean:
	rm -rf bin
