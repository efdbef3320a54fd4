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

// (b) delayed messages, levels 2, 2, 2, 1, 3 (WithDelayTimeLevel): each is received level seconds after it
// was sent. The Go client sees the send result (queue offset inside SCHEDULE_TOPIC_XXXX, offset msg id of
// the stored schedule copy) and the delivered copy (its own store time, the born time the client set, the
// DELAY/REAL_TOPIC/REAL_QID properties); the schedule copy's store time is not visible to it without
// reading the system topic, so the born time (taken by the client just before the send) stands for it.
func scenarioB() error {
	t0 := time.Now()
	topic, group := "GS_DELAY_"+tag, "G_DELAY_"+tag
	if err := createTopic(topic, 1); err != nil {
		return err
	}
	if err := createGroup(brokerAddr, group, 16); err != nil {
		return err
	}
	var mu sync.Mutex
	got := map[string]*primitive.MessageExt{}
	gotTs := map[string]int64{}
	c, err := consumer.NewPushConsumer(consumer.WithGroupName(group), consumer.WithNameServer(nsAddr()),
		consumer.WithInstance("scnB"), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	if err != nil {
		return err
	}
	err = c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"},
		func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			now := nowMs()
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				got[m.GetKeys()] = m
				gotTs[m.GetKeys()] = now
			}
			return consumer.ConsumeSuccess, nil
		})
	if err != nil {
		return err
	}
	if err := c.Start(); err != nil {
		return err
	}
	p, err := producer.NewDefaultProducer(producer.WithGroupName("PG_DELAY_"+tag), producer.WithNameServer(nsAddr()),
		producer.WithInstanceName("scnBp"), producer.WithRetry(0))
	if err != nil {
		return err
	}
	if err := p.Start(); err != nil {
		return err
	}
	levels := []int{2, 2, 2, 1, 3}
	var sends []*M
	for i, lv := range levels {
		key := fmt.Sprintf("d%d", i)
		m := primitive.NewMessage(topic, []byte("delayed "+key))
		m.WithTag("d")
		m.WithKeys([]string{key})
		m.WithDelayTimeLevel(lv)
		before := nowMs()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r, err := p.SendSync(ctx, m)
		cancel()
		if err != nil {
			return fmt.Errorf("send %s: %v", key, err)
		}
		sends = append(sends, obj("key", key, "level", lv, "send_start_ts", before, "send_done_ts", nowMs(),
			"msg_id", r.MsgID, "offset_msg_id", r.OffsetMsgID, "queue_id_in_result", r.MessageQueue.QueueId,
			"queue_offset_in_result", r.QueueOffset, "stored_commitlog_offset", offsetOfMsgID(r.OffsetMsgID)))
		time.Sleep(300 * time.Millisecond)
	}
	// all delivered, or 15 s after the last send
	waitUntil(time.Now().Add(15*time.Second), 100*time.Millisecond, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= len(levels)
	})
	time.Sleep(500 * time.Millisecond)
	var rows []interface{}
	mu.Lock()
	for _, s := range sends {
		key := s.Get("key").(string)
		if g, ok := got[key]; ok {
			recv := gotTs[key]
			lvl := delayOf(s.Get("level").(int))
			s.Put("delivered", msgInfo(g, recv))
			s.Put("level_delay_ms", lvl)
			s.Put("recv_minus_born_ms", recv-g.BornTimestamp)
			s.Put("requeued_store_minus_born_ms", g.StoreTimestamp-g.BornTimestamp)
			s.Put("recv_minus_send_start_ms", recv-s.Get("send_start_ts").(int64))
			s.Put("recv_minus_requeued_store_ms", recv-g.StoreTimestamp)
		}
		rows = append(rows, s)
	}
	mu.Unlock()
	shutdownBounded("consumer "+group, c.Shutdown)
	shutdownBounded("producer PG_DELAY", p.Shutdown)
	out("scenario", "b_delay", "topic", topic, "messages", rows, "elapsed_ms", time.Since(t0).Milliseconds())
	return nil
}

// offsetOfMsgID: the commitlog offset inside an offset message id (store ip 4 B, port 4 B, offset 8 B, hex).
func offsetOfMsgID(id string) int64 {
	mid, err := primitive.UnmarshalMsgID([]byte(id))
	if err != nil || mid == nil {
		return -1
	}
	return mid.Offset
}
