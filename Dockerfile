# syntax=docker/dockerfile:1
# The operator image: `docker build -t assetscan-operator .`
# Build stage: the release binary, with the versions of Cargo.lock.
ARG RUST_VERSION=1.95
FROM rust:${RUST_VERSION}-slim-bookworm AS builder
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin assetscan-operator \
 && install -D -m 0755 target/release/assetscan-operator /out/assetscan-operator

# Runtime: distroless (glibc, CA certificates, no shell), non-root user 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=builder /out/assetscan-operator /usr/local/bin/assetscan-operator
USER 65532:65532
# /metrics, /healthz, /readyz
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/assetscan-operator"]
CMD ["run"]
