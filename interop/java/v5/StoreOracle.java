/*
 * Oracle harness around the REAL Apache RocketMQ 5.3.3 org.apache.rocketmq.store.DefaultMessageStore: the same
 * program as interop/java/v4/StoreOracle.java (same command line, input, JSON keys and semantics), ported to
 * the 5.x API.
 *
 *   java -cp ... StoreOracle write STOREDIR MSGS.jsonl     put every line, print the real PutMessageResult per line
 *   java -cp ... StoreOracle dump  STOREDIR                load+recover+start, print recovery facts, every
 *                                                          consume-queue message (getMessage) and a commitlog scan
 *   java -cp ... StoreOracle dump-many LISTFILE            dump every store listed (one per line) in one JVM
 *
 * System properties (all optional):
 *   oracle.clFileSize   commitlog mapped file size   (default 1048576)
 *   oracle.cqFileSize   consume queue mapped file size (default 300000*20, RocketMQ's default)
 *   oracle.flush        SYNC_FLUSH | ASYNC_FLUSH     (default ASYNC_FLUSH)
 *   oracle.delayLevels  messageDelayLevel            (default RocketMQ's "1s 5s 10s 30s 1m ... 2h")
 *   oracle.schedule     "on" starts ScheduleMessageService (it then delivers due delayed messages and
 *                       writes delayOffset.json); default off so the store is not changed behind us
 *   oracle.checkCRC     checkCRCOnRecover (default true, RocketMQ's default)
 *   oracle.storeHost    store host ip:port stamped by write (default 127.0.0.1:10911)
 *   oracle.logLevel     RocketMQ's log level on stderr (default WARN)
 *   oracle.autoMessageVersionOnTopicLen  5.x's switch to the v2 record format for topics over 127 chars
 *                       (default false here: v1 records only; 5.3.3's own default is true)
 *
 * Input line for write (JSON): {"topic","queue_id","body_b64","tags","keys","properties":{...},
 *   "delay_level","sys_flag","born_ts","store_host","born_host","flag","reconsume_times",
 *   "prepared_txn_offset","half":true (the broker's TransactionalMessageBridge.putHalfMessage)}
 * Properties are set the way 5.3.3's SendMessageProcessor does: the map string2messageProperties returns
 * (a HashMap of initial capacity 128 in 5.x, 16 in 4.x: the on-disk property order differs from 4.9.8's), then
 * propertiesString = messageProperties2String(map) (5.x keeps the trailing \u0002 separator; 4.9.8 drops it).
 * Empty property values are kept in the map, as the v4 oracle does (string2messageProperties would drop them).
 *
 * What 5.x moved out of the store is taken from the broker module, the way BrokerController wires it:
 *   - the delay-level rewrite to SCHEDULE_TOPIC_XXXX (4.x: CommitLog.asyncPutMessage; 5.x: the put-message hook
 *     HookUtils.handleScheduleMessage that BrokerController.registerMessageStoreHook installs, with
 *     checkBeforePutMessage and checkInnerBatch before it);
 *   - ScheduleMessageService (4.x: org.apache.rocketmq.store.schedule, loaded inside DefaultMessageStore.load;
 *     5.x: org.apache.rocketmq.broker.schedule, loaded by BrokerController.recoverAndInitService after the store);
 *   - the half-message rewrite (TransactionalMessageBridge.putHalfMessage, called as is).
 * A BrokerController is constructed for that (never initialized or started: no remoting server, no name
 * server, no metadata files read or written).
 *
 * The store is kept in the classic (4.x-compatible) layout: storeType=default (no RocksDB consume queue,
 * no rocksdbCQDoubleWrite), no DLedger, no LMQ/multi-dispatch, no compaction store (5.x's default
 * enableCompaction=true builds a CompactionStore under STOREDIR/compaction and adds its dispatcher), no timer wheel (timerWheelEnable=false:
 * no TimerMessageStore; a timer-property message would be refused with WHEEL_TIMER_NOT_ENABLE), no consume
 * queue ext, no property CRC, and message version v1 always (autoMessageVersionOnTopicLen=false: 5.x would
 * write the v2 magic for retry topics longer than 127 chars; -Doracle.autoMessageVersionOnTopicLen=true restores it).
 */

import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.JSONObject;
import com.alibaba.fastjson.serializer.SerializerFeature;

import java.io.BufferedReader;
import java.io.File;
import java.io.FileInputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.rocketmq.broker.BrokerController;
import org.apache.rocketmq.broker.schedule.ScheduleMessageService;
import org.apache.rocketmq.broker.transaction.queue.TransactionalMessageBridge;
import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.common.UtilAll;
import org.apache.rocketmq.common.message.MessageAccessor;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageExtBrokerInner;
import org.apache.rocketmq.remoting.netty.NettyServerConfig;
import org.apache.rocketmq.store.AppendMessageResult;
import org.apache.rocketmq.store.CommitLog;
import org.apache.rocketmq.store.ConsumeQueue;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.DispatchRequest;
import org.apache.rocketmq.store.GetMessageResult;
import org.apache.rocketmq.store.PutMessageResult;
import org.apache.rocketmq.store.SelectMappedBufferResult;
import org.apache.rocketmq.store.config.BrokerRole;
import org.apache.rocketmq.store.config.FlushDiskType;
import org.apache.rocketmq.store.config.MessageStoreConfig;
import org.apache.rocketmq.store.config.StorePathConfigHelper;
import org.apache.rocketmq.store.queue.ConsumeQueueInterface;
import org.apache.rocketmq.store.queue.CqUnit;

public class StoreOracle {
    static final PrintStream OUT;
    static {
        PrintStream ps;
        try {
            ps = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, "UTF-8");
        } catch (Exception e) {
            ps = System.out;
        }
        OUT = ps;
    }

    /**
     * 5.x logs through a shaded logback (io.github.aliyunmq:rocketmq-logback-classic) that reads
     * -Drmq.logback.configurationFile, not -Dlogback.configurationFile, and whose classes live under
     * org.apache.rocketmq.logging.ch.qos.logback. Unconfigured it falls back to logback's BasicConfigurator: DEBUG
     * on stdout, which would interleave with our JSON lines. So, unless the caller chose a file, write the
     * equivalent of interop/conf/logback-stderr.xml with the shaded class names and point the property at it,
     * before any RocketMQ class (and so its LoggerFactory) is initialized.
     */
    static void configureLogging() {
        if (System.getProperty("rmq.logback.configurationFile") != null) return;
        String xml = "<configuration scan=\"false\">\n"
            + "  <appender name=\"ERR\" class=\"org.apache.rocketmq.logging.ch.qos.logback.core.ConsoleAppender\">\n"
            + "    <target>System.err</target>\n"
            + "    <encoder><pattern>%d{HH:mm:ss.SSS} %-5level %logger{0} - %msg%n</pattern></encoder>\n"
            + "  </appender>\n"
            + "  <root level=\"${oracle.logLevel:-WARN}\"><appender-ref ref=\"ERR\"/></root>\n"
            + "</configuration>\n";
        try {
            File f = File.createTempFile("storeoracle-logback-", ".xml");
            f.deleteOnExit();
            java.nio.file.Files.write(f.toPath(), xml.getBytes(StandardCharsets.UTF_8));
            System.setProperty("rmq.logback.configurationFile", f.getAbsolutePath());
        } catch (Exception e) {
            System.err.println("StoreOracle: cannot write a logback configuration: " + e);
        }
    }

    static String json(Object o) {
        return JSON.toJSONString(o, SerializerFeature.WriteNonStringKeyAsString);
    }

    public static void main(String[] args) throws Exception {
        configureLogging();
        if (args.length < 2) {
            System.err.println("usage: StoreOracle write STOREDIR MSGS.jsonl | dump STOREDIR | dump-many LISTFILE");
            System.exit(2);
        }
        String mode = args[0];
        String dir = new File(args[1]).getAbsolutePath();
        int rc;
        try {
            if ("write".equals(mode) && args.length >= 3) {
                rc = write(dir, args[2]);
            } else if ("dump".equals(mode)) {
                rc = dump(dir);
            } else if ("dump-many".equals(mode)) {
                // args[1] = a file listing one store directory per line: one JVM for many stores
                // (crash-state sweeps). Each store's lines are preceded by {"kind":"store","path":...}.
                rc = 0;
                for (String line : java.nio.file.Files.readAllLines(new File(args[1]).toPath())) {
                    String d = line.trim();
                    if (d.isEmpty()) continue;
                    Map<String, Object> o = new TreeMap<>();
                    o.put("kind", "store");
                    o.put("path", d);
                    OUT.println(JSON.toJSONString(o));
                    try {
                        rc = Math.max(rc, dump(new File(d).getAbsolutePath()));
                    } catch (Throwable t) {
                        Map<String, Object> e = new TreeMap<>();
                        e.put("kind", "error");
                        e.put("path", d);
                        e.put("error", String.valueOf(t));
                        OUT.println(JSON.toJSONString(e));
                        rc = 3;
                    }
                    OUT.flush();
                }
            } else {
                System.err.println("unknown mode " + mode);
                rc = 2;
            }
        } catch (Throwable t) {
            t.printStackTrace();
            Map<String, Object> o = new TreeMap<>();
            o.put("kind", "error");
            o.put("error", String.valueOf(t));
            OUT.println(json(o));
            rc = 3;
        }
        OUT.flush();
        // RocketMQ leaves non-daemon threads around (index/allocate/stats services); exit explicitly.
        System.exit(rc);
    }

    static MessageStoreConfig config(String dir) {
        MessageStoreConfig c = new MessageStoreConfig();
        c.setStorePathRootDir(dir);
        c.setStorePathCommitLog(dir + File.separator + "commitlog");
        c.setMappedFileSizeCommitLog(Integer.getInteger("oracle.clFileSize", 1024 * 1024));
        c.setMappedFileSizeConsumeQueue(Integer.getInteger("oracle.cqFileSize", 300000 * ConsumeQueue.CQ_STORE_UNIT_SIZE));
        c.setFlushDiskType(FlushDiskType.valueOf(System.getProperty("oracle.flush", "ASYNC_FLUSH")));
        c.setBrokerRole(BrokerRole.ASYNC_MASTER);
        c.setHaListenPort(0); // ephemeral; DefaultHAService always binds a listen socket
        String levels = System.getProperty("oracle.delayLevels");
        if (levels != null) c.setMessageDelayLevel(levels);
        c.setCheckCRCOnRecover(Boolean.parseBoolean(System.getProperty("oracle.checkCRC", "true")));
        c.setWarmMapedFileEnable(false);
        // the classic, 4.x-compatible file layout (see the header); most of these are 5.3.3's defaults already
        c.setStoreType("default");             // not defaultRocksDB: consume queues are the 20-byte-unit files
        c.setRocksdbCQDoubleWriteEnable(false);
        c.setEnableDLegerCommitLog(false);
        c.setDuplicationEnable(false);
        c.setEnableLmq(false);
        c.setEnableMultiDispatch(false);
        c.setEnableCompaction(false);          // 5.3.3 default: true
        c.setTimerWheelEnable(false);          // 5.3.3 default: true (the broker then builds a TimerMessageStore)
        c.setEnableConsumeQueueExt(false);
        c.setEnabledAppendPropCRC(false);
        c.setForceVerifyPropCRC(false);
        // 5.3.3 default: true (the v2 magic, a 2-byte topic length, for topics over 127 chars: only retry topics
        // get that far, HookUtils.checkBeforePutMessage refuses other topics over 127 UTF-8 bytes)
        c.setAutoMessageVersionOnTopicLen(Boolean.parseBoolean(System.getProperty("oracle.autoMessageVersionOnTopicLen", "false")));
        c.setTransientStorePoolEnable(false);
        c.setEnableBuildConsumeQueueConcurrently(false);
        return c;
    }

    /** A store as the 5.3.3 broker opens one, and the broker-side services 4.x had inside the store. */
    static final class Opened {
        final BrokerController broker;
        final DefaultMessageStore store;
        final ScheduleMessageService schedule;
        final boolean lastExitOk;

        Opened(BrokerController broker, DefaultMessageStore store, boolean lastExitOk) {
            this.broker = broker;
            this.store = store;
            this.schedule = broker.getScheduleMessageService();
            this.lastExitOk = lastExitOk;
        }

        void shutdown() {
            try {
                // persists delayOffset.json only when it was started (oracle.schedule=on), as ScheduleMessageService.stop does
                schedule.shutdown();
            } finally {
                store.shutdown();
                broker.getBrokerStatsManager().shutdown();
            }
        }
    }

    static Opened open(String dir) throws Exception {
        MessageStoreConfig c = config(dir);
        BrokerConfig bc = new BrokerConfig();
        bc.setLongPollingEnable(false);
        boolean lastExitOk = !new File(StorePathConfigHelper.getAbortFile(dir)).exists();
        // No NettyClientConfig: the constructor then builds no BrokerOuterAPI (no name-server client).
        BrokerController broker = new BrokerController(bc, new NettyServerConfig(), null, c);
        // BrokerController.initializeMessageStore: the store gets the topic-config table (here the system topics
        // the TopicConfigManager constructor registers; topics.json is not loaded into it: every other topic is a
        // SimpleCQ/DELETE-policy topic, as 4.x's store treats every topic).
        DefaultMessageStore store = new DefaultMessageStore(c, broker.getBrokerStatsManager(), null, bc,
            broker.getTopicConfigManager().getTopicConfigTable());
        broker.setMessageStore(store);
        Opened o = new Opened(broker, store, lastExitOk);
        try {
            // BrokerController.recoverAndInitService: hooks, store.load(), then ScheduleMessageService.load()
            broker.registerMessageStoreHook();
            if (!store.load()) {
                throw new IllegalStateException("DefaultMessageStore.load() returned false");
            }
            if (!o.schedule.load()) {
                // 4.x: ScheduleMessageService.load() ran inside DefaultMessageStore.load(), which then returned
                // false; the 5.x broker refuses to start the same way
                throw new IllegalStateException("ScheduleMessageService.load() returned false");
            }
            store.start();
        } catch (Exception e) {
            o.shutdown(); // release what was built (dump-many goes on with the next store in this JVM)
            throw e;
        }
        if ("on".equals(System.getProperty("oracle.schedule", "off"))) {
            // BrokerController.changeSpecialServiceStatus(true) on a master, after the store started
            o.schedule.start();
        }
        return o;
    }

    static InetSocketAddress addr(String s, String dflt) {
        if (s == null || s.isEmpty()) s = dflt;
        int i = s.lastIndexOf(':');
        String host = s.substring(0, i);
        if (host.startsWith("[") && host.endsWith("]")) host = host.substring(1, host.length() - 1);
        return new InetSocketAddress(host, Integer.parseInt(s.substring(i + 1)));
    }

    // ------------------------------------------------------------------ write
    static int write(String dir, String jsonl) throws Exception {
        Opened opened = open(dir);
        DefaultMessageStore store = opened.store;
        TransactionalMessageBridge bridge = new TransactionalMessageBridge(opened.broker, store);
        String defaultStoreHost = System.getProperty("oracle.storeHost", "127.0.0.1:10911");
        int failures = 0;
        try (BufferedReader r = new BufferedReader(new InputStreamReader(new FileInputStream(jsonl), StandardCharsets.UTF_8))) {
            String line;
            int i = 0;
            while ((line = r.readLine()) != null) {
                if (line.trim().isEmpty()) continue;
                JSONObject in = JSON.parseObject(line);
                MessageExtBrokerInner m = new MessageExtBrokerInner();
                m.setTopic(in.getString("topic"));
                m.setQueueId(in.getIntValue("queue_id"));
                String b64 = in.getString("body_b64");
                m.setBody(b64 == null ? new byte[0] : Base64.getDecoder().decode(b64));
                m.setFlag(in.getIntValue("flag"));
                // properties as 5.3.3's SendMessageProcessor builds them: the map string2messageProperties makes
                Map<String, String> props = MessageDecoder.string2messageProperties("");
                JSONObject p = in.getJSONObject("properties");
                if (p != null) for (String k : p.keySet()) props.put(k, p.getString(k));
                if (in.getString("tags") != null) props.put(MessageConst.PROPERTY_TAGS, in.getString("tags"));
                if (in.getString("keys") != null) props.put(MessageConst.PROPERTY_KEYS, in.getString("keys"));
                int delay = in.getIntValue("delay_level");
                if (delay > 0) props.put(MessageConst.PROPERTY_DELAY_TIME_LEVEL, String.valueOf(delay));
                MessageAccessor.setProperties(m, props);
                m.setSysFlag(in.getIntValue("sys_flag"));
                m.setBornTimestamp(in.containsKey("born_ts") ? in.getLongValue("born_ts") : System.currentTimeMillis());
                m.setBornHost(addr(in.getString("born_host"), "127.0.0.1:50000"));
                m.setStoreHost(addr(in.getString("store_host"), defaultStoreHost));
                m.setReconsumeTimes(in.getIntValue("reconsume_times"));
                m.setPreparedTransactionOffset(in.getLongValue("prepared_txn_offset"));
                m.setPropertiesString(MessageDecoder.messageProperties2String(m.getProperties()));
                m.setTagsCode(MessageExtBrokerInner.tagsString2tagsCode(MessageExt.parseTopicFilterType(m.getSysFlag()), m.getTags()));

                PutMessageResult res;
                if (in.getBooleanValue("half")) {
                    // TransactionalMessageBridge.parseHalfMessageInner (5.3.3): REAL_TOPIC/REAL_QID (and
                    // __transactionId__ when the message has an UNIQ_KEY), sysFlag NOT_TYPE, RMQ_SYS_TRANS_HALF_TOPIC/0
                    res = bridge.putHalfMessage(m);
                } else {
                    res = store.putMessage(m);
                }
                Map<String, Object> o = new TreeMap<>();
                o.put("i", i);
                o.put("status", res.getPutMessageStatus().name());
                AppendMessageResult a = res.getAppendMessageResult();
                if (a != null) {
                    o.put("append_status", a.getStatus().name());
                    o.put("wrote_offset", a.getWroteOffset());
                    o.put("wrote_bytes", a.getWroteBytes());
                    o.put("msg_id", a.getMsgId());
                    o.put("queue_offset", a.getLogicsOffset());
                    o.put("store_ts", a.getStoreTimestamp());
                    o.put("msg_num", a.getMsgNum());
                }
                o.put("topic", m.getTopic());
                o.put("queue_id", m.getQueueId());
                o.put("sys_flag", m.getSysFlag());
                o.put("properties_string", m.getPropertiesString());
                if (!res.isOk()) failures++;
                OUT.println(json(o));
                i++;
            }
        } finally {
            opened.shutdown();
        }
        Map<String, Object> o = new TreeMap<>();
        o.put("kind", "shutdown");
        o.put("normal", abortGone(dir));
        o.put("failures", failures);
        OUT.println(json(o));
        return 0;
    }

    static boolean abortGone(String dir) {
        return !new File(StorePathConfigHelper.getAbortFile(dir)).exists();
    }

    // ------------------------------------------------------------------ dump
    static Map<String, Object> msgJson(MessageExt m) {
        Map<String, Object> o = new TreeMap<>();
        o.put("commitlog_offset", m.getCommitLogOffset());
        o.put("size", m.getStoreSize());
        o.put("topic", m.getTopic());
        o.put("queue_id", m.getQueueId());
        o.put("queue_offset", m.getQueueOffset());
        o.put("sys_flag", m.getSysFlag());
        o.put("flag", m.getFlag());
        o.put("born_ts", m.getBornTimestamp());
        o.put("store_ts", m.getStoreTimestamp());
        o.put("born_host", m.getBornHostString() + ":" + ((InetSocketAddress) m.getBornHost()).getPort());
        o.put("store_host", ((InetSocketAddress) m.getStoreHost()).getAddress().getHostAddress() + ":" + ((InetSocketAddress) m.getStoreHost()).getPort());
        o.put("reconsume_times", m.getReconsumeTimes());
        o.put("prepared_txn_offset", m.getPreparedTransactionOffset());
        o.put("body_crc", m.getBodyCRC());
        byte[] body = m.getBody() == null ? new byte[0] : m.getBody();
        o.put("body_crc_recomputed", UtilAll.crc32(body));
        o.put("msg_id", m.getMsgId());
        o.put("tags", m.getTags());
        List<String> keys = new ArrayList<>();
        if (m.getKeys() != null) for (String k : m.getKeys().split(MessageConst.KEY_SEPARATOR)) if (!k.isEmpty()) keys.add(k);
        o.put("keys", keys);
        o.put("properties", m.getProperties() == null ? Collections.emptyMap() : new TreeMap<>(m.getProperties()));
        o.put("body_b64", Base64.getEncoder().encodeToString(body));
        return o;
    }

    static int dump(String dir) throws Exception {
        Opened opened = open(dir);
        DefaultMessageStore store = opened.store;
        try {
            CommitLog cl = store.getCommitLog();
            Map<String, Object> rec = new TreeMap<>();
            rec.put("kind", "recovery");
            rec.put("last_exit_ok", opened.lastExitOk);
            rec.put("commitlog_min_offset", cl.getMinOffset());
            rec.put("commitlog_max_offset", cl.getMaxOffset());
            // 5.x: outside controller/duplication mode CommitLog.getConfirmOffset() is computed, not stored: the
            // max offset (ASYNC_FLUSH) or the flushed offset (SYNC_FLUSH). 4.9.8 printed a field that stays -1.
            rec.put("confirm_offset", store.getConfirmOffset());
            rec.put("checkpoint_physic_ts", store.getStoreCheckpoint().getPhysicMsgTimestamp());
            rec.put("checkpoint_logics_ts", store.getStoreCheckpoint().getLogicsMsgTimestamp());
            rec.put("checkpoint_index_ts", store.getStoreCheckpoint().getIndexMsgTimestamp());
            List<Map<String, Object>> queues = new ArrayList<>();
            TreeMap<String, TreeMap<Integer, ConsumeQueueInterface>> sorted = new TreeMap<>();
            store.getConsumeQueueTable().forEach((t, m) -> sorted.put(t, new TreeMap<>(m)));
            for (Map.Entry<String, TreeMap<Integer, ConsumeQueueInterface>> e : sorted.entrySet()) {
                for (Map.Entry<Integer, ConsumeQueueInterface> q : e.getValue().entrySet()) {
                    Map<String, Object> qo = new TreeMap<>();
                    qo.put("topic", e.getKey());
                    qo.put("queue_id", q.getKey());
                    qo.put("min_offset", q.getValue().getMinOffsetInQueue());
                    qo.put("max_offset", q.getValue().getMaxOffsetInQueue());
                    qo.put("max_physic_offset", q.getValue().getMaxPhysicOffset());
                    queues.add(qo);
                }
            }
            rec.put("queues", queues);
            // delayOffset.json as the real ScheduleMessageService loaded it (the broker refuses to start on a bad
            // file). 5.x's DelayOffsetSerializeWrapper also carries a dataVersion (absent in 4.9.8's encoding).
            rec.put("delay_offsets_loaded", JSON.parse(opened.schedule.encode()));
            rec.put("max_delay_level", opened.schedule.getMaxDelayLevel());
            OUT.println(json(rec));
            // config files parsed by the real broker classes (fastjson), when present
            Map<String, Object> cfg = new TreeMap<>();
            cfg.put("kind", "config");
            File co = new File(dir, "config" + File.separator + "consumerOffset.json");
            if (co.exists()) {
                try {
                    org.apache.rocketmq.broker.offset.ConsumerOffsetManager com = new org.apache.rocketmq.broker.offset.ConsumerOffsetManager();
                    com.decode(new String(java.nio.file.Files.readAllBytes(co.toPath()), StandardCharsets.UTF_8));
                    cfg.put("consumer_offsets", com.getOffsetTable());
                } catch (Throwable t) {
                    cfg.put("consumer_offsets_error", String.valueOf(t));
                }
            }
            File tj = new File(dir, "config" + File.separator + "topics.json");
            if (tj.exists()) {
                try {
                    // 5.x: org.apache.rocketmq.common.protocol.body -> org.apache.rocketmq.remoting.protocol.body;
                    // TopicConfig.toString() also lists the 5.x attributes
                    org.apache.rocketmq.remoting.protocol.body.TopicConfigSerializeWrapper w =
                        org.apache.rocketmq.remoting.protocol.RemotingSerializable.fromJson(
                            new String(java.nio.file.Files.readAllBytes(tj.toPath()), StandardCharsets.UTF_8),
                            org.apache.rocketmq.remoting.protocol.body.TopicConfigSerializeWrapper.class);
                    Map<String, Object> tm = new TreeMap<>();
                    w.getTopicConfigTable().forEach((k, v) -> tm.put(k, v.toString()));
                    cfg.put("topics", tm);
                } catch (Throwable t) {
                    cfg.put("topics_error", String.valueOf(t));
                }
            }
            OUT.println(json(cfg));

            // every consume-queue unit and the message it points to, through the real getMessage path
            for (Map.Entry<String, TreeMap<Integer, ConsumeQueueInterface>> e : sorted.entrySet()) {
                for (Map.Entry<Integer, ConsumeQueueInterface> q : e.getValue().entrySet()) {
                    String topic = e.getKey();
                    int qid = q.getKey();
                    ConsumeQueueInterface cq = q.getValue();
                    long off = cq.getMinOffsetInQueue();
                    long max = cq.getMaxOffsetInQueue();
                    while (off < max) {
                        // the unit itself (tagsCode is what the real dispatch computed)
                        long unitPhy = -1, unitTags = 0;
                        int unitSize = -1;
                        if (cq instanceof ConsumeQueue) {
                            SelectMappedBufferResult ib = ((ConsumeQueue) cq).getIndexBuffer(off);
                            if (ib != null) {
                                try {
                                    ByteBuffer bb = ib.getByteBuffer();
                                    unitPhy = bb.getLong();
                                    unitSize = bb.getInt();
                                    unitTags = bb.getLong();
                                } finally {
                                    ib.release();
                                }
                            }
                        } else {
                            CqUnit u = cq.get(off); // not reached in the classic layout (always ConsumeQueue)
                            if (u != null) {
                                unitPhy = u.getPos();
                                unitSize = u.getSize();
                                unitTags = u.getTagsCode();
                            }
                        }
                        GetMessageResult gr = store.getMessage("oracle", topic, qid, off, 1, null);
                        Map<String, Object> o;
                        if (gr != null && gr.getMessageBufferList().size() == 1) {
                            MessageExt m = MessageDecoder.decode(gr.getMessageBufferList().get(0).duplicate(), true, false);
                            o = m == null ? new TreeMap<>() : msgJson(m);
                        } else {
                            o = new TreeMap<>();
                        }
                        o.put("kind", "cq");
                        o.put("cq_topic", topic);
                        o.put("cq_queue_id", qid);
                        o.put("cq_offset", off);
                        o.put("cq_phy_offset", unitPhy);
                        o.put("cq_size", unitSize);
                        o.put("cq_tags_code", unitTags);
                        o.put("get_status", gr == null ? null : gr.getStatus().name());
                        OUT.println(json(o));
                        if (gr != null) gr.release();
                        long next = gr == null ? off + 1 : gr.getNextBeginOffset();
                        off = next > off ? next : off + 1;
                    }
                }
            }

            // commitlog scan the way ReputMessageService walks it (includes PREPARED/ROLLBACK records)
            long offset = cl.getMinOffset();
            long maxOffset = cl.getMaxOffset();
            while (offset < maxOffset) {
                SelectMappedBufferResult r = cl.getData(offset, offset == cl.getMinOffset());
                if (r == null) break;
                boolean rolled = false;
                try {
                    ByteBuffer bb = r.getByteBuffer();
                    int pos = 0;
                    while (pos < r.getSize() && offset < maxOffset) {
                        ByteBuffer dup = bb.duplicate();
                        dup.position(pos);
                        // (buffer, checkCRC, checkDupInfo, readBody): 4.9.8's (buffer, false, false) read no body
                        DispatchRequest dr = cl.checkMessageAndReturnSize(dup, false, false, false);
                        int size = dr.getBufferSize() == -1 ? dr.getMsgSize() : dr.getBufferSize();
                        if (dr.isSuccess() && size > 0) {
                            ByteBuffer one = bb.duplicate();
                            one.position(pos);
                            one.limit(pos + size);
                            MessageExt m = MessageDecoder.decode(one.slice(), true, false);
                            Map<String, Object> o = m == null ? new TreeMap<>() : msgJson(m);
                            o.put("kind", "cl");
                            o.put("dispatch_tags_code", dr.getTagsCode());
                            o.put("scan_offset", offset);
                            OUT.println(json(o));
                            pos += size;
                            offset += size;
                        } else if (dr.isSuccess() && size == 0) {
                            offset = cl.rollNextFile(offset);
                            rolled = true;
                            break;
                        } else {
                            Map<String, Object> o = new TreeMap<>();
                            o.put("kind", "cl_error");
                            o.put("offset", offset);
                            o.put("size", size);
                            OUT.println(json(o));
                            offset = maxOffset;
                            break;
                        }
                    }
                } finally {
                    r.release();
                }
                if (!rolled && offset < maxOffset && r.getSize() == 0) break;
            }
        } finally {
            opened.shutdown();
        }
        Map<String, Object> o = new TreeMap<>();
        o.put("kind", "shutdown");
        o.put("normal", abortGone(dir));
        OUT.println(json(o));
        return 0;
    }
}
