#!/usr/bin/env bash
# restart-broker.sh STOREDIR [-DJVM_PROP=VALUE ...]
#
# Start again ONLY the broker of a fixture made by ../shared/realrmq/start-rmq.sh STOREDIR, on the same store,
# after it died (kill -9): same STOREDIR/broker.conf, same network namespace (STOREDIR/rmq.env), same JVM flags
# (rmq-env.sh); the -D properties given to start-rmq.sh are not saved by it, so pass them again here.
# The name server keeps running. Writes STOREDIR/broker.pid, keeps the old log as logs/broker.out.N, waits for
# "boot success" (RMQ_START_TIMEOUT, default 120 s). This is the --restart-cmd of the interop crash test.
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,9p' "$0"; exit 2; }
REALRMQ="${REALRMQ:-$(cd "$(dirname "$0")/../../.." && pwd)/shared/realrmq}"
. "$REALRMQ/rmq-env.sh"
SD="$(cd "$1" && pwd)"; shift
[ -f "$SD/broker.conf" ] && [ -f "$SD/rmq.env" ] || { echo "$SD is not a start-rmq.sh store dir" >&2; exit 2; }
. "$SD/rmq.env"
# alive = exists and is not a zombie (a kill -9'd broker stays <defunct> until PID 1 reaps it)
alive() { [ -r "/proc/$1/stat" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }
if [ -f "$SD/broker.pid" ]; then
  old=$(cat "$SD/broker.pid"); i=0
  while alive "$old" && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done   # kill -9 is not instantaneous
  if alive "$old"; then echo "broker still running: pid $old" >&2; exit 1; fi
fi
NETX=(); [ "$RMQ_NETNS" != host ] && NETX=(ip netns exec "$RMQ_NETNS")
n=1; while [ -e "$SD/logs/broker.out.$n" ]; do n=$((n + 1)); done
[ -f "$SD/logs/broker.out" ] && mv "$SD/logs/broker.out" "$SD/logs/broker.out.$n"
rm -f "$SD/broker.pid"
COMMON=("${RMQ_JDK17_OPTS[@]}" -Duser.home="$SD/home" -Drocketmq.home.dir="$SD/home"
        -Drocketmq.client.logRoot="$SD/logs" -Djava.net.preferIPv4Stack=true)
setsid sh -c 'echo $$ > "$0"; exec "$@"' "$SD/broker.pid" "${NETX[@]}" env ROCKETMQ_HOME="$SD/home" \
  java -server "${RMQ_SERVER_HEAP[@]}" "${COMMON[@]}" "$@" ${BROKER_JAVA_OPTS:-} \
  -Xlog:gc:file="$SD/logs/broker_gc.log" -cp "$RMQ_CP" org.apache.rocketmq.broker.BrokerStartup -c "$SD/broker.conf" \
  </dev/null >"$SD/logs/broker.out" 2>&1 &
for _ in $(seq 1 50); do [ -s "$SD/broker.pid" ] && break; sleep 0.1; done
BPID=$(cat "$SD/broker.pid")
deadline=$(( $(date +%s) + ${RMQ_START_TIMEOUT:-120} ))
while ! grep -q "boot success" "$SD/logs/broker.out" 2>/dev/null; do
  kill -0 "$BPID" 2>/dev/null || { echo "broker died; see $SD/logs/broker.out" >&2; tail -20 "$SD/logs/broker.out" >&2; exit 1; }
  [ "$(date +%s)" -lt "$deadline" ] || { echo "timeout waiting for broker boot" >&2; exit 1; }
  sleep 0.2
done
echo "BROKER_PID=$BPID"
