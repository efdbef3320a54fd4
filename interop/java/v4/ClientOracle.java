import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.JSONArray;
import com.alibaba.fastjson.JSONObject;
import com.alibaba.fastjson.serializer.SerializerFeature;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collections;
import java.util.Date;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TimeZone;
import java.util.concurrent.Future;
import java.util.concurrent.FutureTask;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.consumer.AllocateMessageQueueStrategy;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.ClientConfig;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragelyByCircle;
import org.apache.rocketmq.client.consumer.store.ReadOffsetType;
import org.apache.rocketmq.client.consumer.store.RemoteBrokerOffsetStore;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.impl.consumer.ConsumeMessageConcurrentlyService;
import org.apache.rocketmq.client.impl.consumer.DefaultMQPushConsumerImpl;
import org.apache.rocketmq.client.impl.consumer.ProcessQueue;
import org.apache.rocketmq.client.impl.consumer.RebalancePushImpl;
import org.apache.rocketmq.client.impl.factory.MQClientInstance;
import org.apache.rocketmq.client.impl.consumer.PullMessageService;
import org.apache.rocketmq.client.impl.consumer.PullRequest;
import org.apache.rocketmq.client.impl.consumer.RebalanceImpl;
import org.apache.rocketmq.common.ServiceState;
import org.apache.rocketmq.common.UtilAll;
import org.apache.rocketmq.common.filter.FilterAPI;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageAccessor;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.ServiceState;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.protocol.heartbeat.MessageModel;
import org.apache.rocketmq.common.protocol.heartbeat.SubscriptionData;

/**
 * The 4.9.8 client's pure functions, asked one JSON line at a time (rmqspec's client differential,
 * tests/interop/test_client_differential.py): one request per stdin line, one answer per stdout line.
 *
 * Requests ({"fn": ..., arguments}):
 *   allocate          strategy AVG|AVG_BY_CIRCLE, cid, mqs [[topic, broker, queueId]...], cids: the lists sorted
 *                     as RebalanceImpl.rebalanceByTopic sorts them, then the strategy's allocate
 *   putUserProperty   name, value: Message.putUserProperty on a fresh Message; the user properties after it
 *   setKeys           keys [..]: Message.setKeys(Collection); the KEYS property after it
 *   checkConfig       config {consumeThreadMin, ...}: DefaultMQPushConsumerImpl.checkConfig's first failure, or null
 *   subscription      subString: FilterAPI.buildSubscriptionData (its subString, tags set and code set)
 *   subscribe         calls [[topic, subString or null]...]: on one unstarted DefaultMQPushConsumer, subscribe(topic,
 *                     subString) in order (null: unsubscribe(topic)); its subscription table after them
 *                     (topic -> subString, tags, codes) and the indexes of the calls that threw
 *   properties        text: MessageDecoder.string2messageProperties
 *   encodeMessages    items [{flag, body (base64), properties {..}}]: MessageDecoder.encodeMessages
 *   decodeMessages    bytes (base64): MessageDecoder.decodeMessages
 *   consumeTimestamp  ms, text: in a UTC JVM, UtilAll.timeMillisToHumanString3(ms) (CONSUME_FROM_TIMESTAMP's
 *                     default string) and UtilAll.parseDate(text, "yyyyMMddHHmmss").getTime() or null
 *   submitConsume     offsets [..], batch: ConsumeMessageConcurrentlyService.submitConsumeRequest of messages with
 *                     these queue offsets, under consumeMessageBatchMaxSize = batch; the ConsumeRequests it hands
 *                     its consume pool, in order, each as the queue offsets of its messages (the pool records them
 *                     and runs none: no listener is called)
 *   consumeRequest    offsets [..], broadcasting, drop ("before" | "during" | "never"), answer ("SUCCESS" |
 *                     "LATER" | "NULL" | "THROW"; LATER only when broadcasting: clustering would send back):
 *                     one ConsumeMessageConcurrentlyService.ConsumeRequest of those messages, run on this
 *                     thread, its ProcessQueue holding them and dropped before run(), by the listener, or
 *                     never; whether the listener was called, the offset in the offset store's memory
 *                     (-1: none) and the messages left in the ProcessQueue
 *   removeQueue       orderly, broadcasting, count, taken, busy: RebalancePushImpl.removeUnnecessaryMessageQueue of a
 *                     ProcessQueue holding count messages of which taken were taken (takeMessages), its consume
 *                     lock held by another thread when busy (tryLock waits its 1 s); the answer, the unlocks in
 *                     order ("now", or the delay of the scheduled one, which is then run) and tryUnlockTimes
 *   persistOffsets    interval, updates [[offset, increaseOnly]...]: a running push consumer's RemoteBrokerOffsetStore
 *                     given updateOffset(mq, offset, increaseOnly) in order, then its client's scheduled tasks
 *                     (MQClientInstance.startScheduledTask, persistConsumerOffsetInterval = interval) recorded and
 *                     each run once; the offset in memory, the persistAll calls the updates made, and [initial
 *                     delay, period] of the task that called persistAll
 *   processQueue      ops [["put"|"remove", [[offset, bodyLength]...]] | ["take", n] | ["commit"] | ["rollback"]
 *                     | ["clear"]] on one ProcessQueue: [msgCount, msgSize] after each op
 *   queueThresholds   config {pullThresholdForQueue, ...ForTopic, pullThresholdSizeForQueue, ...ForTopic}, queues n:
 *                     RebalancePushImpl.messageQueueChanged over a table of n process queues; the consumer's
 *                     [pullThresholdForQueue, pullThresholdSizeForQueue] after it
 *   pullGuard         config (as above, with consumeConcurrentlyMaxSpan), orderly, paused, msgs [[offset,
 *                     bodyLength]...]: DefaultMQPushConsumerImpl.pullMessage on a queue holding msgs; the delay it
 *                     re-armed the request with (PULL_EXCEPTION_DELAY: it went on to pull)
 *   rebalance         the process-queue table through drawn rebalances (PushOracle.rebalance: its header)
 *   pullCallback      pullMessage and its PullCallback for drawn pull outcomes (PushOracle.pullCallback)
 * Answers: {"ok": ...} or {"error": "<exception class>: <message>"}. Strings leave as \\u escapes, so lone
 * surrogates survive the trip.
 */
public final class ClientOracle {
    private ClientOracle() {
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, true, "UTF-8");
        String line;
        while ((line = in.readLine()) != null) {
            JSONObject answer = new JSONObject();
            try {
                answer.put("ok", ask(JSON.parseObject(line)));
            } catch (Exception e) {
                answer.put("error", e.getClass().getSimpleName() + ": " + e.getMessage());
            }
            out.println(JSON.toJSONString(answer, SerializerFeature.BrowserCompatible,
                SerializerFeature.WriteMapNullValue));
        }
        out.flush();
        System.exit(0);  // consumeRequest's client instance keeps non-daemon threads of its statistics
    }

    private static Object ask(JSONObject req) throws Exception {
        switch (req.getString("fn")) {
            case "allocate":
                return allocate(req);
            case "putUserProperty": {
                Message msg = new Message();
                msg.putUserProperty(req.getString("name"), req.getString("value"));
                return msg.getProperties();
            }
            case "setKeys": {
                Message msg = new Message();
                msg.setKeys(req.getJSONArray("keys").toJavaList(String.class));
                return msg.getProperty("KEYS");
            }
            case "subscription": {
                SubscriptionData sub = FilterAPI.buildSubscriptionData("T", req.getString("subString"));
                JSONObject data = new JSONObject();
                data.put("subString", sub.getSubString());
                data.put("tags", sub.getTagsSet());
                data.put("codes", sub.getCodeSet());
                return data;
            }
            case "subscribe":
                return subscribe(req.getJSONArray("calls"));
            case "checkConfig":
                return checkConfig(req.getJSONObject("config"));
            case "properties":
                return MessageDecoder.string2messageProperties(req.getString("text"));
            case "encodeMessages": {
                List<Message> msgs = new ArrayList<>();
                for (Object o : req.getJSONArray("items")) {
                    JSONObject item = (JSONObject) o;
                    Message msg = new Message();
                    msg.setFlag(item.getIntValue("flag"));
                    msg.setBody(Base64.getDecoder().decode(item.getString("body")));
                    Map<String, String> props = new HashMap<>();
                    for (Map.Entry<String, Object> e : item.getJSONObject("properties").entrySet()) {
                        props.put(e.getKey(), (String) e.getValue());
                    }
                    MessageAccessor.setProperties(msg, props);
                    msgs.add(msg);
                }
                return Base64.getEncoder().encodeToString(MessageDecoder.encodeMessages(msgs));
            }
            case "decodeMessages": {
                byte[] bytes = Base64.getDecoder().decode(req.getString("bytes"));
                JSONArray items = new JSONArray();
                for (Message msg : MessageDecoder.decodeMessages(ByteBuffer.wrap(bytes))) {
                    JSONObject item = new JSONObject();
                    item.put("flag", msg.getFlag());
                    item.put("body", Base64.getEncoder().encodeToString(msg.getBody()));
                    item.put("properties", msg.getProperties());
                    items.add(item);
                }
                return items;
            }
            case "processQueue":
                return processQueue(req.getJSONArray("ops"));
            case "queueThresholds":
                return queueThresholds(req.getJSONObject("config"), req.getIntValue("queues"));
            case "pullGuard":
                return pullGuard(req);
            case "consumeTimestamp": {
                // CONSUME_FROM_TIMESTAMP's string (DefaultMQPushConsumer, RebalancePushImpl), in a UTC JVM
                TimeZone.setDefault(TimeZone.getTimeZone("UTC"));
                JSONObject data = new JSONObject();
                data.put("format", UtilAll.timeMillisToHumanString3(req.getLongValue("ms")));
                Date parsed = UtilAll.parseDate(req.getString("text"), UtilAll.YYYYMMDDHHMMSS);
                data.put("parsed", parsed == null ? null : parsed.getTime());
                return data;
            }
            case "persistOffsets":
                return persistOffsets(req);
            case "removeQueue":
                return removeQueue(req);
            case "consumeRequest":
                return consumeRequest(req);
            case "rebalance":
                return PushOracle.rebalance(req);
            case "pullCallback":
                return PushOracle.pullCallback(req);
            case "submitConsume":
                return submitConsume(req.getJSONArray("offsets").toJavaList(Long.class), req.getIntValue("batch"));
            default:
                throw new IllegalArgumentException("unknown fn " + req.getString("fn"));
        }
    }

    /** subscribe / unsubscribe in order on one consumer (never started: no heartbeat is sent), then its
     *  subscription table (RebalanceImpl.subscriptionInner) and the calls that threw. */
    private static Object subscribe(JSONArray calls) {
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer("G1");
        JSONArray failed = new JSONArray();
        for (int i = 0; i < calls.size(); i++) {
            JSONArray call = calls.getJSONArray(i);
            try {
                if (call.getString(1) == null) {
                    consumer.unsubscribe(call.getString(0));
                } else {
                    consumer.subscribe(call.getString(0), call.getString(1));
                }
            } catch (MQClientException e) {
                failed.add(i);
            }
        }
        JSONObject table = new JSONObject();
        for (Map.Entry<String, SubscriptionData> e
                : consumer.getDefaultMQPushConsumerImpl().getSubscriptionInner().entrySet()) {
            JSONObject data = new JSONObject();
            data.put("subString", e.getValue().getSubString());
            data.put("tags", e.getValue().getTagsSet());
            data.put("codes", e.getValue().getCodeSet());
            table.put(e.getKey(), data);
        }
        JSONObject answer = new JSONObject();
        answer.put("table", table);
        answer.put("failed", failed);
        return answer;
    }

    /** DefaultMQPushConsumerImpl.checkConfig (private: called by reflection) on a consumer with these
     *  numbers, a subscription and a concurrent listener: null, or the first failure's message. */
    private static Object checkConfig(JSONObject config) throws Exception {
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer("G1");
        consumer.setConsumeThreadMin(config.getIntValue("consumeThreadMin"));
        consumer.setConsumeThreadMax(config.getIntValue("consumeThreadMax"));
        consumer.setConsumeConcurrentlyMaxSpan(config.getIntValue("consumeConcurrentlyMaxSpan"));
        consumer.setPullThresholdForQueue(config.getIntValue("pullThresholdForQueue"));
        consumer.setPullThresholdForTopic(config.getIntValue("pullThresholdForTopic"));
        consumer.setPullThresholdSizeForQueue(config.getIntValue("pullThresholdSizeForQueue"));
        consumer.setPullThresholdSizeForTopic(config.getIntValue("pullThresholdSizeForTopic"));
        consumer.setPullInterval(config.getLongValue("pullInterval"));
        consumer.setConsumeMessageBatchMaxSize(config.getIntValue("consumeMessageBatchMaxSize"));
        consumer.setPullBatchSize(config.getIntValue("pullBatchSize"));
        consumer.subscribe("T", "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) ->
            ConsumeConcurrentlyStatus.CONSUME_SUCCESS);
        Method check = DefaultMQPushConsumerImpl.class.getDeclaredMethod("checkConfig");
        check.setAccessible(true);
        try {
            check.invoke(consumer.getDefaultMQPushConsumerImpl());
            return null;
        } catch (InvocationTargetException e) {
            Throwable cause = e.getCause();
            return cause instanceof MQClientException ? ((MQClientException) cause).getErrorMessage()
                : cause.toString();
        }
    }

    private static List<MessageExt> messages(JSONArray items) {
        List<MessageExt> msgs = new ArrayList<>();
        for (Object o : items) {
            JSONArray item = (JSONArray) o;
            MessageExt msg = new MessageExt();
            msg.setTopic("T");
            msg.setQueueOffset(item.getLongValue(0));
            msg.setBody(new byte[item.getIntValue(1)]);
            msgs.add(msg);
        }
        return msgs;
    }

    /** ProcessQueue's counters after each op (its own putMessage / removeMessage / takeMessages / commit /
     *  rollback / clear). */
    private static Object processQueue(JSONArray ops) {
        ProcessQueue pq = new ProcessQueue();
        JSONArray after = new JSONArray();
        for (Object o : ops) {
            JSONArray op = (JSONArray) o;
            switch (op.getString(0)) {
                case "put":
                    pq.putMessage(messages(op.getJSONArray(1)));
                    break;
                case "remove":
                    pq.removeMessage(messages(op.getJSONArray(1)));
                    break;
                case "take":
                    pq.takeMessages(op.getIntValue(1));
                    break;
                case "commit":
                    pq.commit();
                    break;
                case "rollback":
                    pq.rollback();
                    break;
                case "clear":
                    pq.clear();
                    break;
                default:
                    throw new IllegalArgumentException("unknown op " + op.getString(0));
            }
            JSONArray counters = new JSONArray();
            counters.add(pq.getMsgCount().get());
            counters.add(pq.getMsgSize().get());
            after.add(counters);
        }
        return after;
    }

    private static DefaultMQPushConsumer thresholdConsumer(JSONObject config) {
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer("G1");
        consumer.setPullThresholdForQueue(config.getIntValue("pullThresholdForQueue"));
        consumer.setPullThresholdForTopic(config.getIntValue("pullThresholdForTopic"));
        consumer.setPullThresholdSizeForQueue(config.getIntValue("pullThresholdSizeForQueue"));
        consumer.setPullThresholdSizeForTopic(config.getIntValue("pullThresholdSizeForTopic"));
        if (config.containsKey("consumeConcurrentlyMaxSpan")) {
            consumer.setConsumeConcurrentlyMaxSpan(config.getIntValue("consumeConcurrentlyMaxSpan"));
        }
        return consumer;
    }

    /** messageQueueChanged on a never-started consumer's RebalancePushImpl whose table holds n queues. Its last
     *  step, the heartbeat, has no client instance to use (a NullPointerException): the thresholds are set
     *  before it. */
    private static Object queueThresholds(JSONObject config, int queues) throws Exception {
        DefaultMQPushConsumer consumer = thresholdConsumer(config);
        consumer.subscribe("T", "*");
        RebalanceImpl rebalance = consumer.getDefaultMQPushConsumerImpl().getRebalanceImpl();
        for (int i = 0; i < queues; i++) {
            rebalance.getProcessQueueTable().put(new MessageQueue("T", "b", i), new ProcessQueue());
        }
        try {
            rebalance.messageQueueChanged("T", Collections.emptySet(), Collections.emptySet());
        } catch (NullPointerException e) {
            // sendHeartbeatToAllBrokerWithLock on the missing client instance
        }
        JSONArray answer = new JSONArray();
        answer.add(consumer.getPullThresholdForQueue());
        answer.add(consumer.getPullThresholdSizeForQueue());
        return answer;
    }

    static final long PULL_EXCEPTION_DELAY = 7777;

    /** Notes the delay pullMessage re-arms a request with (nothing is scheduled). */
    static final class RecordingPullService extends PullMessageService {
        long delay = -1;

        RecordingPullService(MQClientInstance instance) {
            super(instance);
        }

        @Override
        public void executePullRequestLater(PullRequest request, long timeDelay) {
            delay = timeDelay;
        }
    }

    /** pullMessage of one request on a running-state, broadcasting consumer whose client instance is a bare
     *  object (Unsafe.allocateInstance) holding a RecordingPullService; the pull itself fails on the missing
     *  PullAPIWrapper (the exception delay, set to PULL_EXCEPTION_DELAY). Orderly: the queue is locked and was
     *  locked before. */
    private static Object pullGuard(JSONObject req) throws Exception {
        DefaultMQPushConsumer consumer = thresholdConsumer(req.getJSONObject("config"));
        consumer.setMessageModel(MessageModel.BROADCASTING);
        consumer.subscribe("T", "*");
        DefaultMQPushConsumerImpl impl = consumer.getDefaultMQPushConsumerImpl();
        Field unsafeField = Class.forName("sun.misc.Unsafe").getDeclaredField("theUnsafe");
        unsafeField.setAccessible(true);
        Object unsafe = unsafeField.get(null);
        MQClientInstance instance = (MQClientInstance) unsafe.getClass()
            .getMethod("allocateInstance", Class.class).invoke(unsafe, MQClientInstance.class);
        RecordingPullService service = new RecordingPullService(instance);
        Field serviceField = MQClientInstance.class.getDeclaredField("pullMessageService");
        serviceField.setAccessible(true);
        serviceField.set(instance, service);
        impl.setmQClientFactory(instance);
        impl.setServiceState(ServiceState.RUNNING);
        impl.setPullTimeDelayMillsWhenException(PULL_EXCEPTION_DELAY);
        impl.setConsumeOrderly(req.getBooleanValue("orderly"));
        impl.setPause(req.getBooleanValue("paused"));
        ProcessQueue pq = new ProcessQueue();
        pq.putMessage(messages(req.getJSONArray("msgs")));
        pq.setLocked(true);
        PullRequest request = new PullRequest();
        request.setConsumerGroup("G1");
        request.setMessageQueue(new MessageQueue("T", "b", 0));
        request.setProcessQueue(pq);
        request.setNextOffset(0);
        request.setPreviouslyLocked(true);
        impl.pullMessage(request);
        return service.delay;
    }

    private static Object allocate(JSONObject req) {
        AllocateMessageQueueStrategy strategy = "AVG".equals(req.getString("strategy"))
            ? new AllocateMessageQueueAveragely() : new AllocateMessageQueueAveragelyByCircle();
        List<MessageQueue> mqs = new ArrayList<>();
        for (Object o : req.getJSONArray("mqs")) {
            JSONArray mq = (JSONArray) o;
            mqs.add(new MessageQueue(mq.getString(0), mq.getString(1), mq.getIntValue(2)));
        }
        List<String> cids = req.getJSONArray("cids").toJavaList(String.class);
        Collections.sort(mqs);
        Collections.sort(cids);
        JSONArray result = new JSONArray();
        for (MessageQueue mq : strategy.allocate("G", req.getString("cid"), mqs, cids)) {
            JSONArray row = new JSONArray();
            row.add(mq.getTopic());
            row.add(mq.getBrokerName());
            row.add(mq.getQueueId());
            result.add(row);
        }
        return result;
    }

    /** The consume pool of {@link #submitConsume}: records each submitted ConsumeRequest's messages, runs none. */
    private static final class RecordingPool extends ThreadPoolExecutor {
        private final JSONArray batches = new JSONArray();

        RecordingPool() {
            super(1, 1, 0, TimeUnit.MILLISECONDS, new LinkedBlockingQueue<>());
        }

        @Override
        public Future<?> submit(Runnable task) {
            try {
                Method msgs = task.getClass().getDeclaredMethod("getMsgs");
                msgs.setAccessible(true);
                JSONArray batch = new JSONArray();
                for (Object m : (List<?>) msgs.invoke(task)) {
                    batch.add(((MessageExt) m).getQueueOffset());
                }
                batches.add(batch);
            } catch (ReflectiveOperationException e) {
                throw new IllegalStateException(e);
            }
            return new FutureTask<Void>(task, null);
        }
    }

    /** ConsumeMessageConcurrentlyService.submitConsumeRequest (a pulled list split into ConsumeRequests) on an
     *  unstarted consumer whose service's consume pool (the private final consumeExecutor, replaced by
     *  reflection) records what it is given. */
    private static Object submitConsume(List<Long> offsets, int batch) throws Exception {
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer("G1");
        consumer.setConsumeMessageBatchMaxSize(batch);
        MessageListenerConcurrently listener = (msgs, ctx) -> ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        ConsumeMessageConcurrentlyService service =
            new ConsumeMessageConcurrentlyService(consumer.getDefaultMQPushConsumerImpl(), listener);
        RecordingPool pool = new RecordingPool();
        Field executor = ConsumeMessageConcurrentlyService.class.getDeclaredField("consumeExecutor");
        executor.setAccessible(true);
        executor.set(service, pool);
        List<MessageExt> msgs = new ArrayList<>();
        for (Long offset : offsets) {
            MessageExt msg = new MessageExt();
            msg.setTopic("T");
            msg.setQueueOffset(offset);
            msgs.add(msg);
        }
        try {
            service.submitConsumeRequest(msgs, new ProcessQueue(), new MessageQueue("T", "b", 0), true);
        } finally {
            service.shutdown(0);
        }
        return pool.batches;
    }

    /** One client instance, never started (no thread runs, no socket opens), for the consume statistics
     *  ConsumeRequest.run counts and the offset store processConsumeResult updates. */
    private static MQClientInstance client;

    /** A push consumer of group G1 (broadcasting if the request says so) on the shared unstarted client, with a
     *  RemoteBrokerOffsetStore: what consumeRequest and removeQueue run the real code on. */
    private static DefaultMQPushConsumer unstartedConsumer(JSONObject req) {
        if (client == null) {
            client = new MQClientInstance(new ClientConfig(), 0, "oracle@1");
        }
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer("G1");
        if (req.getBooleanValue("broadcasting")) {
            consumer.setMessageModel(MessageModel.BROADCASTING);
        }
        DefaultMQPushConsumerImpl impl = consumer.getDefaultMQPushConsumerImpl();
        impl.setmQClientFactory(client);
        impl.setOffsetStore(new RemoteBrokerOffsetStore(client, "G1"));
        return consumer;
    }

    /** ConsumeMessageConcurrentlyService.ConsumeRequest.run on an unstarted consumer (see the header). */
    private static Object consumeRequest(JSONObject req) throws Exception {
        DefaultMQPushConsumer consumer = unstartedConsumer(req);
        DefaultMQPushConsumerImpl impl = consumer.getDefaultMQPushConsumerImpl();
        String drop = req.getString("drop");
        String answer = req.getString("answer");
        ProcessQueue pq = new ProcessQueue();
        boolean[] called = {false};
        MessageListenerConcurrently listener = (msgs, ctx) -> {
            called[0] = true;
            if ("during".equals(drop)) {
                pq.setDropped(true);
            }
            switch (answer) {
                case "SUCCESS":
                    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
                case "LATER":
                    return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                case "THROW":
                    throw new IllegalStateException("listener");
                default:
                    return null;
            }
        };
        ConsumeMessageConcurrentlyService service = new ConsumeMessageConcurrentlyService(impl, listener);
        List<MessageExt> msgs = new ArrayList<>();
        for (Object offset : req.getJSONArray("offsets")) {
            MessageExt msg = new MessageExt();
            msg.setTopic("T");
            msg.setQueueId(0);
            msg.setQueueOffset(((Number) offset).longValue());
            msg.setBody(new byte[0]);
            msgs.add(msg);
        }
        MessageQueue mq = new MessageQueue("T", "b", 0);
        pq.putMessage(msgs);
        if ("before".equals(drop)) {
            pq.setDropped(true);
        }
        Class<?> requestClass = Class.forName(ConsumeMessageConcurrentlyService.class.getName() + "$ConsumeRequest");
        java.lang.reflect.Constructor<?> make = requestClass.getDeclaredConstructor(
            ConsumeMessageConcurrentlyService.class, List.class, ProcessQueue.class, MessageQueue.class);
        make.setAccessible(true);
        try {
            ((Runnable) make.newInstance(service, msgs, pq, mq)).run();
        } finally {
            service.shutdown(0);
        }
        JSONObject out = new JSONObject();
        out.put("called", called[0]);
        out.put("offset", impl.getOffsetStore().readOffset(mq, ReadOffsetType.READ_FROM_MEMORY));
        out.put("left", pq.getMsgCount().get());
        return out;
    }

    /** The client's scheduled executor while {@link #removeQueue} or {@link #persistOffsets} runs: notes each
     * task's delay (and a periodic one's period), runs none. */
    private static final class RecordingScheduler extends ScheduledThreadPoolExecutor {
        private final List<Object[]> tasks = new ArrayList<>();  // {task, delay or initial delay, period or -1}

        RecordingScheduler() {
            super(1);
        }

        @Override
        public ScheduledFuture<?> schedule(Runnable task, long delay, TimeUnit unit) {
            tasks.add(new Object[] {task, unit.toMillis(delay), -1L});
            return null;
        }

        @Override
        public ScheduledFuture<?> scheduleAtFixedRate(Runnable task, long initialDelay, long period, TimeUnit unit) {
            tasks.add(new Object[] {task, unit.toMillis(initialDelay), unit.toMillis(period)});
            return null;
        }
    }

    /** RebalancePushImpl.removeUnnecessaryMessageQueue on an unstarted consumer (see the header); unlock(mq,
     *  oneway) is overridden to note the call (the real one asks the broker). */
    private static Object removeQueue(JSONObject req) throws Exception {
        DefaultMQPushConsumer consumer = unstartedConsumer(req);
        DefaultMQPushConsumerImpl impl = consumer.getDefaultMQPushConsumerImpl();
        impl.setConsumeOrderly(req.getBooleanValue("orderly"));
        RecordingScheduler scheduler = new RecordingScheduler();
        Field field = MQClientInstance.class.getDeclaredField("scheduledExecutorService");
        field.setAccessible(true);
        field.set(client, scheduler);
        JSONArray unlocks = new JSONArray();
        int[] calls = {0};
        RebalancePushImpl rebalance = new RebalancePushImpl(impl) {
            @Override
            public void unlock(MessageQueue mq, boolean oneway) {
                calls[0]++;
            }
        };
        ProcessQueue pq = new ProcessQueue();
        List<MessageExt> msgs = new ArrayList<>();
        for (int i = 0; i < req.getIntValue("count"); i++) {
            MessageExt msg = new MessageExt();
            msg.setTopic("T");
            msg.setQueueOffset(i);
            msg.setBody(new byte[0]);
            msgs.add(msg);
        }
        pq.putMessage(msgs);
        pq.takeMessages(req.getIntValue("taken"));
        pq.setDropped(true);
        Thread holder = null;
        java.util.concurrent.CountDownLatch held = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch done = new java.util.concurrent.CountDownLatch(1);
        if (req.getBooleanValue("busy")) {
            holder = new Thread(() -> {
                pq.getConsumeLock().lock();
                held.countDown();
                try {
                    done.await();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                } finally {
                    pq.getConsumeLock().unlock();
                }
            });
            holder.start();
            held.await();
        }
        boolean answer = rebalance.removeUnnecessaryMessageQueue(new MessageQueue("T", "b", 0), pq);
        done.countDown();
        if (holder != null) {
            holder.join();
        }
        for (int i = 0; i < calls[0]; i++) {
            unlocks.add("now");
        }
        for (Object[] task : scheduler.tasks) {
            int before = calls[0];
            ((Runnable) task[0]).run();
            if (calls[0] > before) {
                unlocks.add(task[1]);  // a delayed unlock: its delay
            }
        }
        JSONObject out = new JSONObject();
        out.put("answer", answer);
        out.put("unlocks", unlocks);
        out.put("tryUnlockTimes", pq.getTryUnlockTimes());
        return out;
    }

    private static ClientConfig persistConfig;
    private static MQClientInstance persistClient;

    /** updateOffset and the persist schedule of a push consumer's client (see the header). */
    private static Object persistOffsets(JSONObject req) throws Exception {
        if (persistClient == null) {
            persistConfig = new ClientConfig();
            persistConfig.setNamesrvAddr("127.0.0.1:9");  // no name-server lookup task (it would fetch over HTTP)
            persistClient = new MQClientInstance(persistConfig, 1, "oracle@2");
        }
        persistConfig.setPersistConsumerOffsetInterval(req.getIntValue("interval"));
        RecordingScheduler rates = new RecordingScheduler();
        Field field = MQClientInstance.class.getDeclaredField("scheduledExecutorService");
        field.setAccessible(true);
        field.set(persistClient, rates);
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer("G1");
        DefaultMQPushConsumerImpl impl = consumer.getDefaultMQPushConsumerImpl();
        impl.setmQClientFactory(persistClient);
        int[] persisted = {0};
        MessageQueue mq = new MessageQueue("T", "b", 0);
        impl.setOffsetStore(new RemoteBrokerOffsetStore(persistClient, "G1") {
            @Override
            public void persistAll(Set<MessageQueue> mqs) {
                persisted[0]++;
            }
        });
        impl.setServiceState(ServiceState.RUNNING);
        for (Object o : req.getJSONArray("updates")) {
            JSONArray update = (JSONArray) o;
            impl.getOffsetStore().updateOffset(mq, update.getLongValue(0), update.getBooleanValue(1));
        }
        JSONObject out = new JSONObject();
        out.put("memory", impl.getOffsetStore().readOffset(mq, ReadOffsetType.READ_FROM_MEMORY));
        out.put("persistedByUpdates", persisted[0]);
        persistClient.registerConsumer("G1", impl);
        try {
            Method start = MQClientInstance.class.getDeclaredMethod("startScheduledTask");
            start.setAccessible(true);
            start.invoke(persistClient);
            JSONArray schedule = new JSONArray();
            for (Object[] task : rates.tasks) {
                int before = persisted[0];
                try {
                    ((Runnable) task[0]).run();
                } catch (RuntimeException e) {
                    continue;  // a task that needs a started client: not the persist task
                }
                if (persisted[0] > before) {
                    schedule.add(task[1]);
                    schedule.add(task[2]);
                }
            }
            out.put("schedule", schedule);
        } finally {
            persistClient.unregisterConsumer("G1");
        }
        return out;
    }
}
