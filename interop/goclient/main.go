// rmqspec-go-scenarios: the scenario program of the interop tier written with the Apache RocketMQ Go client
// (github.com/apache/rocketmq-client-go/v2), the counterpart of the Java RealScenarios program.
//
//	rmqspec-go-scenarios NAMESRV [a] [b] [c] [d]     (default: all four)
//
// Runs against a name server + broker (real RocketMQ 4.9.8 or `rmqspec serve`) started with shortened
// timing (messageDelayLevel=1s 2s ... 18s, transactionTimeOut=2000, transactionCheckInterval=3000,
// transactionCheckMax=3, broker lockMaxLiveTime 5000) and prints one JSON line per scenario on stdout:
// setup, a_retry_dlq, b_delay, c_transaction, d_lock, done. The Go client's own log goes to stderr
// (RMQSPEC_GO_LOG=FILE sends it to a file; RMQSPEC_GO_LOG_LEVEL=debug|info|warn|error, default warn).
// Every wait is bounded; the program exits by itself (a watchdog ends it after RMQSPEC_GO_DEADLINE_S,
// default 300 s). Exit code 0, or 1 when a scenario failed (its line carries "error").
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

var (
	ns         string
	brokerAddr string
	brokerName string
	brokerCfg  map[string]string
	levelMs    []int64
	// six digits always: topic and group names have the same length in every run, so the records (and the
	// commitlog offsets after them) of two runs on fresh brokers can be compared byte for byte
	tag = fmt.Sprintf("%06d", time.Now().UnixNano()/int64(time.Millisecond)%1000000)
	adm admin.Admin
)

func nsAddr() primitive.NamesrvAddr { return primitive.NamesrvAddr{ns} }

func delayOf(level int) int64 {
	if level >= 1 && level <= len(levelMs) {
		return levelMs[level-1]
	}
	return -1
}

func parseLevels(s string) []int64 {
	var out []int64
	for _, f := range strings.Fields(s) {
		unit := f[len(f)-1]
		n, err := strconv.ParseInt(f[:len(f)-1], 10, 64)
		if err != nil {
			continue
		}
		mult := map[byte]int64{'s': 1000, 'm': 60000, 'h': 3600000, 'd': 86400000}[unit]
		out = append(out, n*mult)
	}
	return out
}

// createTopic: UPDATE_AND_CREATE_TOPIC through the Go client's admin package, then wait (15 s at most)
// until the name server has the route, as RealScenarios.createTopic does.
func createTopic(topic string, queues int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := adm.CreateTopic(ctx, admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(brokerAddr),
		admin.WithReadQueueNums(queues), admin.WithWriteQueueNums(queues), admin.WithPerm(6))
	if err != nil {
		return fmt.Errorf("create topic %s: %v", topic, err)
	}
	end := time.Now().Add(15 * time.Second)
	for time.Now().Before(end) {
		qctx, qcancel := context.WithTimeout(context.Background(), 3*time.Second)
		mqs, err := adm.FetchPublishMessageQueues(qctx, topic)
		qcancel()
		if err == nil && len(mqs) > 0 {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("no route for %s", topic)
}

// routeQueues: the queues the name server lists for a topic as writable (admin.FetchPublishMessageQueues);
// -1 when there is no route.
func routeQueues(topic string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	mqs, err := adm.FetchPublishMessageQueues(ctx, topic)
	if err != nil {
		return -1
	}
	return len(mqs)
}

// pullFrom reads up to max messages of one queue from offset with the Go client's pull consumer (a fresh
// group and instance, shut down afterwards); the pull is suspended by the broker when there is nothing,
// so it is bounded by a context timeout.
func pullFrom(group, instance, topic string, queueID int, offset int64, max int) ([]*primitive.MessageExt, error) {
	pc, err := consumer.NewPullConsumer(consumer.WithGroupName(group), consumer.WithNameServer(nsAddr()),
		consumer.WithInstance(instance), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	if err != nil {
		return nil, err
	}
	if err := pc.Subscribe(topic, consumer.MessageSelector{}); err != nil {
		return nil, err
	}
	if err := pc.Start(); err != nil {
		return nil, err
	}
	defer shutdownBounded("pull consumer "+group, pc.Shutdown)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	mq := &primitive.MessageQueue{Topic: topic, BrokerName: brokerName, QueueId: queueID}
	res, err := pc.PullFrom(ctx, mq, offset, max)
	if err != nil {
		return nil, err
	}
	if res.Status != primitive.PullFound {
		return nil, nil
	}
	return res.GetMessageExts(), nil
}

// shutdownBounded: a Go client Shutdown that does not return within 10 s is left behind (logged).
func shutdownBounded(what string, f func() error) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = f()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		fmt.Fprintf(os.Stderr, "rmqspec-go-scenarios: %s did not shut down within 10 s\n", what)
	}
}

func waitUntil(deadline time.Time, step time.Duration, cond func() bool) bool {
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(step)
	}
}

func setupLogging() {
	level := os.Getenv("RMQSPEC_GO_LOG_LEVEL")
	if level == "" {
		level = "warn"
	}
	path := os.Getenv("RMQSPEC_GO_LOG")
	rlog.SetLogger(newStderrLogger(level, path))
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" {
		fmt.Fprintln(os.Stderr, "usage: rmqspec-go-scenarios NAMESRV [a] [b] [c] [d]")
		os.Exit(2)
	}
	setupLogging()
	deadline := 300 * time.Second
	if s, err := strconv.Atoi(os.Getenv("RMQSPEC_GO_DEADLINE_S")); err == nil && s > 0 {
		deadline = time.Duration(s) * time.Second
	}
	go func() {
		time.Sleep(deadline)
		out("scenario", "watchdog", "error", fmt.Sprintf("not done after %s", deadline))
		os.Exit(3)
	}()
	ns = os.Args[1]
	which := map[string]bool{}
	for _, a := range os.Args[2:] {
		which[a] = true
	}
	if len(which) == 0 {
		which = map[string]bool{"a": true, "b": true, "c": true, "d": true}
	}
	var err error
	brokerName, brokerAddr, err = clusterBroker(ns)
	if err == nil {
		brokerCfg, err = brokerConfig(brokerAddr)
	}
	if err == nil {
		adm, err = admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{ns})))
	}
	if err != nil {
		out("scenario", "setup", "namesrv", ns, "error", err.Error())
		os.Exit(1)
	}
	levelMs = parseLevels(brokerCfg["messageDelayLevel"])
	out("scenario", "setup", "client", "rocketmq-client-go/v2 "+clientVersion(), "namesrv", ns,
		"broker", brokerAddr, "broker_name", brokerName, "run_tag", tag,
		"messageDelayLevel", brokerCfg["messageDelayLevel"], "flushDiskType", brokerCfg["flushDiskType"],
		"transactionTimeOut", brokerCfg["transactionTimeOut"],
		"transactionCheckInterval", brokerCfg["transactionCheckInterval"],
		"transactionCheckMax", brokerCfg["transactionCheckMax"])
	t0 := time.Now()
	rc := 0
	for _, s := range []string{"a", "b", "c", "d"} {
		if !which[s] {
			continue
		}
		if err := runScenario(s); err != nil {
			rc = 1
			out("scenario", s, "error", err.Error())
		}
	}
	_ = adm.Close()
	out("scenario", "done", "total_ms", time.Since(t0).Milliseconds())
	os.Exit(rc)
}

func runScenario(s string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	switch s {
	case "a":
		return scenarioA()
	case "b":
		return scenarioB()
	case "c":
		return scenarioC()
	default:
		return scenarioD()
	}
}

// clientID: the id the Go client gives an instance (utils.LocalIP + "@" + instance): the IPv4 address of the
// first non-loopback interface that is up, or nothing at all (in a namespace with only lo, "@lockA"; the
// Java client falls back to 127.0.0.1).
func clientID(instance string) string {
	ip := ""
	if ifaces, err := net.Interfaces(); err == nil {
	search:
		for _, iface := range ifaces {
			if iface.Flags&net.FlagLoopback != 0 || iface.Flags&net.FlagUp == 0 {
				continue
			}
			addrs, err := iface.Addrs()
			if err != nil {
				continue
			}
			for _, addr := range addrs {
				if ipnet, ok := addr.(*net.IPNet); ok && !ipnet.IP.IsLoopback() && ipnet.IP.To4() != nil {
					ip = ipnet.IP.To4().String()
					break search
				}
			}
		}
	}
	return ip + "@" + instance
}

func clientVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/apache/rocketmq-client-go/v2" {
				return d.Version
			}
		}
	}
	return "unknown"
}
