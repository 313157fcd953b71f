# Functions of scripts/setup.sh (sourced by it), in a file of their own so that tests call
# them against services of their own (tests/deploy/test_setup_services.py: a throwaway
# PostgreSQL cluster and Redis server, a temporary secrets file) and never the machine's.
# Sourcing it sets nothing up. The caller sets ENV_FILE, PYTHON and, for the services,
# PG_ROLE, PG_DB, PG_PORT, REDIS_PORT.

changed=0
did() { echo "setup: did $*"; changed=$((changed + 1)); }
ok() { echo "setup: ok   $*"; }
die() { echo "setup: error: $*" >&2; exit 1; }
warn() { echo "setup: warn $*" >&2; }

if [ "$(id -u)" -eq 0 ]; then SUDO=(); else SUDO=(sudo -n); fi
as_root() { "${SUDO[@]}" "$@"; }

# KEY's value in FILE (empty when absent, or when FILE is); quotes around it are dropped.
kv_get() {  # FILE KEY
  local value
  value=$(as_root sed -n "s/^$2=//p" "$1" 2>/dev/null | tail -n 1) || true
  value=${value%\"}; value=${value#\"}
  echo "$value"
}
# Add or replace KEY=VALUE in FILE in place, keeping its owner and mode (values are checked
# to be URL-safe, so they need no quoting).
kv_set() {  # FILE KEY VALUE
  local content
  content=$(as_root awk -v k="$2" -v v="$3" -F= \
    '$1 == k { if (!done) print k "=" v; done = 1; next } { print } END { if (!done) print k "=" v }' \
    "$1")
  printf '%s\n' "$content" | as_root tee "$1" >/dev/null
}
env_get() { kv_get "$ENV_FILE" "$1"; }
env_set() { kv_set "$ENV_FILE" "$1" "$2"; }

# Passwords go into URLs (DATABASE_URL, CELERY_BROKER_URL) and SQL string literals: URL
# unreserved characters only.
url_safe() { [[ "$1" =~ ^[A-Za-z0-9._~-]+$ ]]; }
new_secret() { "$PYTHON" -c "import secrets; print(secrets.token_urlsafe(${1:-24}))"; }  # [BYTES]

# --- The machine's passwords ---------------------------------------------------------------
# Every checkout on a machine (developers' worktrees, CI's fresh clone running `make test`)
# reaches the same PostgreSQL and Redis. Passwords made per checkout would change them under
# every other checkout's env file, so they are made once per machine, into a root-only file,
# and each checkout's env file gets a copy.
MACHINE_SECRETS=${RCUBENCH_MACHINE_SECRETS:-/etc/rcubench/secrets.env}

# Make the machine's secrets file unless it exists: RCUBENCH_DB_PASSWORD and
# RCUBENCH_REDIS_PASSWORD, each the seed given (a password chosen before this file existed)
# or a new random one. Made whole under a temporary name and hard-linked into place, which
# never replaces a file: two checkouts set up at once agree on the one that got there first.
ensure_machine_secrets() {  # DB_SEED REDIS_SEED (empty: a new random value)
  local dir tmp key
  dir=$(dirname "$MACHINE_SECRETS")
  if ! as_root test -f "$MACHINE_SECRETS"; then
    as_root test -d "$dir" || as_root mkdir -p -m 0700 "$dir"
    tmp=$(as_root mktemp "$dir/.secrets.XXXXXX")  # 0600
    printf '%s\n' "# This machine's rcubench service passwords (scripts/setup.sh copies them" \
      "# into each checkout's .env; change one here, then run setup.sh in every checkout)." \
      "RCUBENCH_DB_PASSWORD=${1:-$(new_secret)}" "RCUBENCH_REDIS_PASSWORD=${2:-$(new_secret)}" \
      | as_root tee "$tmp" >/dev/null
    if as_root ln "$tmp" "$MACHINE_SECRETS" 2>/dev/null; then
      did "make this machine's PostgreSQL and Redis passwords: $MACHINE_SECRETS (root only)"
    fi
    as_root rm -f "$tmp"
  fi
  for key in RCUBENCH_DB_PASSWORD RCUBENCH_REDIS_PASSWORD; do
    if [ -z "$(kv_get "$MACHINE_SECRETS" "$key")" ]; then
      kv_set "$MACHINE_SECRETS" "$key" "$(new_secret)"
      did "add $key to $MACHINE_SECRETS"
    fi
    url_safe "$(kv_get "$MACHINE_SECRETS" "$key")" \
      || die "$key in $MACHINE_SECRETS may only use letters, digits and . _ ~ - (it goes into a URL)"
  done
  if [ "$(as_root stat -c %U:%a "$MACHINE_SECRETS")" != root:600 ]; then
    as_root chown root: "$MACHINE_SECRETS" && as_root chmod 0600 "$MACHINE_SECRETS"
    did "restrict $MACHINE_SECRETS to root (0600)"
  fi
}

# PG_PASSWORD: this machine's. REDIS_PASSWORD: RCUBENCH_REDIS_PASSWORD when given (even
# empty: none; a Redis of one's own on RCUBENCH_REDIS_PORT), else this checkout's env
# file's, else this machine's. The database's is always the machine's because setup.sh sets
# it on the role: a stale copy in one checkout must not change it under the others. Redis's
# is only ever checked, never changed once Redis has one (ensure_redis), so a checkout's
# own copy may come first. Seeds for a machine set up before the secrets file existed: a
# database password given in the environment, and the Redis password this checkout's env
# file carries (Redis has it already).
choose_passwords() {
  ensure_machine_secrets "${RCUBENCH_DB_PASSWORD:-}" "$(env_get RCUBENCH_REDIS_PASSWORD)"
  PG_PASSWORD=$(kv_get "$MACHINE_SECRETS" RCUBENCH_DB_PASSWORD)
  if [ -n "${RCUBENCH_DB_PASSWORD:-}" ] && [ "$RCUBENCH_DB_PASSWORD" != "$PG_PASSWORD" ]; then
    die "RCUBENCH_DB_PASSWORD differs from this machine's ($MACHINE_SECRETS), which the other checkouts use: change it there, then run setup.sh in each checkout"
  fi
  if [ -n "${RCUBENCH_REDIS_PASSWORD+set}" ]; then
    REDIS_PASSWORD=$RCUBENCH_REDIS_PASSWORD
  else
    REDIS_PASSWORD=$(env_get RCUBENCH_REDIS_PASSWORD)
    REDIS_PASSWORD=${REDIS_PASSWORD:-$(kv_get "$MACHINE_SECRETS" RCUBENCH_REDIS_PASSWORD)}
  fi
  [ -z "$REDIS_PASSWORD" ] || url_safe "$REDIS_PASSWORD" \
    || die "RCUBENCH_REDIS_PASSWORD may only use letters, digits and . _ ~ - (it goes into a URL)"
}

# --- PostgreSQL: the role signs in with its password ------------------------------------
psql_admin() { as_root runuser -u postgres -- psql -p "$PG_PORT" -v ON_ERROR_STOP=1 -qtAX "$@"; }
# Whether PG_ROLE signs in over TCP with PASSWORD (never a ~/.pgpass of the caller's).
pg_login() {  # PASSWORD
  PGPASSWORD=$1 PGPASSFILE=/dev/null PGCONNECT_TIMEOUT=5 psql -h 127.0.0.1 -p "$PG_PORT" \
    -U "$PG_ROLE" -d "$PG_DB" -qtAX -c 'SELECT 1' >/dev/null 2>&1
}
# The lines rcubench keeps at the top of pg_hba.conf (the first rule that matches decides):
# its role gives its password, over TCP and the local socket, whatever later rules trust.
# They name only this role: every other role and database keeps the rules it had.
pg_hba_block() {
  printf '%s\n' "# BEGIN rcubench (scripts/setup.sh): role $PG_ROLE signs in with its password" \
    "local all $PG_ROLE scram-sha-256" \
    "host all $PG_ROLE 127.0.0.1/32 scram-sha-256" \
    "host all $PG_ROLE ::1/128 scram-sha-256" \
    "# END rcubench"
}

# PG_ROLE's password is PG_PASSWORD, and PostgreSQL asks for it: a machine whose
# pg_hba.conf trusts local connections (a CI image's `host all all 127.0.0.1/32 trust`)
# would let anyone on it in as the role, password or not.
ensure_pg_password() {
  local hba current wanted
  hba=$(psql_admin -c 'SHOW hba_file')
  current=$(as_root cat "$hba")
  wanted=$(pg_hba_block; printf '%s\n' "$current" \
    | awk '/^# BEGIN rcubench /{ skip = 1 } !skip { print } /^# END rcubench$/{ skip = 0 }')
  if [ "$wanted" != "$current" ]; then
    printf '%s\n' "$wanted" | as_root tee "$hba" >/dev/null
    if [ "$(psql_admin -c 'SELECT count(*) FROM pg_hba_file_rules WHERE error IS NOT NULL')" != 0 ]; then
      printf '%s\n' "$current" | as_root tee "$hba" >/dev/null
      die "$hba does not load with rcubench's lines added: left as it was"
    fi
    psql_admin -c 'SELECT pg_reload_conf()' >/dev/null
    did "make PostgreSQL ask role $PG_ROLE for its password ($hba; other roles' rules unchanged)"
  else
    ok "PostgreSQL asks role $PG_ROLE for its password ($hba)"
  fi
  # The reload is a signal the server acts on a moment later: until then the old rules hold.
  local wrong=not-the-password-$RANDOM$RANDOM
  for _ in $(seq 50); do pg_login "$wrong" || break; sleep 0.2; done
  ! pg_login "$wrong" || die "PostgreSQL lets role $PG_ROLE in over 127.0.0.1 without its password ($hba)"
  if ! pg_login "$PG_PASSWORD"; then
    # On stdin, so the password is in no process list; and out of the server's statement log.
    printf "SET log_statement = 'none';\nSET password_encryption = 'scram-sha-256';\nALTER ROLE %s PASSWORD '%s';\n" \
      "$PG_ROLE" "$PG_PASSWORD" | psql_admin >/dev/null
    pg_login "$PG_PASSWORD" || die "PostgreSQL role $PG_ROLE does not sign in with the password just set"
    did "set the password of PostgreSQL role $PG_ROLE (the machine's, $MACHINE_SECRETS)"
  else
    ok "PostgreSQL role $PG_ROLE signs in with the machine's password"
  fi
}

# DATABASE_URL in the env file: the local role with the machine's password. A URL naming the
# local role is brought up to date (its database name kept); one naming another server or
# role is the operator's, and left alone.
ensure_database_url() {
  local url db want
  url=$(env_get DATABASE_URL)
  db=$PG_DB
  if [ -n "$url" ]; then
    [[ "$url" =~ ^postgres(ql)?://$PG_ROLE(:[^@/]*)?@(127\.0\.0\.1|localhost):$PG_PORT/([^?]+)$ ]] \
      || return 0
    db=${BASH_REMATCH[4]}
  fi
  want="postgres://$PG_ROLE:$PG_PASSWORD@127.0.0.1:$PG_PORT/$db"
  if [ "$url" != "$want" ]; then
    env_set DATABASE_URL "$want"
    did "write DATABASE_URL (role $PG_ROLE with the machine's password) into $ENV_FILE"
  fi
}

# --- Redis ---------------------------------------------------------------------------------
# The password travels in the environment, never on a command line (ps shows those).
redis_ping() {  # PASSWORD (empty: none)
  if [ -n "$1" ]; then
    REDISCLI_AUTH=$1 redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null || true
  else
    redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null || true
  fi
}

# Redis on 127.0.0.1:REDIS_PORT answers with REDIS_PASSWORD (empty: none): started with it
# when not running; given it when running without one. A Redis that has another password is
# never changed: other checkouts may use it.
ensure_redis() {
  if [ "$(redis_ping "$REDIS_PASSWORD")" != PONG ] && [ "$(redis_ping "")" != PONG ]; then
    if redis_ping "" | grep -q NOAUTH; then
      die "Redis on 127.0.0.1:$REDIS_PORT wants a password: RCUBENCH_REDIS_PASSWORD is unset or differs (this machine's is in $MACHINE_SECRETS)"
    fi
    as_root mkdir -p /var/lib/redis /var/log/redis
    # No persistence: the broker only carries "do step X for id N"; state lives in PostgreSQL.
    # The config (with requirepass) comes on stdin, so the password is not in the process list.
    printf 'requirepass "%s"\n' "$REDIS_PASSWORD" | as_root redis-server - --daemonize yes \
      --bind 127.0.0.1 -::1 --port "$REDIS_PORT" --save "" --appendonly no --dir /var/lib/redis \
      --logfile /var/log/redis/rcubench.log >/dev/null
    for _ in $(seq 20); do [ "$(redis_ping "$REDIS_PASSWORD")" = PONG ] && break; sleep 0.5; done
    [ "$(redis_ping "$REDIS_PASSWORD")" = PONG ] || die "Redis did not start"
    did "start Redis on 127.0.0.1:$REDIS_PORT${REDIS_PASSWORD:+ with a password}"
  elif [ -n "$REDIS_PASSWORD" ] && [ "$(redis_ping "")" = PONG ]; then
    # Running without one (started before the password was set): set it now; it is lost on
    # restart, when this script starts Redis with it again.
    printf 'CONFIG SET requirepass "%s"\n' "$REDIS_PASSWORD" \
      | redis-cli -h 127.0.0.1 -p "$REDIS_PORT" >/dev/null
    [ "$(redis_ping "")" != PONG ] || die "could not set the Redis password"
    did "set the password of Redis on 127.0.0.1:$REDIS_PORT (restart make up's processes)"
  else
    ok "Redis answering on 127.0.0.1:$REDIS_PORT${REDIS_PASSWORD:+ (password set)}"
  fi
}

# Broker URLs of the service and of the tests (Redis database 15, see conftest.py), with
# the password, and the password itself (later runs take it from here).
ensure_broker_urls() {
  local redis_url
  [ -n "$REDIS_PASSWORD" ] || [ "$REDIS_PORT" != 6379 ] || return 0
  redis_url=redis://${REDIS_PASSWORD:+:$REDIS_PASSWORD@}127.0.0.1:$REDIS_PORT
  if [ "$(env_get RCUBENCH_REDIS_PASSWORD)" != "$REDIS_PASSWORD" ] \
      || [ "$(env_get CELERY_BROKER_URL)" != "$redis_url/0" ] \
      || [ "$(env_get RCUBENCH_TEST_BROKER_URL)" != "$redis_url/15" ]; then
    env_set RCUBENCH_REDIS_PASSWORD "$REDIS_PASSWORD"
    env_set CELERY_BROKER_URL "$redis_url/0"
    env_set RCUBENCH_TEST_BROKER_URL "$redis_url/15"
    did "point the broker URLs in $ENV_FILE at Redis on 127.0.0.1:$REDIS_PORT${REDIS_PASSWORD:+ with its password}"
  fi
}
