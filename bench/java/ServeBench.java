import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.protocol.body.ClusterInfo;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * rmqspec's Java-client benchmark (bench/bench_serve.py runs it against rmqspec serve and against the real
 * 4.9.8 broker in the same run). One topic with 4 queues; a push consumer (concurrently, batch 32) is started
 * and rebalanced first; then THREADS producer threads (one producer instance) send N messages synchronously
 * between them. Prints one JSON line: send_msgs_per_s (N / time of the N sync sends) and e2e_msgs_per_s
 * (N / first send to last receipt).
 *
 *   ServeBench NAMESRV N BODY_BYTES RUN_TAG THREADS
 */
public class ServeBench {
    public static void main(String[] args) throws Exception {
        String ns = args[0];
        int n = Integer.parseInt(args[1]);
        int size = Integer.parseInt(args[2]);
        String tag = args[3];
        int threads = args.length > 4 ? Integer.parseInt(args[4]) : 1;
        String topic = "BENCH_" + tag, group = "G_BENCH_" + tag;

        DefaultMQAdminExt admin = new DefaultMQAdminExt("benchAdmin");
        admin.setNamesrvAddr(ns);
        admin.setInstanceName("benchAdmin" + tag);
        admin.start();
        ClusterInfo ci = admin.examineBrokerClusterInfo();
        String brokerName = ci.getBrokerAddrTable().keySet().iterator().next();
        String brokerAddr = ci.getBrokerAddrTable().get(brokerName).selectBrokerAddr();
        admin.createAndUpdateTopicConfig(brokerAddr, new TopicConfig(topic, 4, 4, 6));
        long until = System.currentTimeMillis() + 15000;
        while (System.currentTimeMillis() < until) {
            try {
                if (!admin.examineTopicRouteInfo(topic).getQueueDatas().isEmpty()) break;
            } catch (Exception ignored) {
            }
            Thread.sleep(100);
        }

        final CountDownLatch done = new CountDownLatch(n);
        final AtomicLong last = new AtomicLong();
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
        c.setNamesrvAddr(ns);
        c.setInstanceName("benchC" + tag);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.setPullBatchSize(32);
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            long now = System.currentTimeMillis();
            for (MessageExt m : msgs) {
                last.set(now);
                done.countDown();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        DefaultMQProducer p = new DefaultMQProducer("PG_BENCH_" + tag);
        p.setNamesrvAddr(ns);
        p.setInstanceName("benchP" + tag);
        p.start();
        byte[] body = new byte[size];
        // warm up the producer's route and connection, then let the consumer rebalance (not counted)
        p.send(new Message(topic + "_WARM", "w", body));
        Thread.sleep(3000);

        final AtomicLong failed = new AtomicLong();
        final AtomicLong next = new AtomicLong();
        Thread[] senders = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            senders[t] = new Thread(() -> {
                for (long i = next.getAndIncrement(); i < n; i = next.getAndIncrement()) {
                    try {
                        SendResult r = p.send(new Message(topic, "b", "k" + i, body));
                        if (r.getSendStatus() != SendStatus.SEND_OK) failed.incrementAndGet();
                    } catch (Exception e) {
                        failed.incrementAndGet();
                    }
                }
            });
        }
        long t0 = System.currentTimeMillis();
        for (Thread t : senders) t.start();
        for (Thread t : senders) t.join();
        long t1 = System.currentTimeMillis();
        boolean all = done.await(120, TimeUnit.SECONDS);
        long t2 = last.get();
        System.out.println("{\"n\":" + n + ",\"threads\":" + threads + ",\"body_bytes\":" + size
            + ",\"failed\":" + failed.get()
            + ",\"all_consumed\":" + all + ",\"send_ms\":" + (t1 - t0) + ",\"e2e_ms\":" + (t2 - t0)
            + ",\"send_msgs_per_s\":" + (n * 1000.0 / Math.max(t1 - t0, 1))
            + ",\"e2e_msgs_per_s\":" + (n * 1000.0 / Math.max(t2 - t0, 1)) + "}");
        p.shutdown();
        c.shutdown();
        admin.shutdown();
        System.exit(all && failed.get() == 0 ? 0 : 1);
    }
}
