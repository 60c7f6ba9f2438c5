# Casebook. `make help` lists the targets.
GO       ?= go
BIN      := bin/casebook
PKGS     := ./...
# ops/goclient is a module of its own (the Go client generated from openapi.json and its
# walk-through, see its doc comment): test generates the client afresh, compiles it and runs it.
CLIENT   := ops/goclient
# Tests check that subscriptions never change the event bytes they share (eventstore.Tail).
export CASEBOOK_CHECK_SHARED_EVENTS := 1
# `make fuzz` runs each fuzz target for FUZZTIME; `make test` runs only their seed corpora.
# A count, not a duration: go1.26's fuzz coordinator can fail a target with "context deadline
# exceeded" when a duration ends while a worker is mid-input (go.dev/issue/75804, fixed in go1.27).
FUZZTIME ?= 20000x
FUZZ     := ./adapters/httpapi:FuzzIntakeDecode ./commands:FuzzNormalize \
            ./adapters/slack/callbacks:FuzzVerify ./adapters/slack/callbacks:FuzzParseInteraction \
            ./projections/querymodel:FuzzFastDecodeMatchesJSON ./internal/flatjson:FuzzEachOnlyValidJSON \
            ./commands:FuzzFingerprintMatchesJSON ./adapters/httpapi:FuzzCheckKeysFlat ./domain:FuzzMetadataAppendJSON \
            ./eventstore/sealed:FuzzTenantOf ./eventstore/sealed:FuzzOpenMembers

.PHONY: help run build test test-race test-short lint bench fuzz tidy client

help: ## list targets
	@awk 'BEGIN{FS=":.*## "} /^[a-zA-Z_-]+:.*## /{printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# casebook version and /healthz report these.
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT   ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -X github.com/casebook/casebook/internal/buildinfo.Version=$(VERSION) -X github.com/casebook/casebook/internal/buildinfo.Commit=$(COMMIT)

build: ## build bin/casebook (version and commit stamped)
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/casebook

run: build ## run casebook serve on the embedded SQLite default (./casebook-data)
	./$(BIN) serve

test: ## vet, then all tests with the race detector (Postgres tests need TEST_DATABASE_URL), then the generated client's
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout 20m $(PKGS)
	cd $(CLIENT) && $(GO) generate ./... && $(GO) vet ./... && $(GO) test -race -count=1 -timeout 10m ./...

test-race: ## alias of test: the suite always runs with -race
	$(GO) test -race -count=1 -timeout 20m $(PKGS)
	cd $(CLIENT) && $(GO) generate ./... && $(GO) test -race -count=1 -timeout 10m ./...

test-short: ## tests without the race detector, for a quick loop
	$(GO) test -count=1 $(PKGS)
	cd $(CLIENT) && $(GO) generate ./... && $(GO) test -count=1 ./...

GOLANGCI_VERSION := v2.15.0
GOLANGCI := $(shell command -v golangci-lint 2>/dev/null || echo $(shell $(GO) env GOPATH)/bin/golangci-lint)

lint: ## go vet, the layering rule (internal/layers) and golangci-lint (installed on first use)
	$(GO) vet $(PKGS)
	$(GO) test -count=1 -run 'TestTreeKeepsLayers|TestCheckRefusesViolations|TestNoErrorTextMatching' ./internal/layers/
	@test -x $(GOLANGCI) || $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_VERSION)
	$(GOLANGCI) run $(PKGS)

bench: ## Go benchmarks (one pass each)
	$(GO) test -run '^$$' -bench . -benchtime 1x $(PKGS)

fuzz: ## run each fuzz target for FUZZTIME (default 20000 inputs)
	@set -e; for t in $(FUZZ); do \
	  echo "fuzz $${t#*:} ($(FUZZTIME))"; \
	  $(GO) test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) "$${t%%:*}"; \
	done

tidy: ## go mod tidy (both modules)
	$(GO) mod tidy
	cd $(CLIENT) && $(GO) generate ./... && $(GO) mod tidy

client: ## generate ops/goclient/casebookapi from adapters/httpapi/openapi.json (ogen, pinned in its go.mod)
	cd $(CLIENT) && $(GO) generate ./...
