#!/usr/bin/env bash
# Start or stop rcubench locally: gunicorn on 127.0.0.1:8000, one Celery worker on every
# queue, Celery beat. `up` is idempotent (running parts are left alone) and waits for
# /healthz; `down` stops what `up` started.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BIN=$ROOT/.venv/bin
RUN=$ROOT/var/run
LOG=$ROOT/var/log
ADDR=${RCUBENCH_BIND:-127.0.0.1:8000}
mkdir -p "$RUN" "$LOG"

alive() { [ -f "$RUN/$1.pid" ] && kill -0 "$(cat "$RUN/$1.pid")" 2>/dev/null; }

start() {
  local name=$1
  shift
  if alive "$name"; then
    echo "$name: already running (pid $(cat "$RUN/$name.pid"))"
  else
    "$@"
    echo "$name: started"
  fi
}

ensure_admin() {
  # A superuser for /admin/; its generated password is kept in var/admin-password (0600).
  local pwfile=$ROOT/var/admin-password
  if "$BIN/python" manage.py shell --no-imports -c \
    'import sys; from django.contrib.auth.models import User; sys.exit(0 if User.objects.filter(username="admin").exists() else 1)'; then
    return
  fi
  # Only the password file is private: a umask set here would reach the worker, whose
  # build slots must stay readable by the unprivileged build user.
  (umask 077 && "$BIN/python" -c 'import secrets; print(secrets.token_urlsafe(18))' >"$pwfile")
  DJANGO_SUPERUSER_PASSWORD=$(cat "$pwfile") "$BIN/python" manage.py createsuperuser \
    --noinput --username admin --email admin@localhost >/dev/null
  echo "admin: created superuser 'admin' (password in var/admin-password)"
}

up() {
  ensure_admin
  start web "$BIN/gunicorn" webapp.wsgi --bind "$ADDR" --workers 2 --daemon \
    --pid "$RUN/web.pid" --error-logfile "$LOG/web.log" --access-logfile "$LOG/web-access.log"
  # No -Q: the worker consumes every queue the app declares (control, build, analysis, bench.*).
  start worker "$BIN/celery" -A workers.celery_app worker --detach --umask 022 --concurrency 1 \
    --hostname "local@%h" --pidfile "$RUN/worker.pid" --logfile "$LOG/worker.log"
  start beat "$BIN/celery" -A workers.celery_app beat --detach \
    --schedule "$RUN/celerybeat-schedule" --pidfile "$RUN/beat.pid" --logfile "$LOG/beat.log"

  local health=""
  for _ in $(seq 60); do
    health=$(curl -fsS "http://$ADDR/healthz" 2>/dev/null) && break
    sleep 0.5
  done
  if [ -z "$health" ]; then
    echo "rcubench: /healthz did not answer ok; see $LOG/web.log" >&2
    curl -sS "http://$ADDR/healthz" >&2 || true
    exit 1
  fi
  cat <<EOF

rcubench is up.
  admin    http://$ADDR/admin/      (user admin, password in var/admin-password)
  health   http://$ADDR/healthz     $health
  logs     $LOG/{web,worker,beat}.log
  stop     make down
EOF
}

down() {
  for name in beat worker web; do
    if alive "$name"; then
      local pid
      pid=$(cat "$RUN/$name.pid")
      kill -TERM "$pid"
      for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
      kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
      echo "$name: stopped"
    else
      echo "$name: not running"
    fi
    rm -f "$RUN/$name.pid"
  done
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
