#!/usr/bin/env python3
"""A TCP proxy for the benches: listens on 127.0.0.1:LISTEN and forwards
every connection to 127.0.0.1:TARGET, both ways, until it is killed.

bench/replication.sh puts it between a replica and its primary and kills
it to cut the link (both ends see the connection close, and the replica's
reconnects are refused until the proxy is started again on the same
port).

Usage: bench/tcp_proxy.py LISTEN TARGET
"""
import socket
import sys
import threading


def pump(src, dst):
    try:
        while True:
            data = src.recv(1 << 16)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def main():
    listen, target = int(sys.argv[1]), int(sys.argv[2])
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", listen))
    server.listen(16)
    while True:
        client, _ = server.accept()
        try:
            upstream = socket.create_connection(("127.0.0.1", target), timeout=5)
            upstream.settimeout(None)
        except OSError:
            client.close()
            continue
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=pump, args=(a, b), daemon=True).start()


if __name__ == "__main__":
    main()
