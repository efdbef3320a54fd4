import com.alibaba.fastjson.JSONObject;
import java.io.BufferedReader;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.protocol.RequestCode;
import org.apache.rocketmq.common.protocol.ResponseCode;
import org.apache.rocketmq.common.protocol.header.PullMessageRequestHeader;
import org.apache.rocketmq.common.protocol.header.UpdateConsumerOffsetRequestHeader;
import org.apache.rocketmq.common.protocol.header.namesrv.GetRouteInfoRequestHeader;
import org.apache.rocketmq.common.protocol.route.BrokerData;
import org.apache.rocketmq.common.protocol.route.TopicRouteData;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * The real 4.9.8 Java client across a master/slave failover (issue 43): a DefaultMQProducer and a
 * DefaultMQPushConsumer (CLUSTERING) on the pair's client host, while tests/interop/test_java_failover_real.py
 * crashes the master's host and restarts it on its store.
 *
 * Usage: PairFailover NAMESRV MASTER_ADDR TOPIC GROUP OUT_FILE [INTERVAL_MS]
 *
 * Creates TOPIC (4 queues) on the master with the admin client and waits for its route, starts the consumer, then
 * the producer, which sends "m-0", "m-1", ... synchronously, one every INTERVAL_MS (100) from a schedule (a send
 * that takes longer delays the next one only). Commands on stdin, one a line: suspend / resume (the consumer's
 * suspend() and resume(): it stops pulling and starts again), stop-sending, quit (shut both down, exit 0).
 *
 * Every event is a JSON line of OUT_FILE, flushed at once, t = System.currentTimeMillis():
 *   ready      {t}                                      topic routed, both clients started
 *   send       {n, t, rt, status, queue, offset} | {n, t, rt, error, cause}  each send (status: SendStatus)
 *   consume    {n, queue, offset, t, reconsume}         each message handed to the listener
 *   pull       {addr, queue, offset, t}                 each PULL_MESSAGE the consumer sends (RPCHook before)
 *   commit     {addr, queue, offset, t}                 each UPDATE_CONSUMER_OFFSET the consumer sends
 *   heartbeat  {addr, t}                                each HEART_BEAT the consumer sends (its subscription)
 *   route      {who, t, brokers: {brokerId: addr}}      each TOPIC route the name server answers (producer or
 *                                                       consumer client instance)
 *   cmd        {cmd, t}; end {t}
 *
 * Settings: the 4.9.8 defaults (pollNameServerInterval 30 s, heartbeatBrokerInterval 30 s, retryTimesWhenSendFailed
 * 2, sendMsgTimeout 3000 ms, pullTimeDelayMillsWhenException 1000 ms, persistConsumerOffsetInterval 5 s,
 * sendLatencyFaultEnable false) but: an instance name each (the producer and the consumer are two client instances,
 * as two applications are: one shared MQClientInstance would refresh the consumer's route with the producer's),
 * CONSUME_FROM_FIRST_OFFSET (the stream starts while the consumer's first rebalance may still be under way: from
 * the last offset it would skip those messages), one consume thread (consumeThreadMin = Max = 1: the order the
 * listener sees is then the order the client hands messages over, not a race of 20 threads).
 */
final class PairFailover {
    private PairFailover() {
    }

    private static Writer out;

    static synchronized void emit(JSONObject row) {
        try {
            out.write(row.toJSONString());
            out.write('\n');
            out.flush();
        } catch (IOException e) {
            throw new RuntimeException(e);
        }
    }

    static JSONObject row(String ev) {
        JSONObject row = new JSONObject(true);
        row.put("ev", ev);
        row.put("t", System.currentTimeMillis());
        return row;
    }

    /** Records what a client instance asks and is told: the consumer's pulls and commits, the topic's routes. */
    static final class Recorder implements RPCHook {
        private final String who;
        private final String topic;

        Recorder(String who, String topic) {
            this.who = who;
            this.topic = topic;
        }

        @Override
        public void doBeforeRequest(String remoteAddr, RemotingCommand request) {
            try {
                if (request.getCode() == RequestCode.PULL_MESSAGE) {
                    PullMessageRequestHeader h = (PullMessageRequestHeader) request.readCustomHeader();
                    if (h != null && topic.equals(h.getTopic())) {
                        JSONObject row = row("pull");
                        row.put("addr", remoteAddr);
                        row.put("queue", h.getQueueId());
                        row.put("offset", h.getQueueOffset());
                        emit(row);
                    }
                } else if (request.getCode() == RequestCode.HEART_BEAT && who.equals("consumer")) {
                    JSONObject row = row("heartbeat");
                    row.put("addr", remoteAddr);
                    emit(row);
                } else if (request.getCode() == RequestCode.UPDATE_CONSUMER_OFFSET) {
                    UpdateConsumerOffsetRequestHeader h = (UpdateConsumerOffsetRequestHeader) request.readCustomHeader();
                    if (h != null && topic.equals(h.getTopic())) {
                        JSONObject row = row("commit");
                        row.put("addr", remoteAddr);
                        row.put("queue", h.getQueueId());
                        row.put("offset", h.getCommitOffset());
                        emit(row);
                    }
                }
            } catch (RuntimeException e) {
                e.printStackTrace();
            }
        }

        @Override
        public void doAfterResponse(String remoteAddr, RemotingCommand request, RemotingCommand response) {
            try {
                if (request.getCode() != RequestCode.GET_ROUTEINFO_BY_TOPIC || response == null
                    || response.getCode() != ResponseCode.SUCCESS || response.getBody() == null) {
                    return;
                }
                GetRouteInfoRequestHeader h = (GetRouteInfoRequestHeader) request.readCustomHeader();
                if (h == null || !topic.equals(h.getTopic())) {
                    return;
                }
                TopicRouteData route = TopicRouteData.decode(response.getBody(), TopicRouteData.class);
                Map<String, String> brokers = new TreeMap<>();
                for (BrokerData bd : route.getBrokerDatas()) {
                    for (Map.Entry<Long, String> e : bd.getBrokerAddrs().entrySet()) {
                        brokers.put(String.valueOf(e.getKey()), e.getValue());
                    }
                }
                JSONObject row = row("route");
                row.put("who", who);
                row.put("brokers", brokers);
                emit(row);
            } catch (RuntimeException e) {
                e.printStackTrace();
            }
        }
    }

    static void createTopic(String namesrv, String master, String topic) throws Exception {
        DefaultMQAdminExt admin = new DefaultMQAdminExt();
        admin.setNamesrvAddr(namesrv);
        admin.setInstanceName("pf-admin");
        admin.start();
        try {
            admin.createAndUpdateTopicConfig(master, new TopicConfig(topic, 4, 4, 6));
            long deadline = System.currentTimeMillis() + 30000;
            while (true) {
                try {
                    if (!admin.examineTopicRouteInfo(topic).getQueueDatas().isEmpty()) {
                        return;
                    }
                } catch (Exception e) {
                    if (System.currentTimeMillis() > deadline) {
                        throw e;
                    }
                }
                Thread.sleep(200);
            }
        } finally {
            admin.shutdown();
        }
    }

    static String firstLine(Throwable e) {
        String text = String.valueOf(e.getMessage());
        int cut = text.indexOf('\n');
        return e.getClass().getSimpleName() + ": " + (cut < 0 ? text : text.substring(0, cut));
    }

    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        String master = args[1];
        String topic = args[2];
        String group = args[3];
        long interval = args.length > 5 ? Long.parseLong(args[5]) : 100;
        java.io.File file = new java.io.File(args[4]).getAbsoluteFile();
        // the client's own log (rocketmq_client.log) beside OUT_FILE, not in ~/logs: set before its classes load
        System.setProperty("rocketmq.client.logRoot", file.getParent());
        out = new OutputStreamWriter(new FileOutputStream(file, true), StandardCharsets.UTF_8);

        createTopic(namesrv, master, topic);

        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group, new Recorder("consumer", topic),
            new AllocateMessageQueueAveragely());
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName("pf-consumer");
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setConsumeThreadMin(1);
        consumer.setConsumeThreadMax(1);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                JSONObject row = row("consume");
                row.put("n", Integer.parseInt(new String(m.getBody(), StandardCharsets.UTF_8).substring(2)));
                row.put("queue", m.getQueueId());
                row.put("offset", m.getQueueOffset());
                row.put("reconsume", m.getReconsumeTimes());
                emit(row);
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();

        DefaultMQProducer producer = new DefaultMQProducer("pf-producer", new Recorder("producer", topic));
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("pf-producer");
        producer.start();
        emit(row("ready"));

        AtomicBoolean sending = new AtomicBoolean(true);
        Thread sender = new Thread(() -> {
            long start = System.currentTimeMillis();
            for (int n = 0; sending.get(); n++) {
                long due = start + n * interval;
                long now = System.currentTimeMillis();
                if (due > now) {
                    try {
                        Thread.sleep(due - now);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
                JSONObject row = row("send");
                row.put("n", n);
                long t0 = System.currentTimeMillis();
                try {
                    SendResult r = producer.send(new Message(topic, ("m-" + n).getBytes(StandardCharsets.UTF_8)));
                    row.put("status", r.getSendStatus().name());
                    row.put("queue", r.getMessageQueue().getQueueId());
                    row.put("offset", r.getQueueOffset());
                } catch (Exception e) {
                    row.put("error", firstLine(e));
                    Throwable cause = e;
                    while (cause.getCause() != null) {
                        cause = cause.getCause();
                    }
                    row.put("cause", cause == e ? null : firstLine(cause));
                }
                row.put("rt", System.currentTimeMillis() - t0);
                emit(row);
            }
        }, "pf-sender");
        sender.start();

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            String cmd = line.trim();
            JSONObject row = row("cmd");
            row.put("cmd", cmd);
            emit(row);
            if (cmd.equals("suspend")) {
                consumer.suspend();
            } else if (cmd.equals("resume")) {
                consumer.resume();
            } else if (cmd.equals("stop-sending")) {
                sending.set(false);
                sender.join();
            } else if (cmd.equals("quit")) {
                break;
            }
        }
        sending.set(false);
        sender.join();
        consumer.shutdown();
        producer.shutdown();
        emit(row("end"));
        out.close();
        System.exit(0);
    }
}
