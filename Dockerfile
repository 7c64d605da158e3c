# Dockerfile -- container image of checkpoint-sentinel.
#
# Targets (stages in the order the classic builder runs them; it stops at --target):
#   runtime-base  the small runtime: Debian + a non-root user + the state/config directories.
#   builder       compiles the release binary from source in ${RUST_IMAGE}.
#   runtime       (default) runtime-base + the binary from `builder`: docker build .
# Every stage is needed by the default target, so a plain `docker build .` (classic builder or
# BuildKit) needs no binary on the host. For an image around a binary built on the host (no
# Rust image to pull), see Dockerfile.prebuilt, built on top of `--target runtime-base`.
#
# Both images run `checkpoint-sentinel run --config /etc/checkpoint-sentinel/config.toml` as
# uid 65532, serve /metrics, /healthz and /readyz on 0.0.0.0:9717, keep their state in the
# volume /var/lib/checkpoint-sentinel and write nothing else, so the root filesystem can be
# mounted read-only. See docs/deployment.md for how the image was built and run on a machine
# without registry access (debootstrap + docker import as RUNTIME_BASE).

# Base of the runtime image. Any Debian/Ubuntu-like image with bash, useradd and a glibc at
# least as new as the builder's (bookworm: 2.36). It should carry a CA bundle at
# /etc/ssl/certs/ca-certificates.crt for https:// JobManagers; the `runtime` target copies the
# builder's bundle in, for `prebuilt` the base must have it (debootstrap --include=ca-certificates).
ARG RUNTIME_BASE=debian:bookworm-slim
# Rust toolchain image for the `builder` stage (edition 2024, rust-version 1.88 or newer).
ARG RUST_IMAGE=rust:1.95-bookworm

# ---------------------------------------------------------------------------------------------
FROM ${RUNTIME_BASE} AS runtime-base

# A fixed non-root uid/gid (the distroless "nonroot" id), so Kubernetes' runAsUser/fsGroup and
# file ownership on volumes match without a lookup.
ARG UID=65532
ARG GID=65532
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN groupadd --system --gid "${GID}" sentinel \
 && useradd --system --no-log-init --uid "${UID}" --gid "${GID}" --no-create-home \
      --home-dir /var/lib/checkpoint-sentinel --shell /usr/sbin/nologin sentinel \
 && mkdir -p /var/lib/checkpoint-sentinel /etc/checkpoint-sentinel \
 && chown "${UID}:${GID}" /var/lib/checkpoint-sentinel \
 && chmod 0750 /var/lib/checkpoint-sentinel

# The reference configuration (every key at its default; one cluster at 127.0.0.1:8081, which
# inside a container is the container itself). Mount your own config over it, e.g.
#   docker run -v $PWD/sentinel.toml:/etc/checkpoint-sentinel/config.toml:ro …
# with [[clusters]] url = "http://<jobmanager host>:8081" (Kubernetes: the chart's ConfigMap).
COPY config/checkpoint-sentinel.toml /etc/checkpoint-sentinel/config.toml

# Listen on all interfaces inside the container (the reference file says 127.0.0.1). The
# environment overrides the file; unset or change it with -e SENTINEL_SERVER__LISTEN=...
# Logs go to stdout as JSON lines (SENTINEL_LOG_FORMAT=text for humans).
ENV SENTINEL_SERVER__LISTEN=0.0.0.0:9717 \
    SENTINEL_LOG_FORMAT=json

VOLUME ["/var/lib/checkpoint-sentinel"]
EXPOSE 9717
WORKDIR /var/lib/checkpoint-sentinel

# Liveness without curl or wget in the image: bash's /dev/tcp speaks HTTP/1.0 to /healthz on
# the port of SENTINEL_SERVER__LISTEN. Kubernetes ignores HEALTHCHECK; the chart uses httpGet
# probes on /healthz and /readyz.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["/bin/bash", "-c", "port=${SENTINEL_SERVER__LISTEN##*:}; exec 3<>/dev/tcp/127.0.0.1/${port:-9717} && printf 'GET /healthz HTTP/1.0\\r\\n\\r\\n' >&3 && head -n1 <&3 | grep -q ' 200 '"]

USER ${UID}:${GID}
ENTRYPOINT ["/usr/local/bin/checkpoint-sentinel"]
CMD ["run", "--config", "/etc/checkpoint-sentinel/config.toml"]

# ---------------------------------------------------------------------------------------------
FROM ${RUST_IMAGE} AS builder
WORKDIR /src
# Manifests first, so the dependency download is cached apart from source changes.
COPY Cargo.toml Cargo.lock ./
RUN mkdir src \
 && echo 'fn main() {}' > src/main.rs \
 && touch src/lib.rs \
 && cargo fetch --locked \
 && rm -rf src
COPY build.rs ./
COPY src ./src
# The git commit for checkpoint_sentinel_build_info (.git is not in the build context):
#   docker build --build-arg SENTINEL_GIT_REVISION=$(git rev-parse --short=12 HEAD) .
ARG SENTINEL_GIT_REVISION=unknown
ENV SENTINEL_GIT_REVISION=${SENTINEL_GIT_REVISION}
RUN cargo build --release --locked --bin checkpoint-sentinel \
 && cp target/release/checkpoint-sentinel /checkpoint-sentinel

# ---------------------------------------------------------------------------------------------
FROM runtime-base AS runtime
# COPY writes as root whatever USER says; the process still runs as 65532 (from runtime-base).
COPY --from=builder /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=builder /checkpoint-sentinel /usr/local/bin/checkpoint-sentinel
