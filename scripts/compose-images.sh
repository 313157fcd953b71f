#!/usr/bin/env bash
# Local images for docker-compose.yml where no image registry can be reached (used with
# docker-compose.local-images.yml; with a registry, the official images are the default):
#
#   rcubench-compose/debian:12    Debian 12 from debootstrap, imported with `docker import`
#   rcubench-compose/postgres:15  PostgreSQL 15 from Debian's packages (deploy/local-images/)
#   rcubench-compose/redis:7      Redis 7 from Debian's packages
#
# Each image carries the hash of its recipe (label org.rcubench.recipe) and is rebuilt only
# when the recipe changed, so a second run does nothing. The base image trusts the CAs this
# host trusts locally (/usr/local/share/ca-certificates: an egress proxy's, where there is
# one) and names the same Debian mirror, so apt and pip work inside `docker build` as they
# do on the host. Prints "compose-images: did ..." per change; run as root.
#
# Usage: scripts/compose-images.sh            build what is missing or out of date
#        scripts/compose-images.sh --print    print each image's name and recipe hash
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MIRROR=${RCUBENCH_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${RCUBENCH_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
# Shared with tests/deploy/test_ansible_chroot.py: debootstrap's .debs are downloaded once a machine.
CACHE=${RCUBENCH_DEBOOTSTRAP_CACHE:-/var/lib/rcubench/debootstrap-cache}
BASE=rcubench-compose/debian:12
POSTGRES=rcubench-compose/postgres:15
REDIS=rcubench-compose/redis:7
LABEL=org.rcubench.recipe
# Without the buildx plugin (Debian has none for 12), `docker build` is the classic builder.
export DOCKER_BUILDKIT=0

did() { echo "compose-images: did $*"; }
ok() { echo "compose-images: ok   $*"; }
die() { echo "compose-images: error: $*" >&2; exit 1; }

local_cas() { find /usr/local/share/ca-certificates -maxdepth 1 -name '*.crt' 2>/dev/null | sort; }

# The base recipe: this script's base section, the mirrors and the local CAs.
base_hash() {
  {
    sed -n '/^# --- base: begin/,/^# --- base: end/p' "$0"
    echo "$MIRROR $SECURITY_MIRROR"
    local_cas | while read -r ca; do sha256sum <"$ca"; done
  } | sha256sum | cut -c1-16
}
# A service image's recipe: the base's hash and its folder under deploy/local-images/.
service_hash() {  # DIR
  {
    base_hash
    (cd "$1" && find . -type f | sort | xargs sha256sum)
  } | sha256sum | cut -c1-16
}
image_hash() {  # IMAGE -> its recipe label, empty when absent
  docker image inspect -f "{{ index .Config.Labels \"$LABEL\" }}" "$1" 2>/dev/null || true
}
image_id() { docker image inspect -f '{{ .Id }}' "$1" 2>/dev/null || true; }
# The image a rebuild replaced, unless something still uses it (a container, a child image).
drop_replaced() {  # OLD_ID IMAGE
  if [ -n "$1" ] && [ "$1" != "$(image_id "$2")" ]; then
    docker image rm "$1" >/dev/null 2>&1 || true
  fi
}

if [ "${1:-}" = --print ]; then
  echo "$BASE $(base_hash)"
  echo "$POSTGRES $(service_hash "$ROOT/deploy/local-images/postgres")"
  echo "$REDIS $(service_hash "$ROOT/deploy/local-images/redis")"
  exit 0
fi
[ "$(id -u)" -eq 0 ] || die "run as root (debootstrap, docker)"
docker info >/dev/null 2>&1 || die "dockerd does not answer (scripts/setup.sh starts it)"

# --- base: begin (this section is the base image's recipe) ---------------------------------
build_base() {
  local hash=$1 work
  work=$(mktemp -d /var/tmp/rcubench-compose-base.XXXXXX)
  trap 'rm -rf "$work"' RETURN
  mkdir -p "$CACHE"
  debootstrap --variant=minbase --cache-dir="$CACHE" --include=ca-certificates \
    bookworm "$work/root" "$MIRROR" >"$work/debootstrap.log" 2>&1 \
    || die "debootstrap failed: $(tail -n 5 "$work/debootstrap.log")"
  # The sources the official debian:12 image has, on this host's mirror.
  rm -f "$work/root/etc/apt/sources.list"
  printf '%s\n' "Types: deb" "URIs: $MIRROR" "Suites: bookworm bookworm-updates" \
    "Components: main" "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" "" \
    "Types: deb" "URIs: $SECURITY_MIRROR" "Suites: bookworm-security" "Components: main" \
    "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" \
    >"$work/root/etc/apt/sources.list.d/debian.sources"
  local ca
  for ca in $(local_cas); do cp "$ca" "$work/root/usr/local/share/ca-certificates/"; done
  chroot "$work/root" update-ca-certificates >/dev/null 2>&1
  # Small like the official slim image: no package cache, lists, docs or man pages.
  rm -rf "$work/root"/var/cache/apt/archives/*.deb "$work/root"/var/lib/apt/lists/* \
    "$work/root"/usr/share/doc/* "$work/root"/usr/share/man/* "$work/root"/var/log/*.log
  tar -C "$work/root" --numeric-owner -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' \
    --change "LABEL $LABEL=$hash" \
    --change 'CMD ["bash"]' \
    --message "debootstrap bookworm (scripts/compose-images.sh)" - "$BASE" >/dev/null
}
# --- base: end ----------------------------------------------------------------------------

want=$(base_hash)
if [ "$(image_hash "$BASE")" != "$want" ]; then
  old=$(image_id "$BASE")
  build_base "$want"
  drop_replaced "$old" "$BASE"
  did "build $BASE (debootstrap, recipe $want)"
else
  ok "$BASE (recipe $want)"
fi

for pair in "$POSTGRES:postgres" "$REDIS:redis"; do
  image=${pair%:*}
  dir=$ROOT/deploy/local-images/${pair##*:}
  want=$(service_hash "$dir")
  if [ "$(image_hash "$image")" != "$want" ]; then
    old=$(image_id "$image")
    log=$(mktemp)
    docker build -q --build-arg "BASE_IMAGE=$BASE" --label "$LABEL=$want" -t "$image" "$dir" \
      >"$log" 2>&1 || die "docker build of $image failed: $(tail -n 20 "$log")"
    rm -f "$log"
    drop_replaced "$old" "$image"
    did "build $image (recipe $want)"
  else
    ok "$image (recipe $want)"
  fi
done
