// Jedis against a running strata-server, used as applications use it:
// multi()/exec() with per-command errors, watch() broken by another
// client, pipelines, EVALSHA with SCRIPT LOAD, FUNCTION LOAD + FCALL,
// pub/sub and WATCH transfers from several threads.
//
// Run by crates/strata-server/tests/client_libraries.rs with the server's
// port as the only argument. Each check exits non-zero on a wrong answer;
// the last line printed is "ok <number of checks>".

import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisPubSub;
import redis.clients.jedis.Pipeline;
import redis.clients.jedis.Response;
import redis.clients.jedis.Transaction;
import redis.clients.jedis.exceptions.JedisDataException;

public class Smoke {
    static int checks = 0;

    static void check(boolean ok, String what) {
        if (!ok) {
            System.out.println("FAILED: " + what);
            System.exit(1);
        }
        checks++;
    }

    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[0]);
        try (Jedis jedis = new Jedis("127.0.0.1", port); Jedis other = new Jedis("127.0.0.1", port)) {
            jedis.flushAll();
            jedis.functionFlush();

            // multi(): MULTI ... EXEC.
            Transaction tx = jedis.multi();
            tx.set("a", "1");
            Response<Long> incr = tx.incr("a");
            tx.incrBy("b", 5);
            List<Object> results = tx.exec();
            check(results.size() == 3 && incr.get() == 2L, "multi/exec results " + results);

            // A runtime error inside EXEC is that command's reply only.
            tx = jedis.multi();
            tx.set("s", "text");
            tx.incr("s");
            Response<String> get = tx.get("s");
            results = tx.exec();
            check(results.get(1) instanceof JedisDataException, "per-command error in EXEC");
            check("text".equals(get.get()), "the rest of the transaction ran");

            // watch(): a transaction whose watched key changed is discarded.
            jedis.watch("w");
            other.set("w", "changed");
            tx = jedis.multi();
            tx.set("w", "mine");
            check(tx.exec() == null, "a broken WATCH gives a null EXEC");
            check("changed".equals(jedis.get("w")), "the broken transaction did not apply");

            // Pipelines.
            Pipeline pipe = jedis.pipelined();
            for (int i = 0; i < 100; i++) {
                pipe.rpush("list", Integer.toString(i));
            }
            pipe.sync();
            check(jedis.llen("list") == 100L, "pipelined RPUSH");

            // Scripts.
            String sha = jedis.scriptLoad("return redis.call('INCRBY', KEYS[1], ARGV[1])");
            check(Long.valueOf(7).equals(jedis.evalsha(sha, 1, "counter", "7")), "EVALSHA");
            check(Long.valueOf(14).equals(jedis.eval("return redis.call('INCRBY', KEYS[1], ARGV[1])", 1, "counter", "7")), "EVAL");

            // Functions.
            String library = "#!lua name=javalib\n"
                + "redis.register_function('hello', function(keys, args) return 'hello ' .. args[1] end)";
            check("javalib".equals(jedis.functionLoadReplace(library)), "FUNCTION LOAD");
            check("hello java".equals(jedis.fcall("hello", List.of(), List.of("java"))), "FCALL");

            // WATCH transfers from several threads keep the total.
            String[] accounts = {"acct:1", "acct:2", "acct:3", "acct:4"};
            for (String account : accounts) {
                jedis.set(account, "1000");
            }
            AtomicReference<String> failure = new AtomicReference<>();
            Thread[] threads = new Thread[4];
            for (int t = 0; t < threads.length; t++) {
                final int id = t;
                threads[t] = new Thread(() -> {
                    try (Jedis worker = new Jedis("127.0.0.1", port)) {
                        for (int n = 0; n < 50; n++) {
                            String from = accounts[(id + n) % 4];
                            String to = accounts[(id + n + 1) % 4];
                            for (int attempt = 0; ; attempt++) {
                                if (attempt == 100) {
                                    failure.set("too many retries");
                                    return;
                                }
                                worker.watch(from, to);
                                long balance = Long.parseLong(worker.get(from));
                                Transaction move = worker.multi();
                                move.decrBy(from, 3);
                                move.incrBy(to, 3);
                                if (balance >= 3 && move.exec() != null) {
                                    break;
                                }
                            }
                        }
                    } catch (Exception e) {
                        failure.set(e.toString());
                    }
                });
                threads[t].start();
            }
            for (Thread thread : threads) {
                thread.join(60_000);
            }
            check(failure.get() == null, "transfer failed: " + failure.get());
            long total = 0;
            for (String account : accounts) {
                total += Long.parseLong(jedis.get(account));
            }
            check(total == 4000, "WATCH transfers kept the total: " + total);

            // Pub/sub.
            CountDownLatch subscribed = new CountDownLatch(1);
            AtomicReference<String> message = new AtomicReference<>();
            JedisPubSub listener = new JedisPubSub() {
                @Override
                public void onSubscribe(String channel, int count) {
                    subscribed.countDown();
                }

                @Override
                public void onMessage(String channel, String text) {
                    message.set(text);
                    unsubscribe();
                }
            };
            Thread subscriber = new Thread(() -> {
                try (Jedis sub = new Jedis("127.0.0.1", port)) {
                    sub.subscribe(listener, "news");
                }
            });
            subscriber.start();
            check(subscribed.await(5, TimeUnit.SECONDS), "SUBSCRIBE");
            jedis.publish("news", "hello");
            subscriber.join(5_000);
            check("hello".equals(message.get()), "pub/sub message " + message.get());
        }
        System.out.println("ok " + checks);
    }
}
