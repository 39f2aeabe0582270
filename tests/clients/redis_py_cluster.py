"""redis-py's RedisCluster against strata-server nodes in cluster mode.

Run by crates/strata-server/tests/cluster.rs with the port of one node
as the only argument (the client finds the others by CLUSTER SLOTS).
Each check raises on a wrong answer; the last line printed is
"ok <number of checks>".
"""

import sys

from redis.cluster import ClusterNode, RedisCluster
from redis.exceptions import RedisClusterException, ResponseError

port = int(sys.argv[1])
rc = RedisCluster(
    startup_nodes=[ClusterNode("127.0.0.1", port)], decode_responses=True
)
checks = 0


def check(condition, what):
    global checks
    if not condition:
        raise AssertionError(what)
    checks += 1


nodes = rc.get_nodes()
check(len(nodes) >= 1, "the client found the nodes")

# Plain keys land on whichever node owns their slot.
for n in range(200):
    rc.set(f"py:{n}", n)
check(all(rc.get(f"py:{n}") == str(n) for n in range(200)), "read back")
check(rc.keyslot("foo") == 12182, "the client agrees on slots")

# Hash tags keep keys together for multi-key commands and transactions.
rc.mset({"{user1}:name": "ada", "{user1}:lang": "en"})
check(rc.mget("{user1}:name", "{user1}:lang") == ["ada", "en"], "MGET one slot")
try:
    rc.execute_command("MSET", "foo", "1", "bar", "2")
    check(False, "MSET over two slots must fail")
except (ResponseError, RedisClusterException) as error:
    # redis-py refuses it itself, or passes the server's CROSSSLOT on.
    check("slot" in str(error).lower(), f"CROSSSLOT: {error}")

# Non-atomic helpers split by slot.
check(
    rc.mget_nonatomic("py:1", "py:2", "py:3") == ["1", "2", "3"],
    "mget_nonatomic across slots",
)

# A pipeline across slots (redis-py groups its commands by node).
with rc.pipeline() as pipe:
    for n in range(20):
        pipe.incr(f"counter:{n}")
    check(pipe.execute() == [1] * 20, "cluster pipeline")

# Scripts with keys of one slot.
script = rc.register_script("return redis.call('INCRBY', KEYS[1], ARGV[1])")
check(script(keys=["{user1}:visits"], args=[5]) == 5, "script")

# Every node reports the same topology.
slots = rc.cluster_slots()
check(sum(end - start + 1 for (start, end) in slots) == 16384, "full coverage")
sizes = rc.dbsize(target_nodes=RedisCluster.PRIMARIES)
total = sizes if isinstance(sizes, int) else sum(sizes.values())
check(total == 200 + 2 + 20 + 1, f"keys across the primaries: {total}")

print(f"ok {checks}")
