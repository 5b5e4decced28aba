#!/bin/bash
# Start the NameServer built by build.sh on port $JAVAPEER_PORT (19876) in the background.
# Usage: start.sh [HEAP]   (default 1g; e.g. 512m). Pid -> namesrv.pid, stdout/stderr -> namesrv.log.
set -eu
P=${JAVAPEER_DIR:-${TMPDIR:-/tmp}/namesrv-javapeer}  # what is built and run: outside the repository
HEAP=${1:-1g}
PORT=${JAVAPEER_PORT:-19876}
PIDFILE=$P/namesrv.pid LOG=$P/namesrv.log
if [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
    echo "already running: pid $(cat "$PIDFILE")" >&2; exit 1
fi
[ -f "$P/classpath" ] || { echo "not built: run bench/javapeer/build.sh" >&2; exit 1; }
mkdir -p "$P/logs"
printf 'listenPort=%s\n' "$PORT" > "$P/namesrv.properties"
# runserver.sh's JDK 9+ options, heap from $HEAP (young gen left to G1, as runserver.sh does on 9+)
ROCKETMQ_HOME=$P/home nohup java -server -Xms"$HEAP" -Xmx"$HEAP" \
    -XX:MetaspaceSize=128m -XX:MaxMetaspaceSize=320m \
    -XX:+UseG1GC -XX:G1HeapRegionSize=16m -XX:G1ReservePercent=25 -XX:InitiatingHeapOccupancyPercent=30 \
    -XX:SoftRefLRUPolicyMSPerMB=0 \
    -Xlog:gc*:file="$P/logs/rmq_srv_gc_%p_%t.log":time,tags:filecount=5,filesize=30M \
    -XX:-OmitStackTraceInFastThrow -XX:-UseLargePages \
    --add-opens java.base/java.nio=ALL-UNNAMED --add-opens java.base/sun.nio.ch=ALL-UNNAMED \
    --add-opens java.base/java.lang=ALL-UNNAMED --add-opens java.base/java.util=ALL-UNNAMED \
    --add-exports java.base/sun.security.x509=ALL-UNNAMED \
    -Drocketmq.home.dir="$P/home" -Duser.home="$P/home" \
    -cp "$(cat "$P/classpath")" \
    org.apache.rocketmq.namesrv.NamesrvStartup -c "$P/namesrv.properties" > "$LOG" 2>&1 < /dev/null &
PID=$!
echo "$PID" > "$PIDFILE"
i=0
while [ $i -lt 600 ]; do          # up to 60 s
    if ! kill -0 "$PID" 2>/dev/null; then
        echo "NameServer exited during start-up; log tail:" >&2; tail -n 30 "$LOG" >&2; rm -f "$PIDFILE"; exit 1
    fi
    if (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null; then
        echo "NameServer pid $PID listening on $PORT (heap $HEAP)"; exit 0
    fi
    sleep 0.1; i=$((i + 1))
done
echo "port $PORT not open after 60 s; log tail:" >&2; tail -n 30 "$LOG" >&2
kill "$PID" 2>/dev/null || true; rm -f "$PIDFILE"; exit 1
