import com.alibaba.fastjson.JSON;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Seed E3 end to end (rmqspec's tests/interop/test_sql92_client_real.py): clustering DefaultMQPushConsumers of
 * the 4.9.8 client subscribed with MessageSelector.bySql, CONSUME_FROM_FIRST_OFFSET, one group per expression,
 * all in this JVM.
 *
 * Arguments: namesrv topic waitMillis group1 expression1 [group2 expression2 ...]. Prints one JSON line: group ->
 * {"consumed": ["queueId:queueOffset", ...] sorted, "start_error": the MQClientException start() threw or null}.
 */
public final class SqlConsumer {
    private SqlConsumer() {
    }

    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        String topic = args[1];
        long waitMillis = Long.parseLong(args[2]);
        Map<String, List<String>> seen = new TreeMap<>();
        Map<String, String> startErrors = new TreeMap<>();
        List<DefaultMQPushConsumer> consumers = new ArrayList<>();
        for (int i = 3; i + 1 < args.length; i += 2) {
            final String group = args[i];
            final List<String> mine = new ArrayList<>();
            seen.put(group, mine);
            DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
            consumer.setNamesrvAddr(namesrv);
            consumer.setInstanceName(group);
            consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            consumer.subscribe(topic, MessageSelector.bySql(args[i + 1]));
            consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
                synchronized (mine) {
                    for (MessageExt msg : msgs) {
                        mine.add(msg.getQueueId() + ":" + msg.getQueueOffset());
                    }
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            consumers.add(consumer);
            try {
                consumer.start();
                startErrors.put(group, null);
            } catch (MQClientException e) {
                startErrors.put(group, e.getResponseCode() + " " + e.getErrorMessage());
            }
        }
        Thread.sleep(waitMillis);
        for (DefaultMQPushConsumer consumer : consumers) {
            consumer.shutdown();
        }
        Map<String, Object> out = new TreeMap<>();
        for (Map.Entry<String, List<String>> e : seen.entrySet()) {
            Map<String, Object> row = new TreeMap<>();
            synchronized (e.getValue()) {
                List<String> consumed = new ArrayList<>(e.getValue());
                consumed.sort(null);
                row.put("consumed", consumed);
            }
            row.put("start_error", startErrors.get(e.getKey()));
            out.put(e.getKey(), row);
        }
        System.out.println(JSON.toJSONString(out, com.alibaba.fastjson.serializer.SerializerFeature.WriteMapNullValue));
    }
}
