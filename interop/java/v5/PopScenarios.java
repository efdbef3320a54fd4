/*
 * The pop scenario program on the REAL Apache RocketMQ 5.3.3 remoting client (org.apache.rocketmq:rocketmq-client
 * 5.3.3 from Maven Central): a DefaultMQPushConsumer that consumes by pop, against a real broker or `rmqspec serve`.
 *
 *   java -cp ... PopScenarios NAMESRV [a] [b] [d]        one JSON line per scenario on stdout
 *   java -cp ... PopScenarios NAMESRV d-victim TOPIC GROUP COUNT   (internal: the consumer scenario d kills)
 *
 * How the 5.3.3 client comes to pop (read from the 5.3.3 sources): the push consumer with setClientRebalance(false),
 * neither orderly nor broadcasting (RebalancePushImpl.clientRebalance), asks the broker for its queues at every
 * rebalance (QUERY_ASSIGNMENT 400); the broker answers with the mode the admin set for (topic, group) by
 * SET_MESSAGE_REQUEST_MODE 401 (DefaultMQAdminExt.setMessageRequestMode); in POP mode with popShareQueueNum -1
 * the assignment is queue id -1 (every queue in one pop). ConsumeMessagePopConcurrentlyService acks a consumed
 * message and answers RECONSUME_LATER by CHANGE_MESSAGE_INVISIBLETIME for popDelayLevel[reconsumeTimes] seconds
 * (10 s, 30 s, ...). An orderly listener never pops in 5.3.3 (clientRebalance is true for it), so there is no
 * orderly scenario here.
 *
 * Each scenario makes a topic (4 queues) and a group of its own, sets the group's mode to POP, starts the consumer
 * (popInvisibleTime 10 s), then sends:
 *   a  N messages, each acked: deliveries per key (must be 1, also after the invisible time passed), send→receive
 *   b  one message whose listener answers RECONSUME_LATER twice, then CONSUME_SUCCESS: per delivery its time,
 *      reconsumeTimes, the topic the listener sees, the gap from the previous delivery
 *   d  a consumer in a child JVM receives 3 messages and the JVM halts without consuming them; a new consumer of the
 *      group gets them again: receive - the victim's pop time (from the message's POP_CK)
 */

import com.alibaba.fastjson.JSON;
import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageRequestMode;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;
import org.apache.rocketmq.remoting.protocol.subscription.SubscriptionGroupConfig;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

public class PopScenarios {
    static final long INVISIBLE_MS = 10000;
    static String namesrv;
    static String run = Long.toString(System.currentTimeMillis() % 1000000);

    public static void main(String[] args) throws Exception {
        namesrv = args[0];
        if (args.length > 1 && args[1].equals("d-victim")) {
            victim(args[2], args[3], Integer.parseInt(args[4]));
            return;
        }
        List<String> names = args.length > 1 ? Arrays.asList(args).subList(1, args.length) : Arrays.asList("a", "b", "d");
        DefaultMQAdminExt admin = new DefaultMQAdminExt("pop_admin_" + run);
        admin.setNamesrvAddr(namesrv);
        admin.start();
        DefaultMQProducer producer = new DefaultMQProducer("pop_producer_" + run);
        producer.setNamesrvAddr(namesrv);
        producer.start();
        try {
            for (String name : names) {
                Map<String, Object> row;
                try {
                    if (name.equals("a")) {
                        row = scenarioA(admin, producer);
                    } else if (name.equals("b")) {
                        row = scenarioB(admin, producer);
                    } else if (name.equals("d")) {
                        row = scenarioD(admin, producer);
                    } else {
                        throw new IllegalArgumentException("no scenario " + name);
                    }
                } catch (Throwable t) {
                    row = new LinkedHashMap<>();
                    row.put("scenario", name);
                    row.put("error", t.toString());
                }
                System.out.println(JSON.toJSONString(row));
                System.out.flush();
            }
        } finally {
            producer.shutdown();
            admin.shutdown();
        }
        System.exit(0);
    }

    /** A topic of 4 queues and a group of its own, the group's request mode POP; the broker's address. */
    static String popSetup(DefaultMQAdminExt admin, String topic, String group) throws Exception {
        TopicRouteData any = admin.examineTopicRouteInfo("TBW102");
        String broker = any.getBrokerDatas().get(0).selectBrokerAddr();
        TopicConfig tc = new TopicConfig(topic, 4, 4, 6);
        admin.createAndUpdateTopicConfig(broker, tc);
        SubscriptionGroupConfig gc = new SubscriptionGroupConfig();
        gc.setGroupName(group);
        admin.createAndUpdateSubscriptionGroupConfig(broker, gc);
        long deadline = System.currentTimeMillis() + 30000;
        while (true) {  // the name server learns the new topic from the broker's registration
            try {
                admin.examineTopicRouteInfo(topic);
                break;
            } catch (Exception e) {
                if (System.currentTimeMillis() > deadline) {
                    throw e;
                }
                Thread.sleep(200);
            }
        }
        admin.setMessageRequestMode(broker, topic, group, MessageRequestMode.POP, -1, 5000);
        return broker;
    }

    static DefaultMQPushConsumer popConsumer(String group, String topic, MessageListenerConcurrently listener)
        throws Exception {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
        c.setNamesrvAddr(namesrv);
        c.setInstanceName("pop_" + group + "_" + System.nanoTime());
        c.setClientRebalance(false);
        c.setPopInvisibleTime(INVISIBLE_MS);
        c.subscribe(topic, "*");
        c.registerMessageListener(listener);
        c.start();
        return c;
    }

    static String key(MessageExt m) {
        return m.getKeys();
    }

    static long popTime(MessageExt m) {
        String ck = m.getProperty(MessageConst.PROPERTY_POP_CK);
        if (ck == null) {
            return -1;
        }
        return Long.parseLong(ck.split(" ")[1]);
    }

    static void waitFor(java.util.function.BooleanSupplier cond, long ms) throws InterruptedException {
        long deadline = System.currentTimeMillis() + ms;
        while (!cond.getAsBoolean() && System.currentTimeMillis() < deadline) {
            Thread.sleep(20);
        }
    }

    static Map<String, Object> scenarioA(DefaultMQAdminExt admin, DefaultMQProducer producer) throws Exception {
        String topic = "PopA_" + run, group = "GID_PopA_" + run;
        popSetup(admin, topic, group);
        final Map<String, List<Long>> recv = new ConcurrentHashMap<>();
        final Map<String, Integer> reconsume = new ConcurrentHashMap<>();
        DefaultMQPushConsumer c = popConsumer(group, topic, (msgs, ctx) -> {
            long now = System.currentTimeMillis();
            for (MessageExt m : msgs) {
                recv.computeIfAbsent(key(m), k -> new CopyOnWriteArrayList<>()).add(now);
                reconsume.put(key(m), m.getReconsumeTimes());
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        Thread.sleep(3000);  // the consumer's first rebalance: QUERY_ASSIGNMENT, then its first pop
        int n = 10;
        Map<String, Long> sent = new LinkedHashMap<>();
        for (int i = 0; i < n; i++) {
            String k = "a" + i;
            Message msg = new Message(topic, "TagA", k, ("pop a " + i).getBytes(StandardCharsets.UTF_8));
            long t = System.currentTimeMillis();
            producer.send(msg);
            sent.put(k, t);
            Thread.sleep(100);
        }
        waitFor(() -> recv.size() >= n, 20000);
        Thread.sleep(INVISIBLE_MS + 5000);  // an unacked message would come back by now (revive 2-3.3 s late)
        c.shutdown();
        List<Object> messages = new ArrayList<>();
        for (Map.Entry<String, Long> e : sent.entrySet()) {
            Map<String, Object> m = new LinkedHashMap<>();
            List<Long> got = recv.getOrDefault(e.getKey(), Collections.emptyList());
            m.put("key", e.getKey());
            m.put("deliveries", got.size());
            m.put("send_to_receive_ms", got.isEmpty() ? null : got.get(0) - e.getValue());
            m.put("reconsume_times", reconsume.get(e.getKey()));
            messages.add(m);
        }
        Map<String, Object> row = new LinkedHashMap<>();
        row.put("scenario", "a_pop_ack");
        row.put("topic", topic);
        row.put("messages", messages);
        return row;
    }

    static Map<String, Object> scenarioB(DefaultMQAdminExt admin, DefaultMQProducer producer) throws Exception {
        String topic = "PopB_" + run, group = "GID_PopB_" + run;
        popSetup(admin, topic, group);
        final int failures = 2;
        final List<Map<String, Object>> attempts = new CopyOnWriteArrayList<>();
        final AtomicInteger seen = new AtomicInteger();
        DefaultMQPushConsumer c = popConsumer(group, topic, (msgs, ctx) -> {
            long now = System.currentTimeMillis();
            for (MessageExt m : msgs) {
                Map<String, Object> a = new LinkedHashMap<>();
                a.put("recv_ts", now);
                a.put("reconsume_times", m.getReconsumeTimes());
                a.put("topic_seen_by_listener", m.getTopic());
                a.put("pop_time", popTime(m));
                a.put("queue_offset", m.getQueueOffset());
                attempts.add(a);
            }
            return seen.incrementAndGet() <= failures ? ConsumeConcurrentlyStatus.RECONSUME_LATER
                : ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        Thread.sleep(3000);
        Message msg = new Message(topic, "TagB", "poison", "pop b".getBytes(StandardCharsets.UTF_8));
        long sent = System.currentTimeMillis();
        producer.send(msg);
        // 10 s after the first failure, 30 s after the second (popDelayLevel), each revive 2-3.3 s late
        waitFor(() -> attempts.size() >= failures + 1, 60000);
        Thread.sleep(INVISIBLE_MS + 5000);  // the success is acked: no fourth delivery
        c.shutdown();
        long prev = sent;
        for (Map<String, Object> a : attempts) {
            long t = (Long) a.get("recv_ts");
            a.put("recv_gap_ms", t - prev);
            prev = t;
        }
        Map<String, Object> row = new LinkedHashMap<>();
        row.put("scenario", "b_reconsume_later");
        row.put("topic", topic);
        row.put("failures", failures);
        row.put("attempts", attempts);
        return row;
    }

    /** The consumer scenario d kills: prints each message it gets, then halts the JVM, consuming none. */
    static void victim(String topic, String group, int count) throws Exception {
        final AtomicInteger got = new AtomicInteger();
        popConsumer(group, topic, (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                Map<String, Object> row = new LinkedHashMap<>();
                row.put("victim_got", key(m));
                row.put("pop_time", popTime(m));
                row.put("recv_ts", System.currentTimeMillis());
                synchronized (PopScenarios.class) {
                    System.out.println(JSON.toJSONString(row));
                    System.out.flush();
                }
                if (got.incrementAndGet() >= count) {
                    Runtime.getRuntime().halt(0);  // killed with its messages in flight, none consumed
                }
            }
            try {
                Thread.sleep(600000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        System.out.println("{\"victim_ready\":true}");
        System.out.flush();
        Thread.sleep(120000);
        Runtime.getRuntime().halt(3);
    }

    static Map<String, Object> scenarioD(DefaultMQAdminExt admin, DefaultMQProducer producer) throws Exception {
        String topic = "PopD_" + run, group = "GID_PopD_" + run;
        popSetup(admin, topic, group);
        int n = 3;
        String java = System.getProperty("java.home") + File.separator + "bin" + File.separator + "java";
        List<String> cmd = new ArrayList<>(Arrays.asList(java, "-Xmx256m"));
        for (String p : Arrays.asList("logback.configurationFile", "rocketmq.client.logRoot", "user.home")) {
            if (System.getProperty(p) != null) {
                cmd.add("-D" + p + "=" + System.getProperty(p));
            }
        }
        cmd.addAll(Arrays.asList("-cp", System.getProperty("java.class.path"), "PopScenarios", namesrv, "d-victim",
            topic, group, Integer.toString(n)));
        Process child = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        BufferedReader out = new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8));
        Map<String, Map<String, Object>> victimGot = new LinkedHashMap<>();
        String line;
        boolean sentAll = false;
        while ((line = out.readLine()) != null) {
            if (!line.startsWith("{")) {
                continue;
            }
            Map<String, Object> row = JSON.parseObject(line);
            if (row.containsKey("victim_ready") && !sentAll) {
                Thread.sleep(3000);  // its first rebalance and pop
                for (int i = 0; i < n; i++) {
                    producer.send(new Message(topic, "TagD", "d" + i, ("pop d " + i).getBytes(StandardCharsets.UTF_8)));
                }
                sentAll = true;
            } else if (row.containsKey("victim_got")) {
                victimGot.put((String) row.get("victim_got"), row);
            }
        }
        child.waitFor(30, TimeUnit.SECONDS);
        long killedAt = System.currentTimeMillis();
        final Map<String, Map<String, Object>> again = new ConcurrentHashMap<>();
        DefaultMQPushConsumer c = popConsumer(group, topic, (msgs, ctx) -> {
            long now = System.currentTimeMillis();
            for (MessageExt m : msgs) {
                Map<String, Object> a = new LinkedHashMap<>();
                a.put("recv_ts", now);
                a.put("reconsume_times", m.getReconsumeTimes());
                a.put("topic_seen_by_listener", m.getTopic());
                again.putIfAbsent(key(m), a);
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        waitFor(() -> again.size() >= n, 40000);
        Thread.sleep(2000);
        c.shutdown();
        List<Object> messages = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            String k = "d" + i;
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("key", k);
            Map<String, Object> v = victimGot.get(k);
            Map<String, Object> a = again.get(k);
            m.put("victim_got_it", v != null);
            m.put("redelivered", a != null);
            if (v != null && a != null) {
                m.put("victim_pop_to_redelivery_ms", (Long) a.get("recv_ts") - ((Number) v.get("pop_time")).longValue());
                m.put("reconsume_times", a.get("reconsume_times"));
            }
            messages.add(m);
        }
        Map<String, Object> row = new LinkedHashMap<>();
        row.put("scenario", "d_killed_consumer");
        row.put("topic", topic);
        row.put("victim_exit", child.isAlive() ? null : child.exitValue());
        row.put("killed_at_ms_since_epoch", killedAt);
        row.put("messages", messages);
        return row;
    }
}
