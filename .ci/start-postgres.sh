#!/usr/bin/env bash
# Install Debian's PostgreSQL if missing and start a private cluster on 127.0.0.1, writing its
# URL to .ci/.postgres-url. Idempotent: a cluster already running is reused.
set -euo pipefail
cd "$(dirname "$0")/.."
PORT="${PLANNER_PG_PORT:-54329}"
DATA_DIR="${PLANNER_PG_DIR:-/tmp/planner-ci-pg}"
URL="postgresql+psycopg://planner:planner@127.0.0.1:${PORT}/planner_test"

if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq postgresql >/dev/null
fi
PG_BIN="$(dirname "$(ls -d /usr/lib/postgresql/*/bin/initdb | sort -V | tail -n 1)")"
RUN_AS=(runuser -u postgres --)
[ "$(id -u)" = 0 ] || RUN_AS=()

if ! "${RUN_AS[@]}" "$PG_BIN/pg_ctl" -D "$DATA_DIR" status >/dev/null 2>&1; then
  rm -rf "$DATA_DIR"
  mkdir -p "$DATA_DIR"
  [ "$(id -u)" = 0 ] && chown postgres:postgres "$DATA_DIR"
  "${RUN_AS[@]}" "$PG_BIN/initdb" -D "$DATA_DIR" -U postgres --auth=trust -E UTF8 >/dev/null
  "${RUN_AS[@]}" "$PG_BIN/pg_ctl" -D "$DATA_DIR" -l "$DATA_DIR/server.log" -w \
    -o "-c listen_addresses=127.0.0.1 -p $PORT -k $DATA_DIR -c fsync=off" start >/dev/null
  "${RUN_AS[@]}" "$PG_BIN/psql" -h 127.0.0.1 -p "$PORT" -U postgres -q \
    -c "CREATE ROLE planner LOGIN PASSWORD 'planner'" \
    -c "CREATE DATABASE planner_test OWNER planner"
fi
echo "$URL" > .ci/.postgres-url
