# syntax=docker/dockerfile:1
# The operator image. Build it with `make image` (scripts/image.sh), which
# passes the build arguments below from Cargo.toml and git, refuses base
# images that are not pinned by digest, and builds reproducibly
# (SOURCE_DATE_EPOCH). A plain `docker build -t assetscan-operator .` also
# works, with the defaults below.
#
# Base images: pinned by digest (tag@sha256:...) once `make pin-images`
# (scripts/pin-base-images.sh) has resolved the tags below on a machine that
# reaches the registries; `make image` builds only from pinned bases.
ARG BUILDER_IMAGE=docker.io/library/rust:1.95-slim-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot

# Build stage: the release binary, with the versions of Cargo.lock.
FROM ${BUILDER_IMAGE} AS builder
ARG SOURCE_DATE_EPOCH
# make: jemalloc's build (tikv-jemalloc-sys) runs it; the slim image has
# the C compiler but not make.
RUN apt-get update && apt-get install -y --no-install-recommends make \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    CARGO_INCREMENTAL=0 cargo build --release --locked --bin assetscan-operator \
 && install -D -m 0755 target/release/assetscan-operator /out/assetscan-operator

# Runtime: distroless (glibc, CA certificates, no shell), non-root user 65532.
FROM ${RUNTIME_IMAGE}
# The release's version: Cargo.toml's package version, the chart's appVersion
# and CHANGELOG.md's latest release (scripts/check-release.py checks that they
# agree; `make image` passes the Cargo.toml version).
ARG VERSION=0.2.0
ARG REVISION=unknown
ARG CREATED=1970-01-01T00:00:00Z
ARG SOURCE=https://github.com/assetscan/assetscan-operator
LABEL org.opencontainers.image.title="assetscan-operator" \
      org.opencontainers.image.description="Kubernetes operator that runs fenced, crash-safe security scans per asset" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=builder /out/assetscan-operator /usr/local/bin/assetscan-operator
USER 65532:65532
# /metrics, /healthz, /readyz
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/assetscan-operator"]
CMD ["run"]
