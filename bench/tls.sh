#!/usr/bin/env bash
# The cost of TLS next to plain TCP, on Strata and on redis-server (both
# serve a plain and a TLS port; persistence off), with redis-benchmark:
# SET and GET of 100-byte values from CLIENTS connections, unpipelined
# (the handshake-free steady state: each request is one TLS record) and
# pipelined by 16. Servers and ports alternate for ROUNDS rounds; medians,
# and TLS as a fraction of plain.
#
# Certificates are made with openssl in a temporary directory; clients
# present one (tls-auth-clients yes, the default).
#
# Usage: bench/tls.sh      ROUNDS=5 bench/tls.sh
set -euo pipefail

ROUNDS=${ROUNDS:-3}
CLIENTS=${CLIENTS:-50}
REQUESTS=${REQUESTS:-200000}

cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup tls

CERTS="$WORK/certs"
mkdir -p "$CERTS"
(
    cd "$CERTS"
    echo "subjectAltName=DNS:localhost,IP:127.0.0.1" >server.ext
    echo "extendedKeyUsage=clientAuth" >client.ext
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj "/CN=bench CA" 2>/dev/null
    for who in server client; do
        openssl req -newkey rsa:2048 -nodes -keyout $who.key -out $who.csr -subj "/CN=$who" 2>/dev/null
        openssl x509 -req -in $who.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out $who.crt -days 2 -extfile $who.ext 2>/dev/null
    done
)
TLS_SERVER=(--tls-cert-file "$CERTS/server.crt" --tls-key-file "$CERTS/server.key" --tls-ca-cert-file "$CERTS/ca.crt")
TLS_CLIENT=(--tls --cacert "$CERTS/ca.crt" --cert "$CERTS/client.crt" --key "$CERTS/client.key")

REDIS_TLS=$(free_port)
STRATA_TLS=$(free_port)
start redis redis --save "" --appendonly no --tls-port "$REDIS_TLS" "${TLS_SERVER[@]}"
start strata strata --save "" --appendonly no --tls-port "$STRATA_TLS" "${TLS_SERVER[@]}"

# requests/s of `test` (set|get) with pipeline $2 on port $3, plain or tls.
rps() {
    local test=$1 pipeline=$2 port=$3 mode=$4
    local extra=()
    [ "$mode" = tls ] && extra=("${TLS_CLIENT[@]}")
    redis-benchmark -p "$port" "${extra[@]}" -c "$CLIENTS" -n "$REQUESTS" -P "$pipeline" -d 100 -t "$test" --csv 2>/dev/null |
        awk -F'","' 'NR>1 { gsub(/"/, "", $2); print $2; exit }'
}

declare -A RESULTS
for round in $(seq "$ROUNDS"); do
    for test in set get; do
        for pipeline in 1 16; do
            for server in redis strata; do
                for mode in plain tls; do
                    if [ "$mode" = tls ]; then
                        [ "$server" = redis ] && port=$REDIS_TLS || port=$STRATA_TLS
                    else
                        port=$(port_of "$server")
                    fi
                    RESULTS[$test,$pipeline,$server,$mode]+="$(rps "$test" "$pipeline" "$port" "$mode") "
                done
            done
        done
    done
    echo "round $round done" >&2
done

printf "%-14s %14s %14s %9s %14s %14s %9s\n" test "redis plain" "redis tls" "tls/plain" "strata plain" "strata tls" "tls/plain"
for test in set get; do
    for pipeline in 1 16; do
        row=()
        for server in redis strata; do
            plain=$(echo "${RESULTS[$test,$pipeline,$server,plain]}" | tr ' ' '\n' | grep . | median)
            tls=$(echo "${RESULTS[$test,$pipeline,$server,tls]}" | tr ' ' '\n' | grep . | median)
            row+=("$plain" "$tls" "$(ratio "$tls" "$plain")")
        done
        printf "%-14s %14s %14s %9s %14s %14s %9s\n" "${test^^} -P $pipeline" "${row[@]}"
    done
done
