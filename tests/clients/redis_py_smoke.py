"""redis-py against a running strata-server, used as applications use it.

Run by crates/strata-server/tests/client_libraries.rs with the server's
port as the only argument. Each check raises on a wrong answer; the last
line printed is "ok <number of checks>".
"""

import sys
import threading
import time

import redis
from redis.lock import Lock

port = int(sys.argv[1])
r = redis.Redis(host="127.0.0.1", port=port, decode_responses=True)
checks = 0


def check(condition, what):
    global checks
    if not condition:
        raise AssertionError(what)
    checks += 1


r.flushall()

# pipeline() is transactional by default: MULTI ... EXEC.
with r.pipeline() as pipe:
    pipe.set("a", 1).incr("a").incrby("b", 5).get("a")
    check(pipe.execute() == [True, 2, 5, "2"], "transactional pipeline")

# WATCH-based optimistic locking with retries (redis.transaction helper).
def add_ten(pipe):
    value = int(pipe.get("a"))
    pipe.multi()
    pipe.set("a", value + 10)


r.transaction(add_ten, "a")
check(r.get("a") == "12", "transaction with WATCH")

# A WATCH broken by another client makes EXEC fail with WatchError.
with r.pipeline() as pipe:
    pipe.watch("a")
    r.set("a", 100)
    pipe.multi()
    pipe.set("a", 0)
    try:
        pipe.execute()
        check(False, "WatchError expected")
    except redis.WatchError:
        check(True, "WatchError")
check(r.get("a") == "100", "the broken transaction did not apply")

# Errors inside EXEC come back per command.
with r.pipeline() as pipe:
    pipe.set("s", "text").incr("s").get("s")
    try:
        pipe.execute()
        check(False, "ResponseError expected")
    except redis.ResponseError:
        check(True, "error inside EXEC")
check(r.get("s") == "text", "the rest of the transaction applied")

# Lock: acquire, contention, release (EVALSHA of redis-py's Lua script).
lock = Lock(r, "resource", timeout=5, blocking_timeout=0.2)
check(lock.acquire(), "lock acquired")
other = Lock(r, "resource", timeout=5, blocking_timeout=0.2)
check(not other.acquire(), "a held lock is not acquired twice")
check(lock.extend(5), "lock extended")
lock.release()
check(other.acquire(), "released lock acquired by another")
other.release()
check(r.exists("resource") == 0, "lock key gone after release")

# Scripts: register_script (EVALSHA with EVAL fallback).
transfer = r.register_script(
    """
    local from = tonumber(redis.call('GET', KEYS[1]) or '0')
    if from < tonumber(ARGV[1]) then return redis.error_reply('insufficient') end
    redis.call('DECRBY', KEYS[1], ARGV[1])
    return redis.call('INCRBY', KEYS[2], ARGV[1])
    """
)
r.set("acct:1", 50)
check(transfer(keys=["acct:1", "acct:2"], args=[20]) == 20, "script result")
try:
    transfer(keys=["acct:1", "acct:2"], args=[100])
    check(False, "script error expected")
except redis.ResponseError as error:
    check("insufficient" in str(error), "script error text")
r.script_flush()
check(transfer(keys=["acct:1", "acct:2"], args=[10]) == 30, "reloaded after SCRIPT FLUSH")

# Pub/sub: subscribe, pattern, messages from another connection.
p = r.pubsub()
p.subscribe("news")
p.psubscribe("n*")
deadline = time.time() + 5
while len([m for m in [p.get_message(timeout=0.1)] if m]) == 0 and time.time() < deadline:
    pass
r.publish("news", "hello")
got = []
while len(got) < 2 and time.time() < deadline:
    message = p.get_message(timeout=0.2)
    if message and message["type"] in ("message", "pmessage"):
        got.append((message["type"], message["data"]))
check(sorted(got) == [("message", "hello"), ("pmessage", "hello")], "pub/sub delivery")
p.close()

# Keyspace notifications seen through redis-py's pubsub.
r.config_set("notify-keyspace-events", "KEA")
events = r.pubsub()
events.psubscribe("__keyevent@0__:*")
events.get_message(timeout=1)
r.set("watched", 1)
r.expire("watched", 100)
seen = []
while len(seen) < 2 and time.time() < deadline + 5:
    message = events.get_message(timeout=0.2)
    if message and message["type"] == "pmessage":
        seen.append(message["channel"].split(":", 1)[1])
check(seen == ["set", "expire"], "keyspace events " + repr(seen))
events.close()
r.config_set("notify-keyspace-events", "")

# Many threads doing MULTI/EXEC transfers keep the total.
r.mset({"x": 1000, "y": 1000})


def worker():
    client = redis.Redis(host="127.0.0.1", port=port)
    for i in range(100):
        with client.pipeline() as pipe:
            pipe.decrby("x", 1).incrby("y", 1).execute()


threads = [threading.Thread(target=worker) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
check(int(r.get("x")) + int(r.get("y")) == 2000, "transfers kept the total")
check(r.get("x") == "600", "every transfer applied")

# ACL users: one made with ACL SETUSER logs in with a username, is held
# to its key pattern, and is seen as Redis 7 shows users.
r.execute_command("ACL", "SETUSER", "app", "on", ">s3cret", "~app:*", "+@all", "-@dangerous")
app = redis.Redis(host="127.0.0.1", port=port, username="app", password="s3cret", decode_responses=True)
check(app.acl_whoami() == "app", "logged in as app")
check(app.set("app:1", "v") is True, "app writes its keys")
try:
    app.set("other", "v")
    check(False, "a key outside app:* was written")
except redis.exceptions.ResponseError as error:
    check("no permissions" in str(error), "NOPERM " + str(error))
user = r.acl_getuser("app")
check(user["enabled"] and user["keys"] == ["~app:*"], "ACL GETUSER " + repr(user))
check(r.acl_log(count=1)[0]["object"] == "other", "ACL LOG names the key")
try:
    redis.Redis(host="127.0.0.1", port=port, username="app", password="wrong").ping()
    check(False, "a wrong password logged in")
except (redis.exceptions.AuthenticationError, redis.exceptions.ResponseError) as error:
    # Older redis-py raise WRONGPASS as a ResponseError.
    check("invalid username-password" in str(error), "wrong password refused " + str(error))
app.close()
r.acl_deluser("app")

print("ok", checks)
