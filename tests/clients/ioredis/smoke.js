// ioredis against a running strata-server, used as applications use it:
// multi() (MULTI/EXEC) with per-command errors, watch() with a broken
// transaction, defineCommand (EVALSHA with its EVAL fallback), pipelines,
// FUNCTION LOAD + FCALL and pub/sub.
//
// Run by crates/strata-server/tests/client_libraries.rs with the server's
// port as the only argument. Each check exits non-zero on a wrong answer;
// the last line printed is "ok <number of checks>".
"use strict";

const Redis = require("ioredis");

const port = Number(process.argv[2]);
let checks = 0;

function check(ok, what) {
  if (!ok) {
    console.log("FAILED: " + what);
    process.exit(1);
  }
  checks += 1;
}

async function main() {
  const redis = new Redis({ port, host: "127.0.0.1", maxRetriesPerRequest: 1 });
  const other = new Redis({ port, host: "127.0.0.1", maxRetriesPerRequest: 1 });
  await redis.flushall();
  await redis.function("FLUSH");

  // multi(): MULTI ... EXEC, [error, result] per command.
  const results = await redis.multi().set("a", 1).incr("a").incrby("b", 5).get("a").exec();
  check(JSON.stringify(results) === JSON.stringify([[null, "OK"], [null, 2], [null, 5], [null, "2"]]),
    "multi results " + JSON.stringify(results));

  const mixed = await redis.multi().set("s", "text").incr("s").get("s").exec();
  check(mixed[1][0] instanceof Error && /not an integer/.test(mixed[1][0].message), "per-command error in EXEC");
  check(mixed[2][1] === "text", "the rest of the transaction ran");

  // A queuing error aborts the whole transaction (EXECABORT).
  let aborted = null;
  try {
    await redis.multi().set("x", 1).call("NOSUCHCOMMAND").exec();
  } catch (error) {
    aborted = error;
  }
  check(aborted !== null && /EXECABORT/.test(aborted.message), "EXECABORT on a queuing error");
  check((await redis.exists("x")) === 0, "nothing of the aborted transaction applied");

  // watch(): a transaction whose watched key changed returns null.
  await redis.watch("w");
  await other.set("w", "changed");
  const broken = await redis.multi().set("w", "mine").exec();
  check(broken === null, "a broken WATCH gives null");
  check((await redis.get("w")) === "changed", "the broken transaction did not apply");

  // defineCommand: EVALSHA, with EVAL when the script is not cached.
  redis.defineCommand("incrTwice", {
    numberOfKeys: 1,
    lua: "redis.call('INCRBY', KEYS[1], ARGV[1]) return redis.call('INCRBY', KEYS[1], ARGV[1])",
  });
  check((await redis.incrTwice("counter", 3)) === 6, "defineCommand result");
  await redis.script("FLUSH");
  check((await redis.incrTwice("counter", 2)) === 10, "defineCommand after SCRIPT FLUSH");
  const pipelined = await redis.pipeline().incrTwice("counter", 1).get("counter").exec();
  check(pipelined[1][1] === "12", "defineCommand in a pipeline");

  // Pipelines.
  const pipe = redis.pipeline();
  for (let i = 0; i < 100; i += 1) pipe.rpush("list", i);
  await pipe.exec();
  check((await redis.llen("list")) === 100, "pipelined RPUSH");

  // Functions.
  const library = "#!lua name=nodelib\n" +
    "redis.register_function('hello', function(keys, args) return 'hello ' .. args[1] end)";
  check((await redis.function("LOAD", "REPLACE", library)) === "nodelib", "FUNCTION LOAD");
  check((await redis.fcall("hello", 0, "node")) === "hello node", "FCALL");

  // Pub/sub.
  const subscriber = new Redis({ port, host: "127.0.0.1" });
  const received = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("no message received")), 5000);
    subscriber.on("message", (channel, message) => {
      clearTimeout(timer);
      resolve([channel, message]);
    });
  });
  await subscriber.subscribe("news");
  await redis.publish("news", "hello");
  const [channel, message] = await received;
  check(channel === "news" && message === "hello", "pub/sub message");

  subscriber.disconnect();
  redis.disconnect();
  other.disconnect();
  console.log("ok " + checks);
}

main().catch((error) => {
  console.log("FAILED: " + (error && error.stack ? error.stack : error));
  process.exit(1);
});
