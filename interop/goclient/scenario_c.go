package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

type txnListener struct {
	mu     sync.Mutex
	checks []*primitive.MessageExt
	recv   []int64
	exec   map[string]int64
}

func (l *txnListener) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	l.mu.Lock()
	l.exec[m.GetTags()] = nowMs()
	l.mu.Unlock()
	switch m.GetTags() {
	case "commit":
		return primitive.CommitMessageState
	case "rollback":
		return primitive.RollbackMessageState
	default:
		return primitive.UnknowState
	}
}

func (l *txnListener) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	now := nowMs()
	l.mu.Lock()
	l.checks = append(l.checks, m)
	l.recv = append(l.recv, now)
	l.mu.Unlock()
	return primitive.UnknowState
}

func stateName(s primitive.LocalTransactionState) string {
	switch s {
	case primitive.CommitMessageState:
		return "COMMIT_MESSAGE"
	case primitive.RollbackMessageState:
		return "ROLLBACK_MESSAGE"
	case primitive.UnknowState:
		return "UNKNOW"
	}
	return strconv.Itoa(int(s))
}

// (c) transactions: three half messages answered COMMIT, ROLLBACK and UNKNOWN by the local transaction;
// UNKNOWN is checked by the broker (transactionTimeOut 2000, every transactionCheckInterval 3000) and
// answered UNKNOWN each time until transactionCheckMax (3), then discarded to TRANS_CHECK_MAX_TIME_TOPIC.
//
// The broker sends CHECK_TRANSACTION_STATE only to a connection that heartbeated the producer group. The Go
// producer heartbeats 1 s after its start and then every 30 s, to the brokers it knows from routes, and a
// producer knows none before its first send: so the transaction producer and the consumer share one client
// instance ("scnC", the Java program does the same), the producer created first (the client's check
// handler belongs to the producer that created it), and the consumer's Start() fetches the routes and
// heartbeats both groups before the first half is sent.
func scenarioC() error {
	t0 := time.Now()
	topic, group, pgroup := "GS_TXN_"+tag, "G_TXN_"+tag, "PG_TXN_"+tag
	if err := createTopic(topic, 1); err != nil {
		return err
	}
	if err := createGroup(brokerAddr, group, 16); err != nil {
		return err
	}
	l := &txnListener{exec: map[string]int64{}}
	tp, err := producer.NewTransactionProducer(l, producer.WithGroupName(pgroup), producer.WithNameServer(nsAddr()),
		producer.WithInstanceName("scnC"), producer.WithRetry(0))
	if err != nil {
		return err
	}
	if err := tp.Start(); err != nil {
		return err
	}
	var cmu sync.Mutex
	var consumed []*primitive.MessageExt
	var consumedTs []int64
	c, err := consumer.NewPushConsumer(consumer.WithGroupName(group), consumer.WithNameServer(nsAddr()),
		consumer.WithInstance("scnC"), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	if err != nil {
		return err
	}
	err = c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"},
		func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			now := nowMs()
			cmu.Lock()
			defer cmu.Unlock()
			for _, m := range msgs {
				consumed = append(consumed, m)
				consumedTs = append(consumedTs, now)
			}
			return consumer.ConsumeSuccess, nil
		})
	if err != nil {
		return err
	}
	if err := c.Start(); err != nil {
		return err
	}
	sends := obj()
	var unknownBorn, unknownDone int64
	for _, t := range []string{"unknown", "commit", "rollback"} {
		m := primitive.NewMessage(topic, []byte("txn "+t))
		m.WithTag(t)
		m.WithKeys([]string{"tx-" + t})
		before := nowMs()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r, err := tp.SendMessageInTransaction(ctx, m)
		cancel()
		if err != nil {
			return fmt.Errorf("half %s: %v", t, err)
		}
		done := nowMs()
		if t == "unknown" {
			unknownDone = done
		}
		sends.Put(t, obj("send_start_ts", before, "send_done_ts", done, "local_state", stateName(r.State),
			"msg_id", r.MsgID, "offset_msg_id", r.OffsetMsgID, "transaction_id", r.TransactionID,
			"half_queue_offset", r.QueueOffset, "half_commitlog_offset", offsetOfMsgID(r.OffsetMsgID)))
		time.Sleep(200 * time.Millisecond)
	}
	checkInterval, err := strconv.ParseInt(brokerCfg["transactionCheckInterval"], 10, 64)
	if err != nil {
		checkInterval = 60000
	}
	// stop once 3 intervals passed without a new check (after at least one); 58 s at most
	end := t0.Add(58 * time.Second)
	for time.Now().Before(end) {
		l.mu.Lock()
		n := len(l.checks)
		last := unknownDone
		if n > 0 {
			last = l.recv[n-1]
		}
		l.mu.Unlock()
		if n > 0 && nowMs()-last > 3*checkInterval+500 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	var checkRows []interface{}
	l.mu.Lock()
	for i, ck := range l.checks {
		if i == 0 {
			unknownBorn = ck.BornTimestamp
		}
		row := obj("tags", ck.GetTags(), "recv_ts", l.recv[i],
			"since_half_born_ms", l.recv[i]-ck.BornTimestamp, "since_send_done_ms", l.recv[i]-unknownDone,
			"TRANSACTION_CHECK_TIMES", ck.GetProperty("TRANSACTION_CHECK_TIMES"),
			"queue_offset_in_half_queue", ck.QueueOffset, "commitlog_offset", ck.CommitLogOffset,
			"store_ts_in_check", ck.StoreTimestamp, "born_ts", ck.BornTimestamp, "topic", ck.Topic,
			"transaction_id", ck.TransactionId, "msg_id", ck.MsgId, "properties", sortedProps(ck.GetProperties()))
		checkRows = append(checkRows, row)
	}
	l.mu.Unlock()
	// discarded half messages go to TRANS_CHECK_MAX_TIME_TOPIC (read with the Go pull consumer)
	var discarded interface{}
	msgs, err := pullFrom("G_TCMT_"+tag, "scnCtcmt", "TRANS_CHECK_MAX_TIME_TOPIC", 0, 0, 64)
	if err != nil {
		discarded = "error: " + err.Error()
	} else {
		found := []interface{}{}
		for _, m := range msgs {
			if m.GetProperty("REAL_TOPIC") == topic {
				found = append(found, msgInfo(m, nowMs()))
			}
		}
		discarded = found
	}
	time.Sleep(1000 * time.Millisecond)
	vis := []interface{}{}
	cmu.Lock()
	for i, m := range consumed {
		vis = append(vis, obj("tags", m.GetTags(), "recv_ts", consumedTs[i], "store_ts", m.StoreTimestamp,
			"sys_flag", m.SysFlag, "queue_offset", m.QueueOffset, "prepared_txn_offset", m.PreparedTransactionOffset,
			"commitlog_offset", m.CommitLogOffset, "properties", sortedProps(m.GetProperties())))
	}
	cmu.Unlock()
	shutdownBounded("consumer "+group, c.Shutdown)
	shutdownBounded("producer "+pgroup, tp.Shutdown)
	out("scenario", "c_transaction", "topic", topic, "producer_group", pgroup,
		"broker_transactionTimeOut", brokerCfg["transactionTimeOut"],
		"broker_transactionCheckInterval", brokerCfg["transactionCheckInterval"],
		"broker_transactionCheckMax", brokerCfg["transactionCheckMax"],
		"sends", sends, "unknown_half_born_ts", unknownBorn, "checks_of_unknown", checkRows,
		"check_count", len(checkRows), "discarded_in_TRANS_CHECK_MAX_TIME_TOPIC", discarded,
		"visible_to_consumer", vis, "elapsed_ms", time.Since(t0).Milliseconds())
	return nil
}
