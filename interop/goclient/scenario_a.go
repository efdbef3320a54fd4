package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// (a) retry ladder + DLQ: 10 messages to a 1-queue topic, a concurrently consuming push consumer with
// maxReconsumeTimes=3, m3 always ConsumeRetryLater: delivered 4 times (reconsume times 0..3, the broker's
// levels 3, 4, 5 between), then the broker moves it to %DLQ%group.
//
// The Go client refreshes topic routes every 30 s and has no option to change that (the Java program sets
// pollNameServerInterval=1000): the %RETRY%group topic the broker creates at the consumer's first heartbeat
// would be learnt only at the next refresh, up to 30 s later. So the program creates %RETRY%group itself
// (1 queue, perm 6, what the broker would create) before the consumer starts.
func scenarioA() error {
	t0 := time.Now()
	topic, group := "GS_RETRY_"+tag, "G_RETRY_"+tag
	if err := createTopic(topic, 1); err != nil {
		return err
	}
	if err := createGroup(brokerAddr, group, 16); err != nil {
		return err
	}
	retryTopic := "%RETRY%" + group
	if err := createTopic(retryTopic, 1); err != nil {
		return err
	}
	const poison = "m3"
	var mu sync.Mutex
	var attempts []*primitive.MessageExt
	var attemptRecv []int64
	okCount := map[string]int{}
	c, err := consumer.NewPushConsumer(consumer.WithGroupName(group), consumer.WithNameServer(nsAddr()),
		consumer.WithInstance("scnA"), consumer.WithMaxReconsumeTimes(3),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	if err != nil {
		return err
	}
	err = c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"},
		func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			now := nowMs()
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				if m.GetKeys() == poison {
					attempts = append(attempts, m)
					attemptRecv = append(attemptRecv, now)
					return consumer.ConsumeRetryLater, nil
				}
				okCount[m.GetKeys()]++
			}
			return consumer.ConsumeSuccess, nil
		})
	if err != nil {
		return err
	}
	if err := c.Start(); err != nil {
		return err
	}
	p, err := producer.NewDefaultProducer(producer.WithGroupName("PG_RETRY_"+tag), producer.WithNameServer(nsAddr()),
		producer.WithInstanceName("scnAp"), producer.WithRetry(0))
	if err != nil {
		return err
	}
	if err := p.Start(); err != nil {
		return err
	}
	var sent []interface{}
	for i := 0; i < 10; i++ {
		m := primitive.NewMessage(topic, []byte(fmt.Sprintf("body%d", i)))
		m.WithTag("tagA")
		m.WithKeys([]string{fmt.Sprintf("m%d", i)})
		m.WithProperty("scn", "a")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r, err := p.SendSync(ctx, m)
		cancel()
		if err != nil {
			return fmt.Errorf("send m%d: %v", i, err)
		}
		sent = append(sent, obj("key", fmt.Sprintf("m%d", i), "status", sendStatus(r.Status),
			"queue_id", r.MessageQueue.QueueId, "queue_offset", r.QueueOffset, "msg_id", r.MsgID,
			"offset_msg_id", r.OffsetMsgID))
	}
	sentTs := nowMs()
	// 4 deliveries expected (1 + 3 retries); then 8 s more to see that no 5th comes
	end := t0.Add(55 * time.Second)
	var fourth time.Time
	for time.Now().Before(end) {
		mu.Lock()
		n := len(attempts)
		mu.Unlock()
		if n >= 4 && fourth.IsZero() {
			fourth = time.Now()
		}
		if !fourth.IsZero() && time.Since(fourth) > 8*time.Second {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	mu.Lock()
	var rows []interface{}
	for i, a := range attempts {
		row := obj("attempt", i, "reconsume_times", a.ReconsumeTimes, "recv_ts", attemptRecv[i],
			"topic_seen_by_listener", a.Topic, "queue_id", a.Queue.QueueId, "queue_offset", a.QueueOffset,
			"store_ts", a.StoreTimestamp, "born_ts", a.BornTimestamp, "msg_id", a.MsgId,
			"offset_msg_id", a.OffsetMsgId)
		if i > 0 {
			prev := attempts[i-1]
			level := 3 + int(prev.ReconsumeTimes)
			row.Put("sendback_delay_level", level)
			row.Put("level_delay_ms", delayOf(level))
			row.Put("recv_gap_ms", attemptRecv[i]-attemptRecv[i-1])
			row.Put("store_minus_prev_recv_ms", a.StoreTimestamp-attemptRecv[i-1])
			row.Put("recv_minus_store_ms", attemptRecv[i]-a.StoreTimestamp)
		} else {
			row.Put("recv_minus_sent_done_ms", attemptRecv[i]-sentTs)
		}
		row.Put("properties", sortedProps(a.GetProperties()))
		rows = append(rows, row)
	}
	nAttempts := len(attempts)
	others := map[string]int{}
	for k, v := range okCount {
		others[k] = v
	}
	mu.Unlock()
	shutdownBounded("consumer "+group, c.Shutdown)
	shutdownBounded("producer PG_RETRY", p.Shutdown)

	// read back the DLQ with the Go pull consumer
	dlq := "%DLQ%" + group
	dlqInfo := obj("topic", dlq, "route_queues", routeQueues(dlq))
	msgs, err := pullFrom("G_DLQREADER_"+tag, "scnAdlq", dlq, 0, 0, 32)
	if err != nil {
		dlqInfo.Put("error", err.Error())
	} else {
		var found []interface{}
		for _, m := range msgs {
			found = append(found, msgInfo(m, nowMs()))
		}
		dlqInfo.Put("pulled_messages", found)
	}
	out("scenario", "a_retry_dlq", "topic", topic, "group", group, "client_maxReconsumeTimes", 3,
		"group_retryMaxTimes", 16, "poison_key", poison, "deliveries_of_poison", nAttempts,
		"other_messages_consumed_once", others, "attempts", rows, "dlq", dlqInfo, "sent", sent,
		"retry_topic_created_by_program", retryTopic, "elapsed_ms", time.Since(t0).Milliseconds())
	return nil
}

func sendStatus(s primitive.SendStatus) string {
	switch s {
	case primitive.SendOK:
		return "SEND_OK"
	case primitive.SendFlushDiskTimeout:
		return "FLUSH_DISK_TIMEOUT"
	case primitive.SendFlushSlaveTimeout:
		return "FLUSH_SLAVE_TIMEOUT"
	case primitive.SendSlaveNotAvailable:
		return "SLAVE_NOT_AVAILABLE"
	default:
		return fmt.Sprintf("STATUS_%d", s)
	}
}
