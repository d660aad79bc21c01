# The project's verbs. `make test` and `make demo` work from a clean clone.
CARGO ?= cargo
# Two cores: two test threads keep timing-sensitive tests honest.
TEST_THREADS ?= 2

.PHONY: test demo deps fmt lint crds model

deps:
	@./scripts/ensure-deps.sh

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

# Model check of the fencing protocol (docs/model.md); prints the states
# explored and the time. MODEL_MUTANT=<name> takes one defence away: the
# check must then end in a counterexample (exit 1). The checker is built
# optimised even in the dev profile (see Cargo.toml), so it shares the
# operator's debug build.
model:
	$(CARGO) run --quiet -p assetscan-model
