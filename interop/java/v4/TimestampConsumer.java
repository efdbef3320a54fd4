import com.alibaba.fastjson.JSON;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TimeZone;
import java.util.TreeMap;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.protocol.heartbeat.MessageModel;

/**
 * CONSUME_FROM_TIMESTAMP end to end (rmqspec's tests/interop/test_consume_timestamp_real.py): one broadcasting
 * DefaultMQPushConsumer of the 4.9.8 client (its local offset store starts empty, so RebalancePushImpl's
 * computePullFromWhere reads consumeTimestamp and asks SEARCH_OFFSET_BY_TIMESTAMP), in a UTC JVM.
 *
 * Arguments: namesrv group topic consumeTimestamp waitMillis. Prints one JSON line: queue id (as a string) ->
 * the queue offsets consumed, in order.
 */
public final class TimestampConsumer {
    private TimestampConsumer() {
    }

    public static void main(String[] args) throws Exception {
        TimeZone.setDefault(TimeZone.getTimeZone("UTC"));
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(args[1]);
        consumer.setNamesrvAddr(args[0]);
        consumer.setMessageModel(MessageModel.BROADCASTING);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_TIMESTAMP);
        consumer.setConsumeTimestamp(args[3]);
        consumer.subscribe(args[2], "*");
        final Map<String, List<Long>> seen = new TreeMap<>();
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            synchronized (seen) {
                for (MessageExt msg : msgs) {
                    seen.computeIfAbsent(String.valueOf(msg.getQueueId()), k -> new ArrayList<>()).add(msg.getQueueOffset());
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        Thread.sleep(Long.parseLong(args[4]));
        consumer.shutdown();
        synchronized (seen) {
            for (List<Long> offsets : seen.values()) {
                offsets.sort(null);
            }
            System.out.println(JSON.toJSONString(seen));
        }
    }
}
