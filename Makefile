# The project's verbs. `make test` and `make demo` work from a clean clone.
CARGO ?= cargo
# Two cores: two test threads keep timing-sensitive tests honest.
TEST_THREADS ?= 2

.PHONY: test demo deps fmt lint crds bench

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

# The cost of a scan in Redis, measured side by side (see BENCHMARKS.md).
# The last line printed is the throughput's ratio to the Redis bound.
bench: deps
	$(CARGO) build --profile measure -p assetscan-bench
	./target/measure/assetscan-bench
