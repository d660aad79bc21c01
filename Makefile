# The project's verbs. `make test` and `make demo` work from a clean clone.
CARGO ?= cargo
# Two cores: two test threads keep timing-sensitive tests honest.
TEST_THREADS ?= 2

.PHONY: test demo deps fmt lint crds chart-schema generate model bench scale chaos policy sbom sbom-corpus image pin-images e2e conformance upgrade-test

# What a fresh machine may lack: redis-server, helm and kubectl, Lua with cjson, promtool,
# faketime, Alertmanager; and under target/tools, cargo-deny, the SBOM validator
# and the receivers' Python libraries (Standard Webhooks, CloudEvents, jsonschema).
deps:
	@./scripts/ensure-deps.sh
	@./scripts/ensure-helm.sh
	@./scripts/ensure-lua.sh
	@./scripts/ensure-promtool.sh
	@./scripts/ensure-supply-tools.sh
	@./scripts/ensure-receivers.sh

test: deps
	python3 scripts/source-shape.py
	python3 scripts/import-cycles.py
	python3 scripts/check-links.py
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets --all-features -- -D warnings
	@./scripts/policy.sh
	$(CARGO) test --workspace --all-features -- --test-threads=$(TEST_THREADS)
	$(CARGO) run --quiet -p assetscan-bench -- --quick throughput

# The supply-chain checks (docs/supply-chain.md): the
# dependency policy of deny.toml (licences, one version per crate, crates.io
# only, yanked crates; advisories when the RustSec database is reachable),
# the SBOM checked against Cargo.lock, one version across Cargo.toml, the
# chart, CHANGELOG.md and the Dockerfile, the minimum Rust version.
# POLICY_OFFLINE=1 skips what needs the network.
policy: deps
	@./scripts/policy.sh

# The CycloneDX SBOM of the operator binary: target/sbom/assetscan-operator.cdx.json
# (SBOM_OUT=path to write it elsewhere), then validated.
SBOM_OUT ?= target/sbom/assetscan-operator.cdx.json
sbom: deps
	@python3 scripts/sbom.py --out $(SBOM_OUT)
	@target/tools/py/bin/python scripts/check-sbom.py $(SBOM_OUT)

# What a run asks about for each SBOM of the corpus (docs/sbom.md): a
# Markdown table, a row per document; SBOM_ARGS=--packages lists every
# package's advisory coordinates.
sbom-corpus:
	@$(CARGO) run --quiet --bin assetscan-operator -- sbom $(SBOM_ARGS) $$(ls testkit/fixtures/sbom/*.json testkit/fixtures/sbom/*.xml testkit/fixtures/sbom/*.spdx)

# The operator image, IMAGE:VERSION (IMAGE defaults to the chart's
# image.repository), with docker, podman or buildah; without one it says so
# and fails. Base images must be pinned by digest: `make pin-images` pins
# them (it needs the registries).
image:
	@./scripts/image.sh

pin-images:
	@./scripts/pin-base-images.sh

# The end-to-end scenarios (tests/e2e) on the cluster KUBECONFIG names
# (`make e2e KUBECONFIG=~/.kube/config`): CRDs installed when absent, the
# chart's RBAC in a namespace of the run's own, the operator as processes
# with that RBAC's ServiceAccount token; everything it created is removed
# at the end and listed. E2E_FLAGS=--no-garbage-collector for an API server
# without kube-controller-manager. `make test` runs the same scenarios on
# the API emulator.
e2e:
	@./scripts/ensure-deps.sh
	@./scripts/ensure-helm.sh
	$(CARGO) test --all-features --test e2e -- --kubeconfig "$(KUBECONFIG)" $(E2E_FLAGS)

# The emulator's conformance requests sent to the cluster KUBECONFIG names
# as well, the answers compared field by field, every difference listed;
# fails on a difference tests/conformance/main.rs does not explain. `make
# test` compares the emulator with the cluster answers recorded in
# tests/conformance/recorded.json instead; CONFORMANCE_FLAGS="--record
# tests/conformance/recorded.json" records them again from this cluster.
conformance:
	$(CARGO) test --all-features --test conformance -- --kubeconfig "$(KUBECONFIG)" $(CONFORMANCE_FLAGS)

# The real operator binary (with the fault-drill feature), then the demo
# driver, which starts that binary from its own target directory: both go
# through cargo, so CARGO_TARGET_DIR is honoured.
demo: deps
	$(CARGO) build --features failpoints --bin assetscan-operator
	$(CARGO) run --features failpoints --example demo

# The operator at scale (docs/scaling.md): the real binary against the API
# emulator in its own process, SCALE_COUNTS AssetScans with each of
# SCALE_SHARDS shard counts (one replica per shard, one fresh stack per run),
# then a rescale SCALE_RESCALE mid-run at the largest count (empty: none),
# and a summary with the ratios. About 30 minutes with the defaults on two
# cores; SCALE_COUNTS=1000 SCALE_SHARDS=1,2 for a quick look. Release builds
# by default: the figures are those of the shipped binary (SCALE_PROFILE=dev
# reuses the test build on a busy machine). SCALE_KUBECONFIG=path runs on
# that cluster instead (CRDs installed; a namespace of its own, deleted at
# the end). SCALE_ARGS passes more flags (`cargo run -p assetscan-scale --
# --help`), e.g. the chart's start bound: --starts-per-second 20 --starts-burst 20.
# Two scenarios run instead of the counts and the rescale, at the largest of
# SCALE_COUNTS, under the chart's start bound (20/s, burst 20) unless
# --starts-per-second/--starts-burst say otherwise; each prints its checks
# (✓/✗) and fails on one:
#   --fairness: replicas watching every namespace (the emulator only);
#     namespace B's --fairness-few (default 20) AssetScans timed from their
#     creation to all Finished alone, then again created right after
#     namespace A's were created; behind A / alone <= 2x.
#   --failover: 3 replicas of one shard (--replicas-per-shard), the last
#     SIGKILLed when half have finished; its unfinished share's first run
#     finished by a survivor within the chart's membershipTtl (10 s) + 10 s
#     (--membership-ttl-ms 60000 shows the check fail), all Finished, no
#     AssetScan notified under two idempotency keys, no run finished twice.
# E.g. make scale SCALE_COUNTS=10000 SCALE_ARGS=--failover.
SCALE_COUNTS ?= 10000,100000
SCALE_SHARDS ?= 1,4
SCALE_RESCALE ?= 2,4,2
SCALE_IDLE ?= 30
SCALE_PROFILE ?= release
SCALE_KUBECONFIG ?=
# Packages per asset (0: only the high-risk assets' 4) and where they are:
# inline (spec.software) or sbom (by reference to an SBOM).
SCALE_PACKAGES ?= 0
SCALE_SOFTWARE ?= inline
scale: deps
	$(CARGO) build --profile $(SCALE_PROFILE) -p assetscan-operator --bin assetscan-operator
	$(CARGO) build --profile $(SCALE_PROFILE) -p assetscan-testkit --bin kube-emulator
	$(CARGO) run --profile $(SCALE_PROFILE) -p assetscan-scale -- --counts $(SCALE_COUNTS) \
		--shards $(SCALE_SHARDS) --rescale $(SCALE_RESCALE) --idle-seconds $(SCALE_IDLE) \
		--packages $(SCALE_PACKAGES) --software $(SCALE_SOFTWARE) \
		$(if $(SCALE_KUBECONFIG),--kubeconfig $(SCALE_KUBECONFIG)) $(SCALE_ARGS)

fmt:
	$(CARGO) fmt --all

crds:
	UPDATE_CRDS=1 $(CARGO) test --test crd
	cp crds/*.yaml charts/assetscan-operator/crds/

# The chart's values.schema.json, generated from the types the operator reads
# its configuration with and the chart's own values (src/cli/chart/); a test
# fails when the committed file differs.
CHART_SCHEMA := charts/assetscan-operator/values.schema.json
chart-schema:
	$(CARGO) run --quiet --bin assetscan-operator -- values-schema > $(CHART_SCHEMA).new
	mv $(CHART_SCHEMA).new $(CHART_SCHEMA)

# Everything generated: the CRDs and the chart's values schema from their
# types, and from the state machine's declaration (domain/src/machine.rs)
# the tables in lua/*.lua and in the Argo CD health check (with its copy in
# deploy/argocd/argocd-cm-patch.yaml) and the table in docs/design.md; and
# the scripts' argument decoder from lua/lib/arguments.lua.
# `make test` fails when one is behind.
generate: crds chart-schema
	$(CARGO) run --quiet -p assetscan-generate

# Model check of the fencing protocol (docs/model.md); prints the states
# explored and the time. MODEL_MUTANT=<name> takes one defence away: the
# check must then end in a counterexample (exit 1). The checker is built
# optimised even in the dev profile (see Cargo.toml), so it shares the
# operator's debug build.
model:
	$(CARGO) run --quiet -p assetscan-model

# The cost of a scan in Redis, measured side by side (see docs/benchmarks.md).
# The last line printed is the throughput's ratio to the Redis bound.
bench: deps
	$(CARGO) build --profile measure -p assetscan-bench
	$(CARGO) run --quiet --profile measure -p assetscan-bench

# A seeded chaos run: 3 replicas, a few hundred AssetScans, many faults at
# once, then the invariant checker. CHAOS_SEED replays a run; CHAOS_SCALE=bounded
# is the small run that `make test` includes.
chaos:
	@./scripts/ensure-deps.sh
	$(CARGO) build -p assetscan-chaos --bins
	$(CARGO) run --quiet -p assetscan-chaos --bin assetscan-chaos

# A rolling upgrade from a release (UPGRADE_FROM=X.Y.Z, a section of
# CHANGELOG.md; default the latest; built from the commit it names, in a git
# worktree under target/upgrade/) to this tree, and a rollback, with scans
# and alerts in flight in two namespaces (replicas watching all), checked by
# the chaos invariants strictly (every high-risk run FINISHED and alerted,
# every refused webhook delivery a violation) and both releases' CRDs
# (docs/upgrading.md). Not part of `make test`: it builds a second tree.
# UPGRADE_ARGS: `--receiver legacy|both|standard` (which signatures the
# webhook receiver verifies; `standard` must fail), `--kubeconfig PATH` for a
# real cluster, `--inject different-lock|no-bridge|required-field` to see it fail.
UPGRADE_FROM ?=
upgrade-test:
	@./scripts/ensure-deps.sh
	@UPGRADE_FROM="$(UPGRADE_FROM)" ./scripts/upgrade-test.sh

# What /metrics costs at 10 000 AssetScans in a replica's watch cache: one
# scrape's time (the status-derived gauges computed, everything encoded)
# and its size. METRICS_COST_OBJECTS changes the count.
.PHONY: metrics-cost
METRICS_COST_OBJECTS ?= 10000
metrics-cost:
	$(CARGO) run --quiet --release --example metrics_cost -- $(METRICS_COST_OBJECTS)
