import com.alibaba.fastjson.JSONArray;
import com.alibaba.fastjson.JSONObject;
import java.io.ByteArrayOutputStream;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;
import org.apache.rocketmq.client.ClientConfig;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.PullCallback;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.consumer.store.ReadOffsetType;
import org.apache.rocketmq.client.consumer.store.RemoteBrokerOffsetStore;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.impl.CommunicationMode;
import org.apache.rocketmq.client.impl.consumer.ConsumeMessageService;
import org.apache.rocketmq.client.impl.consumer.DefaultMQPushConsumerImpl;
import org.apache.rocketmq.client.impl.consumer.ProcessQueue;
import org.apache.rocketmq.client.impl.consumer.PullAPIWrapper;
import org.apache.rocketmq.client.impl.consumer.PullMessageService;
import org.apache.rocketmq.client.impl.consumer.PullRequest;
import org.apache.rocketmq.client.impl.consumer.PullResultExt;
import org.apache.rocketmq.client.impl.consumer.RebalanceImpl;
import org.apache.rocketmq.client.impl.consumer.RebalancePushImpl;
import org.apache.rocketmq.client.impl.factory.MQClientInstance;
import org.apache.rocketmq.common.ServiceState;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.protocol.body.ConsumeMessageDirectlyResult;
import org.apache.rocketmq.common.protocol.heartbeat.MessageModel;

/**
 * The push consumer's rebalance table and pull loop, for ClientOracle's "rebalance" and "pullCallback" requests
 * (rmqspec's client differential, tests/interop/test_client_differential_push.py). Both run the 4.9.8 classes on
 * one unstarted MQClientInstance (no thread of it runs, no socket opens) whose pull service and scheduled executor
 * are replaced, by reflection, with recorders: a request re-armed "immediately" is noted with delay 0, one re-armed
 * later with its delay, a task with its delay; nothing they are given runs by itself.
 *
 * rebalance  orderly, broadcasting, starts {queueId: offset | "throw"}, steps [{assigned [ids], busy [ids],
 *            expired [ids], refused [ids]}]: RebalanceImpl.updateProcessQueueTableInRebalance("T", the assigned
 *            queues, isOrder = orderly) once per step on one RebalancePushImpl whose lock(mq) grants every queue
 *            but the refused, whose unlock(mq, oneway) is counted, and whose computePullFromWhereWithException
 *            answers starts (throw: MQClientException). Before each step every ProcessQueue in the table gets its
 *            consume lock busy or free (busy: a lock whose tryLock(timeout) answers false, as one another thread
 *            holds through the wait) and its lastPullTimestamp 0 (expired) or now. After each step: the table
 *            [[queueId, dropped, locked, tryUnlockTimes]...], the pull requests dispatched [[queueId, nextOffset]...]
 *            (both by queue id), the unlocks made at once and the delays of the unlocks scheduled (not run).
 * pullCallback  orderly, broadcasting, pullInterval, pullBatchSize, subscribe (null: no subscription of T),
 *            start, memory (an offset put in the store first, or null), held [offsets] (messages already in the
 *            ProcessQueue), locked (default true), outcomes [[status, count, delta, tags]...]:
 *            DefaultMQPushConsumerImpl.pullMessage of one PullRequest (next offset start, its ProcessQueue locked
 *            or not, previously locked), once per outcome, on a running-state
 *            consumer whose PullAPIWrapper's pullKernelImpl notes its arguments and answers the outcome: THROW
 *            throws MQClientException; EXCEPTION calls the callback's onException; a PullStatus calls onSuccess
 *            with a PullResultExt whose binary holds count messages (MessageDecoder.encode) at the asked offset
 *            on, their tags from tags (null: none), nextBeginOffset = the asked offset + delta (the real
 *            processPullResult decodes and filters it). Per outcome: the re-arm delay (null: none), the task's
 *            delay (OFFSET_ILLEGAL's fix, then run), the request's next offset, the messages handed to the consume
 *            service (their offsets, and dispatchToConsume), the offset in memory (after the task), dropped, and
 *            the pull's arguments (offset, maxNums, commitOffset when its sysFlag bit is set else -1,
 *            brokerSuspendMaxTimeMillis, timeoutMillis, communicationMode), null when there was no pull.
 */
final class PushOracle {
    private PushOracle() {
    }

    private static MQClientInstance client;

    private static MQClientInstance client() {
        if (client == null) {
            client = new MQClientInstance(new ClientConfig(), 3, "oracle@3");
        }
        return client;
    }

    private static void set(Class<?> owner, Object target, String name, Object value) throws Exception {
        Field field = owner.getDeclaredField(name);
        field.setAccessible(true);
        field.set(target, value);
    }

    /** The client's pull service: records re-armed requests and tasks. */
    static final class Pulls extends PullMessageService {
        final List<Object[]> requests = new ArrayList<>();  // {PullRequest, delay}
        final List<Long> tasks = new ArrayList<>();
        final List<Runnable> runnables = new ArrayList<>();

        Pulls(MQClientInstance instance) {
            super(instance);
        }

        @Override
        public void executePullRequestLater(PullRequest request, long delay) {
            requests.add(new Object[] {request, delay});
        }

        @Override
        public void executePullRequestImmediately(PullRequest request) {
            requests.add(new Object[] {request, 0L});
        }

        @Override
        public void executeTaskLater(Runnable task, long delay) {
            tasks.add(delay);
            runnables.add(task);
        }
    }

    /** The client's scheduled executor: notes each one-shot task's delay, runs none. */
    static final class Later extends ScheduledThreadPoolExecutor {
        final List<Long> delays = new ArrayList<>();

        Later() {
            super(1);
        }

        @Override
        public ScheduledFuture<?> schedule(Runnable task, long delay, TimeUnit unit) {
            delays.add(unit.toMillis(delay));
            return null;
        }
    }

    /** A consume lock another thread holds while busy: tryLock(timeout) answers false without waiting. */
    static final class BusyLock extends ReentrantLock {
        volatile boolean busy;

        @Override
        public boolean tryLock(long timeout, TimeUnit unit) throws InterruptedException {
            return !busy && super.tryLock(timeout, unit);
        }
    }

    private static Set<Integer> ids(JSONObject step, String key) {
        Set<Integer> out = new HashSet<>();
        JSONArray list = step.getJSONArray(key);
        if (list != null) {
            for (Object o : list) {
                out.add(((Number) o).intValue());
            }
        }
        return out;
    }

    private static DefaultMQPushConsumerImpl consumer(JSONObject req, MQClientInstance instance) {
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer("G1");
        if (req.getBooleanValue("broadcasting")) {
            consumer.setMessageModel(MessageModel.BROADCASTING);
        }
        DefaultMQPushConsumerImpl impl = consumer.getDefaultMQPushConsumerImpl();
        impl.setmQClientFactory(instance);
        impl.setOffsetStore(new RemoteBrokerOffsetStore(instance, "G1"));  // no offsets file, whatever the model
        impl.setConsumeOrderly(req.getBooleanValue("orderly"));
        return impl;
    }

    static Object rebalance(JSONObject req) throws Exception {
        MQClientInstance instance = client();
        DefaultMQPushConsumerImpl impl = consumer(req, instance);
        Pulls pulls = new Pulls(instance);
        set(MQClientInstance.class, instance, "pullMessageService", pulls);
        Later later = new Later();
        set(MQClientInstance.class, instance, "scheduledExecutorService", later);
        JSONObject starts = req.getJSONObject("starts");
        Set<Integer> refused = new HashSet<>();
        int[] unlocks = {0};
        RebalancePushImpl rebalance = new RebalancePushImpl(impl) {
            @Override
            public boolean lock(MessageQueue mq) {
                return !refused.contains(mq.getQueueId());
            }

            @Override
            public void unlock(MessageQueue mq, boolean oneway) {
                unlocks[0]++;
            }

            @Override
            public long computePullFromWhereWithException(MessageQueue mq) throws MQClientException {
                Object start = starts.get(String.valueOf(mq.getQueueId()));
                if (start instanceof Number) {
                    return ((Number) start).longValue();
                }
                throw new MQClientException("no offset for " + mq, null);
            }
        };
        Method update = RebalanceImpl.class.getDeclaredMethod("updateProcessQueueTableInRebalance", String.class,
            Set.class, boolean.class);
        update.setAccessible(true);
        Field consumeLock = ProcessQueue.class.getDeclaredField("consumeLock");
        consumeLock.setAccessible(true);
        Map<ProcessQueue, BusyLock> locks = new HashMap<>();
        JSONArray out = new JSONArray();
        for (Object o : req.getJSONArray("steps")) {
            JSONObject step = (JSONObject) o;
            Set<Integer> busy = ids(step, "busy");
            Set<Integer> expired = ids(step, "expired");
            refused.clear();
            refused.addAll(ids(step, "refused"));
            long now = System.currentTimeMillis();
            for (Map.Entry<MessageQueue, ProcessQueue> e : rebalance.getProcessQueueTable().entrySet()) {
                ProcessQueue pq = e.getValue();
                BusyLock lock = locks.get(pq);
                if (lock == null) {
                    lock = new BusyLock();
                    consumeLock.set(pq, lock);
                    locks.put(pq, lock);
                }
                lock.busy = busy.contains(e.getKey().getQueueId());
                pq.setLastPullTimestamp(expired.contains(e.getKey().getQueueId()) ? 0 : now);
            }
            Set<MessageQueue> assigned = new HashSet<>();
            for (Integer id : ids(step, "assigned")) {
                assigned.add(new MessageQueue("T", "b", id));
            }
            pulls.requests.clear();
            later.delays.clear();
            unlocks[0] = 0;
            update.invoke(rebalance, "T", assigned, req.getBooleanValue("orderly"));
            Map<Integer, JSONArray> table = new TreeMap<>();
            for (Map.Entry<MessageQueue, ProcessQueue> e : rebalance.getProcessQueueTable().entrySet()) {
                JSONArray row = new JSONArray();
                row.add(e.getKey().getQueueId());
                row.add(e.getValue().isDropped());
                row.add(e.getValue().isLocked());
                row.add(e.getValue().getTryUnlockTimes());
                table.put(e.getKey().getQueueId(), row);
            }
            Map<Integer, JSONArray> dispatched = new TreeMap<>();
            for (Object[] r : pulls.requests) {
                PullRequest request = (PullRequest) r[0];
                JSONArray row = new JSONArray();
                row.add(request.getMessageQueue().getQueueId());
                row.add(request.getNextOffset());
                dispatched.put(request.getMessageQueue().getQueueId(), row);
            }
            JSONObject after = new JSONObject();
            after.put("table", new JSONArray(new ArrayList<Object>(table.values())));
            after.put("pulls", new JSONArray(new ArrayList<Object>(dispatched.values())));
            after.put("unlocksNow", unlocks[0]);
            after.put("unlocksLater", new JSONArray(new ArrayList<Object>(later.delays)));
            out.add(after);
        }
        return out;
    }

    private static MessageExt message(long offset, String tags) {
        MessageExt msg = new MessageExt();
        msg.setTopic("T");
        msg.setQueueId(0);
        msg.setQueueOffset(offset);
        msg.setCommitLogOffset(offset * 100);
        msg.setBody(new byte[] {'x'});
        msg.setBornHost(new InetSocketAddress("127.0.0.1", 10911));
        msg.setStoreHost(new InetSocketAddress("127.0.0.1", 10911));
        if (tags != null) {
            msg.setTags(tags);
        }
        return msg;
    }

    /** The consume service of pullCallback: notes what the PullCallback hands it. */
    static final class Submitted implements ConsumeMessageService {
        JSONObject last;

        @Override
        public void submitConsumeRequest(List<MessageExt> msgs, ProcessQueue pq, MessageQueue mq, boolean dispatch) {
            JSONArray offsets = new JSONArray();
            for (MessageExt m : msgs) {
                offsets.add(m.getQueueOffset());
            }
            last = new JSONObject();
            last.put("offsets", offsets);
            last.put("dispatch", dispatch);
        }

        @Override
        public void start() {
        }

        @Override
        public void shutdown(long awaitTerminateMillis) {
        }

        @Override
        public void updateCorePoolSize(int corePoolSize) {
        }

        @Override
        public void incCorePoolSize() {
        }

        @Override
        public void decCorePoolSize() {
        }

        @Override
        public int getCorePoolSize() {
            return 0;
        }

        @Override
        public ConsumeMessageDirectlyResult consumeMessageDirectly(MessageExt msg, String brokerName) {
            return null;
        }
    }

    static Object pullCallback(JSONObject req) throws Exception {
        MQClientInstance instance = client();
        DefaultMQPushConsumerImpl impl = consumer(req, instance);
        DefaultMQPushConsumer consumer = impl.getDefaultMQPushConsumer();
        consumer.setPullInterval(req.getLongValue("pullInterval"));
        consumer.setPullBatchSize(req.getIntValue("pullBatchSize"));
        if (req.getString("subscribe") != null) {
            consumer.subscribe("T", req.getString("subscribe"));
        }
        Pulls pulls = new Pulls(instance);
        set(MQClientInstance.class, instance, "pullMessageService", pulls);
        Submitted submitted = new Submitted();
        set(DefaultMQPushConsumerImpl.class, impl, "consumeMessageService", submitted);
        JSONArray outcomes = req.getJSONArray("outcomes");
        int[] turn = {0};
        JSONArray[] asked = {null};
        PullAPIWrapper wrapper = new PullAPIWrapper(instance, "G1", false) {
            @Override
            public PullResult pullKernelImpl(MessageQueue mq, String subExpression, String expressionType,
                                             long subVersion, long offset, int maxNums, int sysFlag,
                                             long commitOffset, long brokerSuspendMaxTimeMillis, long timeoutMillis,
                                             CommunicationMode mode, PullCallback callback) throws MQClientException {
                JSONArray args = new JSONArray();
                args.add(offset);
                args.add(maxNums);
                args.add((sysFlag & 1) != 0 ? commitOffset : -1);
                args.add(brokerSuspendMaxTimeMillis);
                args.add(timeoutMillis);
                args.add(mode.name());
                asked[0] = args;
                JSONArray outcome = outcomes.getJSONArray(turn[0]);
                String status = outcome.getString(0);
                if ("THROW".equals(status)) {
                    throw new MQClientException("no route", null);
                }
                if ("EXCEPTION".equals(status)) {
                    callback.onException(new MQClientException("pull failed", null));
                    return null;
                }
                ByteArrayOutputStream binary = new ByteArrayOutputStream();
                JSONArray tags = outcome.getJSONArray(3);
                for (int i = 0; i < outcome.getIntValue(1); i++) {
                    try {
                        binary.write(MessageDecoder.encode(message(offset + i, tags.getString(i)), false));
                    } catch (Exception e) {
                        throw new IllegalStateException(e);
                    }
                }
                long next = offset + outcome.getLongValue(2);
                callback.onSuccess(new PullResultExt(PullStatus.valueOf(status), next, 0, next, null, 0,
                    binary.toByteArray()));
                return null;
            }
        };
        set(DefaultMQPushConsumerImpl.class, impl, "pullAPIWrapper", wrapper);
        impl.setServiceState(ServiceState.RUNNING);
        MessageQueue mq = new MessageQueue("T", "b", 0);
        if (req.get("memory") != null) {
            impl.getOffsetStore().updateOffset(mq, req.getLongValue("memory"), false);
        }
        ProcessQueue pq = new ProcessQueue();
        List<MessageExt> held = new ArrayList<>();
        for (Object o : req.getJSONArray("held")) {
            held.add(message(((Number) o).longValue(), null));
        }
        pq.putMessage(held);
        pq.setLocked(!req.containsKey("locked") || req.getBooleanValue("locked"));
        PullRequest request = new PullRequest();
        request.setConsumerGroup("G1");
        request.setMessageQueue(mq);
        request.setProcessQueue(pq);
        request.setNextOffset(req.getLongValue("start"));
        request.setPreviouslyLocked(true);
        JSONArray out = new JSONArray();
        for (turn[0] = 0; turn[0] < outcomes.size(); turn[0]++) {
            pulls.requests.clear();
            pulls.tasks.clear();
            pulls.runnables.clear();
            submitted.last = null;
            asked[0] = null;
            impl.pullMessage(request);
            JSONObject after = new JSONObject();
            after.put("delay", pulls.requests.isEmpty() ? null : pulls.requests.get(pulls.requests.size() - 1)[1]);
            after.put("rearms", pulls.requests.size());
            after.put("task", pulls.tasks.isEmpty() ? null : pulls.tasks.get(0));
            for (Runnable task : pulls.runnables) {
                task.run();  // OFFSET_ILLEGAL's fix: updateOffset, persist (no broker: logged), removeProcessQueue
            }
            after.put("next", request.getNextOffset());
            after.put("submitted", submitted.last);
            after.put("memory", impl.getOffsetStore().readOffset(mq, ReadOffsetType.READ_FROM_MEMORY));
            after.put("dropped", pq.isDropped());
            after.put("asked", asked[0]);
            out.add(after);
        }
        return out;
    }
}
