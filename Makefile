# The project's verbs. `make test` and `make demo` work from a clean clone.
CARGO ?= cargo
# Two cores: two test threads keep timing-sensitive tests honest.
TEST_THREADS ?= 2

.PHONY: test demo deps fmt lint crds chaos

# What a fresh machine may lack: redis-server, helm, Lua with cjson, promtool.
deps:
	@./scripts/ensure-deps.sh
	@./scripts/ensure-helm.sh
	@./scripts/ensure-lua.sh
	@./scripts/ensure-promtool.sh

test: deps
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets --all-features -- -D warnings
	$(CARGO) test --workspace --all-features -- --test-threads=$(TEST_THREADS)

# The real operator binary (with the fault-drill feature) and the demo driver.
demo: deps
	$(CARGO) build --features failpoints --bin assetscan-operator --example demo
	./target/debug/examples/demo

fmt:
	$(CARGO) fmt --all

crds:
	UPDATE_CRDS=1 $(CARGO) test --test crd
	cp crds/assetscans.assetscan.io.yaml charts/assetscan-operator/crds/

# A seeded chaos run: 3 replicas, a few hundred AssetScans, many faults at
# once, then the invariant checker. CHAOS_SEED replays a run; CHAOS_SCALE=bounded
# is the small run that `make test` includes.
chaos:
	@./scripts/ensure-deps.sh
	$(CARGO) build -p assetscan-chaos --bins
	./target/debug/assetscan-chaos
