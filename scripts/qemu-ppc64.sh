#!/usr/bin/env bash
# QEMU 10.0 for ppc64le domains, from bookworm-backports, unpacked beside the system QEMU.
#
# QEMU 7.2 (Debian 12) refuses more than one SMT thread per core on pseries under TCG, so
# smt-toggle cannot run on ppc64le with it; 10.0 boots pseries with threads=8 and the guest
# toggles SMT (measured). The packages are unpacked under /opt/rcubench-qemu, not installed:
# the system QEMU 7.2 stays for x86_64 and nothing else on the machine changes. Signed
# index, exact version. The module packages come too, and a wrapper points
# QEMU_MODULE_DIR at them: QEMU also searches the system's module dir, and one module of
# another build (7.2's) makes it abort, which libvirt's capability probe (qom-list-types
# loads every module) ran into. Idempotent; run as root by scripts/setup.sh and by the
# Ansible worker role. Prints "qemu-ppc64: did ..." for each change.
set -euo pipefail

VERSION=1:10.0.2+ds-2+deb13u1~bpo12+1
PACKAGES=(qemu-system-ppc qemu-system-common qemu-system-data
  qemu-system-modules-opengl qemu-system-modules-spice)
BASE=/opt/rcubench-qemu
root=$BASE/${VERSION//[:~+]/_}
wrapper=$root/qemu-system-ppc64  # engine/vm/domain.py points ppc64le domains here

did() { echo "qemu-ppc64: did $*"; }
ok() { echo "qemu-ppc64: ok   $*"; }
die() { echo "qemu-ppc64: error: $*" >&2; exit 1; }

if ! "$wrapper" --version 2>/dev/null | grep -q "version 10.0.2"; then
  backports=/etc/apt/sources.list.d/rcubench-bookworm-backports.sources
  if [ ! -f "$backports" ]; then
    printf '%s\n' "Types: deb" "URIs: http://deb.debian.org/debian" "Suites: bookworm-backports" \
      "Components: main" "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" \
      > "$backports"
    did "add bookworm-backports (default priority: nothing is installed from it)"
  fi
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  fetched=0
  for _ in 1 2 3; do
    if (cd "$work" && apt-get download -qq "${PACKAGES[@]/%/=$VERSION}" >/dev/null 2>&1); then
      fetched=1; break
    fi
    apt-get update -qq >/dev/null 2>&1 || sleep 5
  done
  [ "$fetched" = 1 ] || die "cannot download QEMU $VERSION from bookworm-backports" \
    "(if backports moved on, set VERSION in scripts/qemu-ppc64.sh to its version)"
  mkdir -p "$root"
  for deb in "$work"/*.deb; do dpkg -x "$deb" "$root"; done
  missing=$(ldd "$root/usr/bin/qemu-system-ppc64" | grep "not found" || true)
  [ -z "$missing" ] || die "QEMU $VERSION lacks libraries: $missing"
  printf '%s\n' '#!/bin/sh' '# QEMU 10.0 beside the system QEMU 7.2: load only its own modules.' \
    "QEMU_MODULE_DIR=$root/usr/lib/x86_64-linux-gnu/qemu exec $root/usr/bin/qemu-system-ppc64 \"\$@\"" \
    > "$wrapper"
  chmod -R a+rX "$root"
  chmod 0755 "$wrapper"
  ln -sfn "$root" "$BASE/current"
  did "unpack QEMU $VERSION (ppc64) into $root"
else
  ok "QEMU ppc64 $VERSION in $root"
fi
if ! virsh -q -c qemu:///system domcapabilities --emulatorbin "$BASE/current/qemu-system-ppc64" \
    --arch ppc64le --machine pseries --virttype qemu >/dev/null 2>&1; then
  die "libvirt cannot use $BASE/current/qemu-system-ppc64 (see libvirtd's log)"
fi
ok "libvirt accepts QEMU $VERSION for pseries"
