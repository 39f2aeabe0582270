# strata-server in a container, with the documented strata.conf:
#   docker build -t strata .
#   docker run -p 6379:6379 -v strata-data:/data strata
# The data directory is /data. The container listens on every address with
# protected mode off, as Redis' official image does: set a password
# (--requirepass) or keep the port private.
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --bin strata-server

FROM debian:bookworm-slim
RUN useradd --system --home /data --shell /usr/sbin/nologin strata \
    && mkdir -p /data /etc/strata \
    && chown strata:strata /data
COPY --from=build /src/target/release/strata-server /usr/local/bin/strata-server
COPY strata.conf /etc/strata/strata.conf
USER strata
WORKDIR /data
VOLUME /data
EXPOSE 6379
STOPSIGNAL SIGTERM
CMD ["strata-server", "/etc/strata/strata.conf", "--bind", "0.0.0.0", "--protected-mode", "no", "--dir", "/data"]
