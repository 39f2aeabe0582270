// Lettuce against a running strata-server: a stream consumer group as an
// application runs one, over RESP3 (Lettuce's default): XGROUP CREATE
// MKSTREAM, XADD, XREADGROUP by two consumers, XACK, XPENDING (summary
// and per consumer), XCLAIM, XAUTOCLAIM, a blocked XREADGROUP woken by
// XADD from another connection, XINFO GROUPS, XTRIM.
//
// Run by crates/strata-server/tests/client_libraries.rs with the server's
// port as the only argument. Each check exits non-zero on a wrong answer;
// the last line printed is "ok <number of checks>".

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import io.lettuce.core.Consumer;
import io.lettuce.core.Limit;
import io.lettuce.core.Range;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.StreamMessage;
import io.lettuce.core.XAutoClaimArgs;
import io.lettuce.core.XGroupCreateArgs;
import io.lettuce.core.XReadArgs;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import io.lettuce.core.models.stream.ClaimedMessages;
import io.lettuce.core.models.stream.PendingMessage;
import io.lettuce.core.models.stream.PendingMessages;

public class LettuceStreams {
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
        RedisClient client = RedisClient.create(RedisURI.create("127.0.0.1", port));
        try (StatefulRedisConnection<String, String> connection = client.connect();
                StatefulRedisConnection<String, String> waiting = client.connect()) {
            RedisCommands<String, String> r = connection.sync();
            r.flushall();
            String group = "billing";
            r.xgroupCreate(XReadArgs.StreamOffset.from("orders", "0"), group,
                    XGroupCreateArgs.Builder.mkstream());
            for (int i = 0; i < 10; i++) {
                r.xadd("orders", Map.of("n", Integer.toString(i)));
            }
            check(r.xlen("orders") == 10, "XLEN");

            // Two consumers share the new entries.
            List<StreamMessage<String, String>> alice = r.xreadgroup(Consumer.from(group, "alice"),
                    XReadArgs.Builder.count(4), XReadArgs.StreamOffset.lastConsumed("orders"));
            List<StreamMessage<String, String>> bob = r.xreadgroup(Consumer.from(group, "bob"),
                    XReadArgs.Builder.count(10), XReadArgs.StreamOffset.lastConsumed("orders"));
            check(alice.size() == 4 && bob.size() == 6, "shares " + alice.size() + "/" + bob.size());
            check("0".equals(alice.get(0).getBody().get("n")), "first body " + alice.get(0).getBody());
            check("4".equals(bob.get(0).getBody().get("n")), "bob's first " + bob.get(0).getBody());

            String[] aliceIds = alice.stream().map(StreamMessage::getId).toArray(String[]::new);
            check(r.xack("orders", group, aliceIds) == 4, "XACK");
            PendingMessages summary = r.xpending("orders", group);
            check(summary.getCount() == 6, "XPENDING count " + summary.getCount());
            check(summary.getConsumerMessageCount().get("bob") == 6L,
                    "XPENDING per consumer " + summary.getConsumerMessageCount());
            List<PendingMessage> bobs = r.xpending("orders", Consumer.from(group, "bob"),
                    Range.unbounded(), Limit.from(100));
            check(bobs.size() == 6 && bobs.get(0).getRedeliveryCount() == 1, "XPENDING of bob " + bobs);

            // Claims: one by hand, the rest by XAUTOCLAIM.
            List<StreamMessage<String, String>> claimed = r.xclaim("orders", Consumer.from(group, "alice"),
                    0, bob.get(0).getId());
            check(claimed.size() == 1 && claimed.get(0).getId().equals(bob.get(0).getId()), "XCLAIM");
            ClaimedMessages<String, String> auto = r.xautoclaim("orders",
                    XAutoClaimArgs.Builder.xautoclaim(Consumer.from(group, "carol"), Duration.ZERO, "0-0")
                            .count(100));
            check(auto.getMessages().size() == 6, "XAUTOCLAIM " + auto.getMessages().size());
            check("0-0".equals(auto.getId()), "XAUTOCLAIM cursor " + auto.getId());

            // A blocked reader is woken by an XADD from this connection.
            CompletableFuture<List<StreamMessage<String, String>>> blocked = waiting.async()
                    .xreadgroup(Consumer.from(group, "dave"), XReadArgs.Builder.block(Duration.ofSeconds(10)),
                            XReadArgs.StreamOffset.lastConsumed("orders"))
                    .toCompletableFuture();
            long deadline = System.currentTimeMillis() + 5_000;
            while (!infoSays(r, "blocked_clients:1") && System.currentTimeMillis() < deadline) {
                Thread.sleep(10);
            }
            String late = r.xadd("orders", Map.of("n", "late"));
            List<StreamMessage<String, String>> woken = blocked.get(5, TimeUnit.SECONDS);
            check(woken.size() == 1 && woken.get(0).getId().equals(late), "blocked XREADGROUP " + woken);

            List<Object> groups = r.xinfoGroups("orders");
            check(groups.size() == 1, "XINFO GROUPS " + groups);
            check(r.xtrim("orders", 5) == 6, "XTRIM");
            check(r.xlen("orders") == 5, "XLEN after XTRIM");
        } finally {
            client.shutdown();
        }
        System.out.println("ok " + checks);
    }

    static boolean infoSays(RedisCommands<String, String> r, String line) {
        return r.info("clients").contains(line);
    }
}
