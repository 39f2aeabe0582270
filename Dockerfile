# syntax=docker/dockerfile:1
# strata-server in a container, with the documented strata.conf:
#   docker build -t strata .
#   docker run -p 6379:6379 -v strata-data:/data strata
# The data directory is /data. The container listens on every address with
# protected mode off, as Redis' official image does: set a password
# (--requirepass) or keep the port private.
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
# The crate registry and the build directory are BuildKit cache mounts
# (Docker 23+ builds with BuildKit): a rebuild after a source change
# compiles the workspace again, not every dependency. The binary is copied
# out of the cached directory, which the next stage cannot see.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin strata-server \
    && cp target/release/strata-server /usr/local/bin/strata-server

FROM debian:bookworm-slim
RUN useradd --system --home /data --shell /usr/sbin/nologin strata \
    && mkdir -p /data /etc/strata \
    && chown strata:strata /data
COPY --from=build /usr/local/bin/strata-server /usr/local/bin/strata-server
COPY strata.conf /etc/strata/strata.conf
USER strata
WORKDIR /data
VOLUME /data
EXPOSE 6379
STOPSIGNAL SIGTERM
# Healthy once PING answers +PONG (bash's /dev/tcp: the image has no
# redis-cli). With --requirepass, PING answers -NOAUTH: override this
# check (docker run --health-cmd ...) or disable it (--no-healthcheck).
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
    CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/6379 && printf 'PING\\r\\n' >&3 && IFS= read -r -t 2 reply <&3 && [ \"${reply%$'\\r'}\" = +PONG ]"]
CMD ["strata-server", "/etc/strata/strata.conf", "--bind", "0.0.0.0", "--protected-mode", "no", "--dir", "/data"]
