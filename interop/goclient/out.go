package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// M is a JSON object that keeps its keys in the order they were put (the Java program's LinkedHashMap).
type M struct {
	keys []string
	vals map[string]interface{}
}

func obj(kv ...interface{}) *M {
	m := &M{vals: map[string]interface{}{}}
	for i := 0; i+1 < len(kv); i += 2 {
		m.Put(kv[i].(string), kv[i+1])
	}
	return m
}

func (m *M) Put(k string, v interface{}) *M {
	if _, ok := m.vals[k]; !ok {
		m.keys = append(m.keys, k)
	}
	m.vals[k] = v
	return m
}

func (m *M) Get(k string) interface{} { return m.vals[k] }

func (m *M) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range m.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		vb, err := json.Marshal(m.vals[k])
		if err != nil {
			return nil, err
		}
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

var outMu sync.Mutex

// out prints one JSON line on stdout (the only thing the program writes there).
func out(kv ...interface{}) {
	line, err := json.Marshal(obj(kv...))
	if err != nil {
		line = []byte(fmt.Sprintf(`{"scenario":"error","error":%q}`, err.Error()))
	}
	outMu.Lock()
	defer outMu.Unlock()
	os.Stdout.Write(append(line, '\n'))
}

func nowMs() int64 { return time.Now().UnixNano() / int64(time.Millisecond) }

// sortedProps returns the message's properties (a copy; encoding/json writes map keys sorted).
func sortedProps(m map[string]string) map[string]string {
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

func propKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// msgInfo: what the Go client shows of a received message (same field names as RealScenarios.java's msgInfo).
func msgInfo(m *primitive.MessageExt, recvTs int64) *M {
	qid := -1
	if m.Queue != nil {
		qid = m.Queue.QueueId
	}
	return obj("recv_ts", recvTs, "topic", m.Topic, "queue_id", qid, "queue_offset", m.QueueOffset,
		"commitlog_offset", m.CommitLogOffset, "reconsume_times", m.ReconsumeTimes,
		"born_ts", m.BornTimestamp, "store_ts", m.StoreTimestamp, "msg_id", m.MsgId, "offset_msg_id", m.OffsetMsgId,
		"sys_flag", m.SysFlag, "prepared_txn_offset", m.PreparedTransactionOffset,
		"properties", sortedProps(m.GetProperties()))
}
