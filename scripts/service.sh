#!/usr/bin/env bash
# Start or stop rcubench locally: gunicorn on 127.0.0.1:8000 (as the unprivileged user
# rcubench when started as root), one Celery worker on every queue, Celery beat, a local
# mail sink (aiosmtpd on 127.0.0.1:8025, every message a file in var/mail/new/) where the
# alerts go unless EMAIL_HOST names another server, and the LMTP listener that takes mail
# commands (127.0.0.1:8024, RCUBENCH_INBOUND_LMTP). `up` is idempotent (running parts are
# left alone) and waits for /healthz; `down` stops what `up` started. A list after up/down
# (web, worker, beat, mail, inbound) acts on those parts only.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BIN=$ROOT/.venv/bin
VAR=${RCUBENCH_VAR_DIR:-$ROOT/var}
RUN=$VAR/run
LOG=$VAR/log
ADDR=${RCUBENCH_BIND:-127.0.0.1:8000}
WEB_USER=${RCUBENCH_WEB_USER:-rcubench}
mkdir -p "$RUN/web" "$LOG"

# gunicorn writes its pid file through a temporary file in the same directory: web's has a
# directory of its own, owned by the web user, who can touch nothing of worker and beat.
pidfile() { if [ "$1" = web ]; then echo "$RUN/web/web.pid"; else echo "$RUN/$1.pid"; fi; }
# An earlier version of this script kept web's pid file in $RUN itself.
if [ -f "$RUN/web.pid" ]; then mv "$RUN/web.pid" "$(pidfile web)"; fi
alive() { [ -f "$(pidfile "$1")" ] && kill -0 "$(cat "$(pidfile "$1")")" 2>/dev/null; }
wants() { [[ " $PARTS " == *" $1 "* ]]; }
uid_of() { ps -o uid= -p "$1" | tr -d ' '; }

start() {
  local name=$1
  shift
  if alive "$name"; then
    echo "$name: already running (pid $(cat "$(pidfile "$name")"))"
  else
    "$@"
    echo "$name: started"
  fi
}

ensure_admin() {
  # A superuser for /admin/; its generated password is kept in var/admin-password (0600).
  local pwfile=$VAR/admin-password
  if "$BIN/python" manage.py shell --no-imports -c \
    'import sys; from django.contrib.auth.models import User; sys.exit(0 if User.objects.filter(username="admin").exists() else 1)'; then
    return
  fi
  # Only the password file is private: a umask set here would reach the worker, whose
  # build slots must stay readable by the unprivileged build user.
  (umask 077 && "$BIN/python" -c 'import secrets; print(secrets.token_urlsafe(18))' >"$pwfile")
  DJANGO_SUPERUSER_PASSWORD=$(cat "$pwfile") "$BIN/python" manage.py createsuperuser \
    --noinput --username admin --email admin@localhost >/dev/null
  echo "admin: created superuser 'admin' (password in $pwfile)"
}

# The mail sink runs where the alerts are sent to this machine (EMAIL_HOST 127.0.0.1, the
# default, at EMAIL_PORT, default 8025: the environment, else .env); an EMAIL_HOST naming
# another server is a real one, and no sink starts.
env_value() { sed -n "s/^$1=//p" "$ROOT/.env" 2>/dev/null | tail -1; }
MAIL_HOST=${EMAIL_HOST:-$(env_value EMAIL_HOST)}
MAIL_PORT=${EMAIL_PORT:-$(env_value EMAIL_PORT)}
MAIL_PORT=${MAIL_PORT:-8025}
local_mail() { [ "${MAIL_HOST:-127.0.0.1}" = 127.0.0.1 ]; }
start_mail_sink() {
  mkdir -p "$VAR/mail/tmp" "$VAR/mail/new" "$VAR/mail/cur"  # a Maildir
  nohup "$BIN/python" -m aiosmtpd -n -l "127.0.0.1:$MAIL_PORT" -c aiosmtpd.handlers.Mailbox \
    "$VAR/mail" >>"$LOG/mail.log" 2>&1 </dev/null &
  echo $! >"$(pidfile mail)"
}

# Mail commands: the site's MTA hands replies to rcubench's address to this LMTP listener
# (webapp/alerts/listener.py), which stores them for the control worker to read.
start_inbound() {
  RCUBENCH_LOG_FILE=$LOG/inbound.log nohup "$BIN/python" manage.py mail_listener \
    >>"$LOG/inbound.log" 2>&1 </dev/null &
  echo $! >"$(pidfile inbound)"
}

# The web server never runs as root: started as root, it drops to $WEB_USER (created by
# scripts/setup.sh), which reads the code and the env file (group-readable) and reaches
# PostgreSQL and Redis over TCP; the web app reads nothing under the data dir.
as_web_user() {
  if [ "$(id -u)" -ne 0 ]; then
    "$@"
    return
  fi
  local drop=(setpriv --reuid="$WEB_USER" --regid="$WEB_USER" --init-groups --)
  getent passwd "$WEB_USER" >/dev/null || { echo "web: no user $WEB_USER: run scripts/setup.sh" >&2; exit 1; }
  local env_file=${RCUBENCH_ENV_FILE:-$ROOT/.env}
  if [ -e "$env_file" ] && ! "${drop[@]}" test -r "$env_file"; then
    echo "web: $WEB_USER cannot read $env_file: run scripts/setup.sh" >&2
    exit 1
  fi
  install -d -o "$WEB_USER" -g "$WEB_USER" -m 0755 "$RUN/web"
  install -d -m 0755 "$VAR/cache"
  install -d -o "$WEB_USER" -g "$WEB_USER" -m 0700 "$VAR/cache/reports"
  local log
  for log in "$LOG/web.log" "$LOG/gunicorn.log" "$LOG/web-access.log"; do
    [ -e "$log" ] || install -m 0640 /dev/null "$log"
    chown "$WEB_USER:$WEB_USER" "$log"
  done
  "${drop[@]}" "$@"
}

up() {
  ensure_admin
  if wants web; then
    # A gunicorn started as root by an earlier version of this script is replaced.
    if [ "$(id -u)" -eq 0 ] && alive web && [ "$(uid_of "$(cat "$(pidfile web)")")" = 0 ]; then
      stop web
    fi
    # The app's JSON lines go to web.log (RCUBENCH_LOG_FILE), gunicorn's own to gunicorn.log.
    # Figures of done comparisons are cached as files the web user owns (settings.py).
    RCUBENCH_REPORT_CACHE_DIR=$VAR/cache/reports \
      RCUBENCH_LOG_FILE=$LOG/web.log start web as_web_user "$BIN/gunicorn" webapp.wsgi \
      --bind "$ADDR" --workers 2 --daemon --pid "$(pidfile web)" \
      --error-logfile "$LOG/gunicorn.log" --access-logfile "$LOG/web-access.log"
  fi
  if wants worker; then
    # No -Q: the worker consumes every queue the app declares (control, build, analysis, bench.*),
    # and the queue of every enabled target matching RCUBENCH_SERVE (workers/serving.py).
    local logged fresh=1
    logged=$(stat -c %s "$LOG/worker.log" 2>/dev/null || echo 0)
    alive worker && fresh=0
    RCUBENCH_LOG_FILE=$LOG/worker.log start worker "$BIN/celery" -A workers.celery_app worker \
      --detach --umask 022 \
      --concurrency 1 --hostname "local@%h" --pidfile "$(pidfile worker)" --logfile "$LOG/worker.log"
    # Submissions are refused for targets no worker has recorded serving; a worker records
    # them before it says "ready", so a worker started now is waited for (60 s at most).
    for _ in $(seq $((fresh * 120))); do
      tail -c "+$((logged + 1))" "$LOG/worker.log" 2>/dev/null | grep -q 'ready\.' && break
      sleep 0.5
    done
  fi
  if wants mail && local_mail; then
    # A debugging SMTP server for this machine: the alerts' real messages, one file each
    # (a Maildir: var/mail/new/), readable with `mutt -f var/mail`.
    start mail start_mail_sink
  fi
  if wants inbound; then
    start inbound start_inbound
  fi
  if wants beat; then
    RCUBENCH_LOG_FILE=$LOG/beat.log start beat "$BIN/celery" -A workers.celery_app beat --detach \
      --schedule "$RUN/celerybeat-schedule" --pidfile "$(pidfile beat)" --logfile "$LOG/beat.log"
  fi
  wants web || return 0

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
  admin    http://$ADDR/admin/      (user admin, password in $VAR/admin-password)
  health   http://$ADDR/healthz     $health
  logs     $LOG/{web,worker,beat,mail,inbound}.log
  mail     $VAR/mail/new/   (the alerts, when EMAIL_HOST is this machine: mutt -f $VAR/mail)
  commands LMTP ${RCUBENCH_INBOUND_LMTP:-127.0.0.1:8024}   (replies with #rcubench lines, from the MTA)
  stop     make down
EOF
}

stop() {
  local name=$1 pid
  if ! alive "$name"; then
    echo "$name: not running"
    rm -f "$(pidfile "$name")"
    return
  fi
  pid=$(cat "$(pidfile "$name")")
  # The web user can write its pid file: signal only its own process, or a gunicorn of this
  # checkout (one started as root by an earlier version of this script).
  if [ "$name" = web ] && [ "$(uid_of "$pid")" != "$(id -u "$WEB_USER" 2>/dev/null)" ] \
      && ! tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "$BIN/gunicorn "; then
    echo "web: pid $pid in $(pidfile web) is not rcubench's gunicorn; not stopped" >&2
    return 1
  fi
  kill -TERM "$pid"
  for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid"; fi
  echo "$name: stopped"
  rm -f "$(pidfile "$name")"
}

down() {
  local name
  for name in inbound mail beat worker web; do
    if wants "$name"; then stop "$name"; fi
  done
}

command=${1:-}
shift || true
PARTS=${*:-web worker beat mail inbound}
for part in $PARTS; do
  case "$part" in web | worker | beat | mail | inbound) ;; *) echo "$0: unknown part $part" >&2; exit 2 ;; esac
done
case "$command" in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down [web] [worker] [beat] [mail] [inbound]" >&2; exit 2 ;;
esac
