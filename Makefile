# wasmccm. `make help` lists the targets.
#
# Expensive tools (kube-apiserver + etcd, TinyGo) are built once by the
# hack/install-*.sh scripts and cached in $(WASMCCM_CACHE), outside the work
# tree, so fresh clones reuse them.

SHELL := /bin/bash
export WASMCCM_CACHE ?= $(HOME)/.cache/wasmccm
GO ?= go
BIN := bin
TINYGO_WASIP1 := $(WASMCCM_CACHE)/tinygo/v0.42.0/bin/tinygo-wasip1
MODULE_PKG := ./modules/simcloud/module
# Fuzz targets run for a count of inputs, about ten seconds each here, not
# for a duration: a duration's deadline races the fuzzing workers on a busy
# machine and fails a run that found nothing (golang/go#75804, fixed in Go
# 1.27). FUZZTIME (e.g. 60s) replaces every count.
FUZZTIME ?=
fuzztime = $(or $(FUZZTIME),$(1))
# The ABI (abi/) and the SDK (modules/sdk) are Go modules of their own,
# standard library only: ./... of the root does not reach them, so every
# target runs them from their directories too (IN_STDLIB_MODULES). The SDK's
# export bodies are reached only from wasip1 files, so both are also checked
# as wasip1 builds.
STDLIB_MODULES := abi modules/sdk
IN_STDLIB_MODULES = for m in $(STDLIB_MODULES); do (cd $$m && $(1)) || exit 1; done
STATICCHECK := $(WASMCCM_CACHE)/bin/staticcheck-v0.8.2

.PHONY: help deps control-plane-deps tinygo-deps node-deps build image modules docs test test-unit test-e2e fuzz lint vet staticcheck chart demo demo-hybrid bench scale requests clean

help: ## List the targets.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

# deps builds TinyGo beside kube-apiserver and etcd (make -j2 deps), as
# they share no package and neither keeps both processors busy throughout,
# and Helm after them, as it compiles many of the same packages.
deps: control-plane-deps tinygo-deps ## Install and cache kube-apiserver and etcd (the current release and the skew job's), TinyGo and Helm (minutes cold, instant cached).
	hack/install-helm.sh

control-plane-deps:
	hack/install-e2e-deps.sh

tinygo-deps:
	hack/install-tinygo.sh

node-deps: ## Build and cache containerd 2, runc, kubelet, kube-controller-manager and kube-scheduler from the Go module proxy.
	hack/install-node-deps.sh

build: ## Build the CCM, the wasmccm tool and the simulated cloud into bin/.
	$(GO) build -o $(BIN)/ ./cmd/...

image: ## Build the manager image (linux/amd64 + arm64, no Docker) as an OCI layout in bin/image.
	$(GO) run ./hack/image -o $(BIN)/image

docs: ## Generate docs/reference from the code (a unit test fails when it is stale).
	$(GO) run ./hack/docgen

# PROVIDER_MODULES are the provider modules under modules/, each with its
# main package in modules/NAME/module.
PROVIDER_MODULES := simcloud hcloud aws digitalocean

modules: ## Build the provider modules (simcloud, hcloud, aws, digitalocean) with standard Go and TinyGo, raw and gzipped.
	@mkdir -p $(BIN)
	for m in $(PROVIDER_MODULES); do \
	  GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -ldflags='-s -w' -o $(BIN)/$$m-go.wasm ./modules/$$m/module && \
	  $(TINYGO_WASIP1) build -buildmode=c-shared -scheduler=none -gc=leaking -no-debug -opt=2 -o $(BIN)/$$m-tinygo.wasm ./modules/$$m/module && \
	  gzip -9 -k -f $(BIN)/$$m-go.wasm $(BIN)/$$m-tinygo.wasm || exit 1; \
	done
	@ls -l $(BIN)/*.wasm $(BIN)/*.wasm.gz

test: ## Everything CI runs: lint, chart, unit, end-to-end and a short fuzz run, with the time of each phase.
	GO=$(GO) hack/test.sh

test-unit: ## Unit tests only: every package outside test/, as CI's unit phase.
	$(GO) test $$($(GO) list ./... | grep -v /test/)

test-e2e: deps node-deps ## End-to-end tests only.
	WASMCCM_E2E=1 WASMCCM_REQUIRE_TINYGO=1 $(GO) test -count=1 ./test/...

fuzz: ## Short runs of every fuzz target.
	cd abi && $(GO) test -run '^$$' -fuzz '^FuzzDecodeResult$$' -fuzztime $(call fuzztime,400000x)
	cd abi && $(GO) test -run '^$$' -fuzz '^FuzzDecodeRequest$$' -fuzztime $(call fuzztime,100000x)
	$(GO) test ./runtime/cloudconfig -run '^$$' -fuzz '^FuzzParseConfig$$' -fuzztime $(call fuzztime,300x)
	$(GO) test ./runtime/deletion/window -run '^$$' -fuzz '^FuzzDeletionBudget$$' -fuzztime $(call fuzztime,30000x)
	$(GO) test ./modules/simcloud -run '^$$' -fuzz '^FuzzDecodeAgreesWithEncodingJSON$$' -fuzztime $(call fuzztime,50000x)
	$(GO) test ./modules/aws/internal/xmltree -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(call fuzztime,80000x)

$(STATICCHECK):
	GOBIN=$(@D) $(GO) install honnef.co/go/tools/cmd/staticcheck@v0.8.2
	mv $(@D)/staticcheck $@

lint: vet staticcheck ## gofmt, go vet and staticcheck, host and wasip1.

vet: ## gofmt and go vet (host and wasip1).
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(call IN_STDLIB_MODULES,$(GO) vet ./... && GOOS=wasip1 GOARCH=wasm $(GO) vet ./...)
	GOOS=wasip1 GOARCH=wasm $(GO) vet ./modules/...

# staticcheck holds the analysis of every package it has loaded: collecting
# garbage a quarter as often saves it a fifth of its processor time, for
# one or two gigabytes more memory
# (docs/benchmarks/notes/2026-11-27-make-test-cold-compilation-sharing.md).
staticcheck: export GOGC = 400
staticcheck: $(STATICCHECK) ## staticcheck (host and wasip1).
	$(STATICCHECK) ./...
	$(call IN_STDLIB_MODULES,$(STATICCHECK) $$($(GO) list ./... | grep -v /export/) && GOOS=wasip1 GOARCH=wasm $(STATICCHECK) ./...)
	GOOS=wasip1 GOARCH=wasm $(STATICCHECK) ./modules/...

CHART := charts/wasm-cloud-controller-manager

chart: ## helm lint and helm template of the chart (the deploy tests check what it renders).
	@helm=$$(hack/install-helm.sh | tail -1) && \
	  "$$helm" lint --strict $(CHART) && \
	  "$$helm" template wasm-cloud-controller-manager $(CHART) --namespace kube-system >/dev/null && \
	  echo "helm template $(CHART): ok"

# The demo installs what it runs itself (kube-apiserver, etcd, TinyGo), not
# Helm, which only the chart target uses.
demo: ## Run the local demo: apiserver + simulated cloud + CCM with the module.
	hack/demo.sh

demo-hybrid: ## The demo of a hybrid cluster: simulated cloud and fake Hetzner Cloud, one CCM with both modules.
	hack/demo.sh -provider hybrid

bench: deps ## Benchmarks: wasm (Go, TinyGo) against the same provider run natively.
	hack/bench.sh

scale: deps ## Scale test: N tainted Nodes and 200 LoadBalancer Services (N=1000 by default, e.g. N=5000), results in docs/benchmarks/results.
	$(if $(N),WASMCCM_SCALE_NODES=$(N) )hack/scale.sh

requests: deps ## Cloud API requests per hour of the hcloud module in steady state (N=60,1000,5000 Nodes).
	hack/requests.sh

clean: ## Remove bin/ (the cache in $(WASMCCM_CACHE) stays).
	rm -rf $(BIN)
