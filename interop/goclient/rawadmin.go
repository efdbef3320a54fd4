package main

// Three admin requests the Go client's admin package does not offer, sent as RocketMQ remoting frames
// (JSON header): GET_BROKER_CLUSTER_INFO (106, name server) to find the broker, GET_BROKER_CONFIG (26) to
// read its timing (the setup line, like RealScenarios.java's admin.getBrokerConfig), and
// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200) to create the consumer groups as the Java program does.
// Setup only: every scenario step goes through the Go client.

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"time"
)

type rawHeader struct {
	Code      int               `json:"code"`
	Language  string            `json:"language"`
	Version   int               `json:"version"`
	Opaque    int               `json:"opaque"`
	Flag      int               `json:"flag"`
	Remark    string            `json:"remark,omitempty"`
	ExtFields map[string]string `json:"extFields"`
}

var rawOpaque = 1

func rawInvoke(addr string, code int, ext map[string]string, body []byte) (*rawHeader, []byte, error) {
	conn, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if ext == nil {
		ext = map[string]string{}
	}
	rawOpaque++
	h, _ := json.Marshal(rawHeader{Code: code, Language: "GO", Version: 317, Opaque: rawOpaque, ExtFields: ext})
	frame := make([]byte, 8, 8+len(h)+len(body))
	binary.BigEndian.PutUint32(frame[0:4], uint32(4+len(h)+len(body)))
	binary.BigEndian.PutUint32(frame[4:8], uint32(len(h))) // serialize type 0 = JSON
	frame = append(append(frame, h...), body...)
	if _, err := conn.Write(frame); err != nil {
		return nil, nil, err
	}
	var lenBuf [4]byte
	if _, err := io.ReadFull(conn, lenBuf[:]); err != nil {
		return nil, nil, err
	}
	rest := make([]byte, binary.BigEndian.Uint32(lenBuf[:]))
	if _, err := io.ReadFull(conn, rest); err != nil {
		return nil, nil, err
	}
	mark := binary.BigEndian.Uint32(rest[0:4])
	if mark>>24 != 0 {
		return nil, nil, fmt.Errorf("response serialize type %d, want JSON", mark>>24)
	}
	hlen := mark & 0xFFFFFF
	var resp rawHeader
	if err := json.Unmarshal(rest[4:4+hlen], &resp); err != nil {
		return nil, nil, fmt.Errorf("response header: %v", err)
	}
	return &resp, rest[4+hlen:], nil
}

var bareIntKey = regexp.MustCompile(`([{,])(-?\d+):`)

// clusterBroker: the first broker's name and master address (GET_BROKER_CLUSTER_INFO answers with bare
// integer keys, fastjson style; they are quoted before parsing).
func clusterBroker(namesrv string) (string, string, error) {
	resp, body, err := rawInvoke(namesrv, 106, nil, nil)
	if err != nil {
		return "", "", err
	}
	if resp.Code != 0 {
		return "", "", fmt.Errorf("GET_BROKER_CLUSTER_INFO: code %d %s", resp.Code, resp.Remark)
	}
	var info struct {
		BrokerAddrTable map[string]struct {
			BrokerAddrs map[string]string `json:"brokerAddrs"`
		} `json:"brokerAddrTable"`
	}
	if err := json.Unmarshal([]byte(bareIntKey.ReplaceAllString(string(body), `$1"$2":`)), &info); err != nil {
		return "", "", fmt.Errorf("cluster info body: %v", err)
	}
	for name, bd := range info.BrokerAddrTable {
		if addr, ok := bd.BrokerAddrs["0"]; ok {
			return name, addr, nil
		}
	}
	return "", "", fmt.Errorf("no master broker in %s", string(body))
}

func brokerConfig(broker string) (map[string]string, error) {
	resp, body, err := rawInvoke(broker, 26, nil, nil)
	if err != nil {
		return nil, err
	}
	if resp.Code != 0 {
		return nil, fmt.Errorf("GET_BROKER_CONFIG: code %d %s", resp.Code, resp.Remark)
	}
	cfg := map[string]string{}
	for _, line := range strings.Split(string(body), "\n") {
		if i := strings.Index(line, "="); i > 0 {
			cfg[strings.TrimSpace(line[:i])] = strings.TrimSpace(line[i+1:])
		}
	}
	return cfg, nil
}

func createGroup(broker, group string, retryMaxTimes int) error {
	body, _ := json.Marshal(map[string]interface{}{
		"brokerId": 0, "consumeBroadcastEnable": true, "consumeEnable": true, "consumeFromMinEnable": true,
		"groupName": group, "notifyConsumerIdsChangedEnable": true, "retryMaxTimes": retryMaxTimes,
		"retryQueueNums": 1, "whichBrokerWhenConsumeSlowly": 1,
	})
	resp, _, err := rawInvoke(broker, 200, nil, body)
	if err != nil {
		return err
	}
	if resp.Code != 0 {
		return fmt.Errorf("UPDATE_AND_CREATE_SUBSCRIPTIONGROUP %s: code %d %s", group, resp.Code, resp.Remark)
	}
	return nil
}
