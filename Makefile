# The project's verbs. `make test` and `make demo` work from a clean clone.
CARGO ?= cargo
# Two cores: two test threads keep timing-sensitive tests honest.
TEST_THREADS ?= 2

.PHONY: test demo deps fmt lint crds

deps:
	@./scripts/ensure-deps.sh

test: deps
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) test --workspace -- --test-threads=$(TEST_THREADS)

demo: deps
	$(CARGO) run --release -p assetscan-testkit --bin demo

fmt:
	$(CARGO) fmt --all

crds:
	UPDATE_CRDS=1 $(CARGO) test --test crd
