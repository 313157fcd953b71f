#!/bin/bash
# The official postgres image's contract, in short: as root, own PGDATA and drop to postgres;
# on an empty PGDATA, initdb with POSTGRES_USER's password (scram for TCP, trust on the
# local socket inside the container), create POSTGRES_DB, listen on every address.
set -euo pipefail

if [ "$(id -u)" = 0 ]; then
  install -d -o postgres -g postgres -m 0700 "$PGDATA"
  exec setpriv --reuid=postgres --regid=postgres --init-groups -- "$0" "$@"
fi

if [ "${1:-}" = postgres ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
  : "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set}"
  user=${POSTGRES_USER:-postgres}
  db=${POSTGRES_DB:-$user}
  # The password goes through a file descriptor, never the command line.
  initdb -D "$PGDATA" -U "$user" --auth-local=trust --auth-host=scram-sha-256 \
    --pwfile=<(printf '%s\n' "$POSTGRES_PASSWORD") >/dev/null
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  echo "listen_addresses = '*'" >>"$PGDATA/postgresql.conf"
  if [ "$db" != postgres ]; then
    pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
    createdb -U "$user" -- "$db"
    pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
  fi
  echo "docker-entrypoint: initialised $PGDATA (role $user, database $db)"
fi
exec "$@"
