package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// (d) queue locks for orderly consumption, as far as the Go client shows them. The Go client has no public
// lockBatchMQ/unlockBatchMQ (RealScenarios.java calls MQClientAPIImpl directly); its orderly push consumer
// locks a queue (LOCK_BATCH_MQ) when a rebalance assigns it one, and renews the locks of the queues it holds
// every RebalanceLockInterval (WithRebalanceLockInterval, default 20 s). So the two lock clients here are
// orderly push consumers of one group on one queue:
//   - A ("lockA") renews every 1 s;
//   - B ("lockB") allocates itself every queue (a greedy AllocateStrategy), so each Rebalance() call tries
//     LOCK_BATCH_MQ for the queue until it holds it; whether it holds it shows in GetConsumerRunningInfo.
//
// A stops renewing without unlocking: Unsubscribe + Rebalance drops the queue from A's process queue table,
// and the Go client (unlike the Java one) sends no UNLOCK_BATCH_MQ then. A's last renewal time is the
// process queue's LastConsumeTimestamp, which the Go client sets when a lock renewal succeeds.
type orderly struct {
	name  string
	topic string
	c     interface {
		Start() error
		Shutdown() error
		Rebalance()
		Unsubscribe(string) error
		Subscribe(string, consumer.MessageSelector, func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error)) error
	}
	cb   func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error)
	info func(mq primitive.MessageQueue) (present bool, locked bool, lastLock int64)
}

func greedy(_ string, _ string, mqAll []*primitive.MessageQueue, _ []string) []*primitive.MessageQueue {
	return mqAll
}

func newOrderly(group, instance, topic string, lockInterval time.Duration, grab bool,
	onMsg func(*primitive.MessageExt)) (*orderly, error) {
	opts := []consumer.Option{consumer.WithGroupName(group), consumer.WithNameServer(nsAddr()),
		consumer.WithInstance(instance), consumer.WithConsumerOrder(true),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset)}
	if lockInterval > 0 {
		opts = append(opts, consumer.WithRebalanceLockInterval(lockInterval))
	}
	if grab {
		opts = append(opts, consumer.WithStrategy(greedy))
	}
	c, err := consumer.NewPushConsumer(opts...)
	if err != nil {
		return nil, err
	}
	o := &orderly{name: instance, topic: topic, c: c}
	o.cb = func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			if onMsg != nil {
				onMsg(m)
			}
		}
		return consumer.ConsumeSuccess, nil
	}
	o.info = func(mq primitive.MessageQueue) (bool, bool, int64) {
		pi, ok := c.GetConsumerRunningInfo(false).MQTable[mq]
		return ok, ok && pi.Locked, pi.LastConsumeTimestamp
	}
	if err := c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}, o.cb); err != nil {
		return nil, err
	}
	return o, nil
}

// holds: the queue is in the consumer's process queue table. An orderly consumer adds a queue only after
// LOCK_BATCH_MQ granted it (updateProcessQueueTable); the process queue's own Locked flag is no witness, as
// the Go client creates the process queue after the lock and leaves it unlocked until the next lockAll.
func (o *orderly) holds(mq primitive.MessageQueue) bool {
	present, _, _ := o.info(mq)
	return present
}

func (o *orderly) resubscribe() error {
	return o.c.Subscribe(o.topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}, o.cb)
}

func scenarioD() error {
	t0 := time.Now()
	topic, group, other := "GS_ORDER_"+tag, "G_ORDER_"+tag, "G_OTHER_"+tag
	if err := createTopic(topic, 1); err != nil {
		return err
	}
	for _, g := range []string{group, other} {
		if err := createGroup(brokerAddr, g, 16); err != nil {
			return err
		}
	}
	mq := primitive.MessageQueue{Topic: topic, BrokerName: brokerName, QueueId: 0}
	lockMaxLive := int64(-1)
	if v, err := strconv.ParseInt(os.Getenv("RMQSPEC_LOCK_MAX_LIVE_TIME"), 10, 64); err == nil {
		lockMaxLive = v
	}
	var ev []interface{}
	a, err := newOrderly(group, "lockA", topic, time.Second, false, nil)
	if err != nil {
		return err
	}
	b, err := newOrderly(group, "lockB", topic, 0, true, nil)
	if err != nil {
		return err
	}
	ta := time.Now()
	ms := func() int64 { return time.Since(ta).Milliseconds() }
	if err := a.c.Start(); err != nil {
		return err
	}
	aGot := waitUntil(time.Now().Add(10*time.Second), 20*time.Millisecond, func() bool { return a.holds(mq) })
	ev = append(ev, obj("t_ms", ms(), "who", "lockA", "op", "lock (orderly consumer start, renewal every 1 s)",
		"got", aGot))
	if !aGot {
		shutdownBounded("lockA", a.c.Shutdown)
		return fmt.Errorf("orderly consumer lockA never locked %v", mq)
	}
	if err := b.c.Start(); err != nil {
		return err
	}
	time.Sleep(300 * time.Millisecond) // its own first rebalance (RebalanceImmediately) is done by then
	b.c.Rebalance()
	ev = append(ev, obj("t_ms", ms(), "who", "lockB", "op", "lock (orderly consumer start + rebalance)",
		"got", b.holds(mq)))
	// phase 1: A renews every 1 s (its lock ticker) for 7 s; B tries every 500 ms
	bGotDuringRenew := false
	for time.Since(ta) < 7*time.Second {
		b.c.Rebalance()
		if b.holds(mq) {
			bGotDuringRenew = true
		}
		time.Sleep(500 * time.Millisecond)
	}
	ev = append(ev, obj("t_ms", ms(), "phase", "A renewing every 1s for 7s, B polling every 0.5s",
		"B_ever_got_it", bGotDuringRenew))
	// A stops renewing right after a renewal: Unsubscribe + Rebalance drops the queue, no UNLOCK
	_, _, last0 := a.info(mq)
	renewed := waitUntil(time.Now().Add(2500*time.Millisecond), 5*time.Millisecond, func() bool {
		_, _, l := a.info(mq)
		return l != last0
	})
	_, _, lastRenewA := a.info(mq)
	_ = a.c.Unsubscribe(topic)
	a.c.Rebalance()
	aDropped := !func() bool { p, _, _ := a.info(mq); return p }()
	ev = append(ev, obj("t_ms", ms(), "who", "lockA", "op", "unsubscribe + rebalance right after a renewal",
		"renewal_seen", renewed, "last_renewal_ts", lastRenewA, "queue_dropped", aDropped,
		"ms_since_last_renewal", nowMs()-lastRenewA))
	// phase 2: B polls every 100 ms
	bGot := int64(-1)
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); {
		b.c.Rebalance()
		if b.holds(mq) {
			bGot = nowMs()
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	row := obj("t_ms", ms(), "who", "lockB", "op", "lock (poll 100ms)", "got", bGot > 0)
	if bGot > 0 {
		row.Put("ms_since_A_last_lock", bGot-lastRenewA)
	} else {
		row.Put("ms_since_A_last_lock", nil)
	}
	row.Put("lockMaxLiveTime_ms", lockMaxLive)
	ev = append(ev, row)
	// A subscribes again: its rebalance tries LOCK_BATCH_MQ while B holds the queue
	_ = a.resubscribe()
	a.c.Rebalance()
	ev = append(ev, obj("t_ms", ms(), "who", "lockA", "op", "lock after B took it", "got", a.holds(mq)))
	// B shuts down: the Go client unlocks the queues it holds (UNLOCK_BATCH_MQ) before unregistering
	shutdownBounded("lockB", b.c.Shutdown)
	aAfter := waitUntil(time.Now().Add(1*time.Second), 20*time.Millisecond, func() bool { return a.holds(mq) })
	if !aAfter {
		a.c.Rebalance()
		aAfter = a.holds(mq)
	}
	ev = append(ev, obj("t_ms", ms(), "who", "lockA", "op", "unlock by B (owner, at its shutdown), then lock",
		"got", aAfter))
	// the same queue in another consumer group, from A's client instance
	oc, err := newOrderly(other, "lockA", topic, 0, false, nil)
	if err != nil {
		return err
	}
	if err := oc.c.Start(); err != nil {
		return err
	}
	otherGot := waitUntil(time.Now().Add(3*time.Second), 20*time.Millisecond, func() bool { return oc.holds(mq) })
	ev = append(ev, obj("t_ms", ms(), "who", "lockA", "op", "lock same queue in another group", "got", otherGot))
	shutdownBounded("other group", oc.c.Shutdown)
	shutdownBounded("lockA", a.c.Shutdown)

	// orderly push consumer with the default lock renewal (20 s): consumes in order; a foreign client of
	// the group (greedy, "orderF") is refused the queue, then gets it when the broker lock lapses.
	var mu sync.Mutex
	var order []int64
	o, err := newOrderly(group, "orderC", topic, 0, false, func(m *primitive.MessageExt) {
		mu.Lock()
		order = append(order, m.QueueOffset)
		mu.Unlock()
	})
	if err != nil {
		return err
	}
	ocStart := time.Now()
	if err := o.c.Start(); err != nil {
		return err
	}
	p, err := producer.NewDefaultProducer(producer.WithGroupName("PG_ORDER_"+tag), producer.WithNameServer(nsAddr()),
		producer.WithInstanceName("orderP"), producer.WithRetry(0))
	if err != nil {
		return err
	}
	if err := p.Start(); err != nil {
		return err
	}
	for i := 0; i < 10; i++ {
		m := primitive.NewMessage(topic, []byte(fmt.Sprintf("ord%d", i)))
		m.WithTag("o")
		m.WithKeys([]string{fmt.Sprintf("o%d", i)})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := p.SendSync(ctx, m)
		cancel()
		if err != nil {
			return fmt.Errorf("send o%d: %v", i, err)
		}
	}
	waitUntil(time.Now().Add(15*time.Second), 50*time.Millisecond, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) >= 10
	})
	tFirstForeign := time.Now()
	f, err := newOrderly(group, "orderF", topic, 0, true, nil)
	if err != nil {
		return err
	}
	if err := f.c.Start(); err != nil {
		return err
	}
	time.Sleep(300 * time.Millisecond)
	fWhileConsumerRuns := f.holds(mq)
	lapse := int64(-1)
	for end := time.Now().Add(12 * time.Second); !fWhileConsumerRuns && time.Now().Before(end); {
		f.c.Rebalance()
		if f.holds(mq) {
			lapse = nowMs()
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	mu.Lock()
	consumed := append([]int64(nil), order...)
	mu.Unlock()
	inOrder := true
	for i := 1; i < len(consumed); i++ {
		if consumed[i] < consumed[i-1] {
			inOrder = false
		}
	}
	shutdownBounded("orderF", f.c.Shutdown)
	shutdownBounded("orderC", o.c.Shutdown)
	shutdownBounded("orderP", p.Shutdown)
	var lapseMs interface{}
	if lapse > 0 {
		lapseMs = lapse - ocStart.UnixNano()/int64(time.Millisecond)
	}
	out("scenario", "d_lock", "topic", topic, "group", group, "client_a", clientID("lockA"), "client_b", clientID("lockB"),
		"events", ev,
		"orderly_consumer", obj("client_id", clientID("orderC"), "consumed_offsets", consumed, "in_order", inOrder,
			"foreign_lock_right_after_consuming_got", fWhileConsumerRuns,
			"foreign_lock_got_after_ms_since_consumer_start", lapseMs,
			"foreign_poll_started_ms_since_consumer_start", tFirstForeign.Sub(ocStart).Milliseconds(),
			"client_lock_renew_interval_ms", 20000, "foreign_client_id", clientID("orderF")),
		"elapsed_ms", time.Since(t0).Milliseconds())
	return nil
}
