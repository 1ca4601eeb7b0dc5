# Polycrate Operator — build, generate, test.
# Every tool the build needs is built from pinned Go modules into ./bin; nothing is downloaded
# as a prebuilt binary (the envtest control plane is compiled from source, see hack/envtest).

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

VERSION    ?= $(shell go run ./hack/version 2>/dev/null || echo dev)
COMMIT     ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
BUILD_DATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
IMG        ?= polycrate-operator:$(subst +,_,$(VERSION))
CONTAINER_TOOL ?= docker

VERSION_PKG := github.com/polycrate/polycrate-operator/internal/version
# The operator binary's build tags (internal/testutil.OperatorBuildTags, the Dockerfile):
# grpcnotrace keeps the binary from linking every method (docs/operations.md).
GO_BUILD_TAGS := grpcnotrace
LDFLAGS := -s -w -X $(VERSION_PKG).Version=$(VERSION) -X $(VERSION_PKG).Commit=$(COMMIT) -X $(VERSION_PKG).BuildDate=$(BUILD_DATE)

LOCALBIN := $(CURDIR)/bin
CONTROLLER_GEN := $(LOCALBIN)/controller-gen

# envtest control plane, built from source (hack/envtest) the first time it is needed.
ENVTEST_K8S_VERSION ?= 1.37.2
ENVTEST_K8S_MINOR   := $(word 2,$(subst ., ,$(ENVTEST_K8S_VERSION)))
ENVTEST_ASSETS_DIR  := $(LOCALBIN)/k8s/$(ENVTEST_K8S_VERSION)
ENVTEST_LDFLAGS := -X k8s.io/component-base/version.gitVersion=v$(ENVTEST_K8S_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(ENVTEST_K8S_MINOR) \
	-X k8s.io/component-base/version.gitTreeState=clean
# A user-provided KUBEBUILDER_ASSETS wins over the built one.
KUBEBUILDER_ASSETS ?= $(ENVTEST_ASSETS_DIR)
export KUBEBUILDER_ASSETS
# cert-manager's DNS01 conformance fixture (internal/webhooks/dns01) looks its binaries up
# at package init; it never runs kubectl (it applies no fixture manifests), but
# wants the variable set.
export TEST_ASSET_ETCD ?= $(KUBEBUILDER_ASSETS)/etcd
export TEST_ASSET_KUBE_APISERVER ?= $(KUBEBUILDER_ASSETS)/kube-apiserver
export TEST_ASSET_KUBECTL ?= $(KUBEBUILDER_ASSETS)/kubectl

GO_TEST_FLAGS ?= -timeout 25m

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: controller-gen ## Generate CRDs (config/crd/bases) and RBAC (config/rbac/role.yaml) from markers, and copy both into the Helm chart.
	$(CONTROLLER_GEN) rbac:roleName=polycrate-operator-manager crd paths="./..." output:crd:artifacts:config=config/crd/bases
	go run ./hack/gen-chart

.PHONY: generate
generate: controller-gen ## Generate DeepCopy methods and the resource tables of docs/api-contract.md.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./..."
	go run ./hack/gen-api-contract

.PHONY: fmt
fmt: ## Run go fmt.
	go fmt ./...

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: test
test: prefetch manifests generate vet envtest chromium ## Run all tests: unit, fuzz seeds, short fuzzing, envtest integration (control plane built on demand; the endpoints discovery suite also with --cache-mode=stock), a reduced chaos run with a 3-minute soak, the chart's alerts and dashboard (test/promql), then one demo run.
	go test $(GO_TEST_FLAGS) ./...
	POLYCRATE_CACHE_MODE=stock go test $(GO_TEST_FLAGS) -count=1 ./internal/controller/discovery/endpoints
	$(MAKE) --no-print-directory fuzz-short
	cd test/promql && go vet ./... && go test $(GO_TEST_FLAGS) ./...
	rm -rf bin/demo-test
	DEMO_ONCE=1 go run ./hack/demo -state-dir bin/demo-test -api-addr 127.0.0.1:18090 -dns-addr 127.0.0.1:18053 -external-dns-port 18888 \
	  -health-probe-bind-address 127.0.0.1:18081 -metrics-bind-address 127.0.0.1:18080 > bin/demo-test.log 2>&1 \
	  || { tail -50 bin/demo-test.log; tail -50 bin/demo-test/operator.log; echo "make test: the demo did not converge (logs: bin/demo-test.log, bin/demo-test/operator.log)"; exit 1; }
	@sed -n '/what the Polycrate API now holds/,/converged; DEMO_ONCE/p' bin/demo-test.log | grep -v '"level"' 

# The module downloads of the envtest build and of test/promql (network-bound)
# run in the background while the tools and the operator compile (CPU-bound),
# on a cold make test. Go's module cache is safe for
# concurrent downloads; a later build of either module waits for it.
.PHONY: prefetch
prefetch:
	@mkdir -p $(LOCALBIN); ( (cd hack/envtest && go mod download) ; (cd test/promql && go mod download) ) > $(LOCALBIN)/prefetch.log 2>&1 &

FUZZTIME ?= 5s
# The targets whose test packages have few dependencies (4 to 87): their
# instrumented builds take seconds, so make test fuzzes them briefly (fuzz-short).
# The emulator's request decoding, the webhook bodies and the DNS01 challenges
# sit in test packages of 600 to 1,300 dependencies (minutes to instrument on a
# cold machine): make test runs their seed corpora, make fuzz fuzzes them.
FUZZ_LIGHT_TARGETS := ./internal/annotations:FuzzParse ./internal/metasecret:FuzzParse ./internal/names:FuzzNames ./internal/names:FuzzEndpointInjective \
  ./internal/polycrate:FuzzResponseDecoding ./internal/webhooks/dnsname:FuzzRelativeAbsolute
FUZZ_TARGETS := $(FUZZ_LIGHT_TARGETS) ./internal/emulator:FuzzRequestDecoding ./internal/webhooks/externaldns:FuzzWebhookBodies ./internal/webhooks/dns01:FuzzChallenge
# fuzz-short counts executions, not seconds: with a duration, Go 1.26's fuzz
# coordinator can end a clean run in a spurious "context deadline exceeded"
# when the deadline fires while a worker is mid-call on a loaded machine
# (golang/go#75804, fixed in Go 1.27; CI hit it once). A count has no deadline.
FUZZ_SHORT_TIME ?= 3000x

.PHONY: fuzz
fuzz: envtest ## Fuzz every parser and decoder reachable from outside for FUZZTIME each (make test runs their seed corpora, and fuzz-short).
	@for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; echo "fuzz $$pkg $$fn ($(FUZZTIME))"; \
	  go test $$pkg -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) || exit 1; done

.PHONY: fuzz-short
fuzz-short: ## Fuzz the light targets for FUZZ_SHORT_TIME (an execution count) each (part of make test).
	@for t in $(FUZZ_LIGHT_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; echo "fuzz $$pkg $$fn ($(FUZZ_SHORT_TIME))"; \
	  go test $$pkg -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZ_SHORT_TIME) || exit 1; done

.PHONY: fleet
fleet: envtest ## Roll a new operator version across a big simulated fleet (test/fleet: 2 real operators on envtest, 40 simulated agents); make test runs a reduced one.
	go test ./test/fleet -count=1 -v -timeout 30m -args -fleet.real=2 -fleet.simulated=40 -fleet.percentage=10

.PHONY: race
race: envtest ## The Go tests of internal/, cmd/ and test/ under the race detector, the operator binaries the suites build included; the first race halts (not part of make test: 14 minutes on 2 cores with a warm build cache).
	GORACE=halt_on_error=1 go test -race -count=1 -timeout 60m $$(go list ./internal/... ./cmd/... ./test/... | grep -v '/internal/cloud$$')
	hack/race-cloud.sh

.PHONY: chaos
chaos: envtest ## Fault-inject the operator binary (test/chaos: outage, 429, latency, resets, kill -9 ×20, leader kill/pause) and write the results table to bin/chaos/results.md (docs/reliability.md); make test runs a reduced one.
	go test ./test/chaos -count=1 -v -timeout 60m -args -chaos.full -chaos.out=$(CURDIR)/bin/chaos/results.md
	@cat bin/chaos/results.md

# The soak's length (make soak); make test runs a 3-minute one. Its fault
# cadence and its leak bounds scale with it (test/chaos/soak_test.go).
SOAK ?= 30m

.PHONY: soak
soak: envtest ## Run the operator for SOAK (default 30m) under Ingress churn, API brownouts and leader handovers; fail on a leak (RSS, live heap, goroutines, files); samples and plot in bin/soak (docs/reliability.md).
	go test ./test/chaos -count=1 -v -timeout 3h -args -ginkgo.focus='the soak' -chaos.soak=$(SOAK) -chaos.soak-out=$(CURDIR)/bin/soak
	@echo "soak samples: bin/soak/soak.csv, plot: bin/soak/soak.svg"

.PHONY: chromium
chromium: ## Make sure a headless Chromium exists for the browser test of the rollout dashboard (Debian's package; installed when run as root).
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || command -v google-chrome >/dev/null 2>&1 || \
	  { if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	      echo "installing Debian's chromium for the dashboard's browser test"; \
	      (apt-get update -qq || true) && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	    else echo "make test needs a headless Chromium: apt-get install chromium (as root)"; exit 1; fi; }

# The scale harness's tiers (Ingresses; each tier in a fresh control plane):
# make bench BENCH_SIZES=1000,5000,20000 for the cost-growth table (about an hour here).
BENCH_SIZES ?= 5000

.PHONY: bench
bench: envtest ## Run the benchmarks, then the scale harness (test/perf) at BENCH_SIZES Ingresses (PERF_ARGS for more flags). Not part of make test.
	go test -run '^$$' -bench . -benchmem ./...
	$(MAKE) --no-print-directory perf

.PHONY: perf
perf: envtest ## Run only the scale harness at BENCH_SIZES (e.g. 1000,5000,20000); exits non-zero when a target is missed or a phase fails.
	go run ./test/perf -sizes $(BENCH_SIZES) $(PERF_ARGS)

# Endpoints for make perf-informer (20,000 Ingresses × 2 hosts).
INFORMER_ENDPOINTS ?= 40000
# Extra flags, e.g. INFORMER_ARGS="-runs 5 -cpuprofile /tmp/prof" (one CPU profile per mode).
INFORMER_ARGS ?=

.PHONY: perf-informer
perf-informer: envtest ## Measure the Endpoint informer's initial list at INFORMER_ENDPOINTS: the one-pass LIST (the default), the streaming list, client-go's LIST (what bounds a restart at 20,000 Ingresses).
	go run ./test/perf/informersync -endpoints $(INFORMER_ENDPOINTS) $(INFORMER_ARGS)

.PHONY: verify
verify: manifests generate ## Regenerate and fail if generated files (CRDs, deepcopy, RBAC) or gofmt differ from the tree, or a function outside tests is over 80 lines.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	@big="$$(git ls-files -z | xargs -0 -r du -b 2>/dev/null | awk '$$1 > 1048576 {print $$2}')"; \
	  test -z "$$big" || { echo "tracked files over 1 MiB (build outputs do not belong in git):"; echo "$$big"; exit 1; }
	@git diff --exit-code -- config api docs/api-contract.md || { echo "generated files are out of date: run 'make generate manifests' and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- config api docs/api-contract.md)" || { git status --porcelain -- config api docs/api-contract.md; echo "untracked generated files: commit them"; exit 1; }
	@cd test/promql && go mod tidy -diff >/dev/null || { echo "test/promql/go.mod is out of date (the operator's dependencies changed?): run 'cd test/promql && go mod tidy' and commit"; exit 1; }
	@go run ./hack/funclen $$(git ls-files '*.go')

##@ Build

.PHONY: build
build: manifests generate ## Build the operator binary into bin/.
	CGO_ENABLED=0 go build -tags $(GO_BUILD_TAGS) -ldflags "$(LDFLAGS)" -o $(LOCALBIN)/polycrate-operator ./cmd/polycrate-operator

.PHONY: demo
demo: envtest ## Run the operator on embedded defaults: local control plane + CRDs + OperatorConfig + operator (Ctrl-C stops all).
	go run ./hack/demo $(DEMO_ARGS)

.PHONY: emulator
emulator: ## Run the Polycrate API emulator on 127.0.0.1:8090 (default seed, data in bin/emulator.db).
	go run ./cmd/polycrate-api-emulator --data bin/emulator.db $(EMULATOR_ARGS)

.PHONY: run
run: manifests generate ## Run the operator against the current kubeconfig.
	go run -tags $(GO_BUILD_TAGS) -ldflags "$(LDFLAGS)" ./cmd/polycrate-operator run

.PHONY: docker-build
docker-build: ## Build the container image (needs a Docker engine).
	$(CONTAINER_TOOL) build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) --build-arg BUILD_DATE=$(BUILD_DATE) -t $(IMG) .

.PHONY: docker-push
docker-push: ## Push the container image.
	$(CONTAINER_TOOL) push $(IMG)

##@ Deployment

.PHONY: install
install: manifests ## Install the CRDs into the cluster of the current kubeconfig.
	go run ./cmd/polycrate-operator install-crds

.PHONY: deploy
deploy: manifests ## Deploy the operator with kustomize (config/default) into the current cluster.
	kubectl apply -k config/default

.PHONY: uninstall
uninstall: manifests ## Delete the CRDs (and with them every custom resource!) from the current cluster.
	go run ./cmd/polycrate-operator crds | kubectl delete --ignore-not-found -f -

##@ Tools

.PHONY: controller-gen
controller-gen: $(CONTROLLER_GEN) ## Build controller-gen (pinned in hack/tools/go.mod).
$(CONTROLLER_GEN): hack/tools/go.mod hack/tools/go.sum
	cd hack/tools && go build -o $(CONTROLLER_GEN) sigs.k8s.io/controller-tools/cmd/controller-gen

.PHONY: envtest
envtest: $(ENVTEST_ASSETS_DIR)/kube-apiserver $(ENVTEST_ASSETS_DIR)/etcd ## Build the envtest control plane from source (once; ~7 min cold).

$(ENVTEST_ASSETS_DIR)/kube-apiserver:
	@echo "Building kube-apiserver v$(ENVTEST_K8S_VERSION) from source (once, several minutes)..."
	cd hack/envtest && go build -ldflags "$(ENVTEST_LDFLAGS)" -o $@ ./kube-apiserver

$(ENVTEST_ASSETS_DIR)/etcd:
	@echo "Building etcd from source (once)..."
	cd hack/envtest && go build -o $@ ./etcd
