#!/bin/bash
# Stop the NameServer started by start.sh (SIGTERM, wait up to 30 s, then SIGKILL).
P=${JAVAPEER_DIR:-${TMPDIR:-/tmp}/namesrv-javapeer}  # what is built and run: outside the repository
PIDFILE=$P/namesrv.pid
[ -f "$PIDFILE" ] || { echo "not running (no $PIDFILE)"; exit 0; }
PID=$(cat "$PIDFILE")
if kill "$PID" 2>/dev/null; then
    i=0
    while kill -0 "$PID" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
    if kill -0 "$PID" 2>/dev/null; then kill -9 "$PID"; echo "killed -9 $PID"; else echo "stopped $PID"; fi
else
    echo "pid $PID not running"
fi
rm -f "$PIDFILE"
