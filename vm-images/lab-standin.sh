#!/bin/bash
# Lab stand-in: a QEMU/libvirt guest that looks like a bare-metal lab machine to the lab
# runner. It boots Debian 12's distribution kernel (direct kernel boot, so any reset brings
# the known-good kernel back), runs sshd and has kexec-tools; the runner scp's a test kernel
# in, kexec's into it, reads ttyS0 through a TCP port, and power-cycles it through virsh.
#
#   lab-standin.sh build [DIR]                            build the image once (stamped)
#   lab-standin.sh define NAME SSH_PORT CONSOLE_PORT [DIR] define + start NAME (rcubench-lab-*)
#   lab-standin.sh undefine NAME [DIR]                    destroy, undefine, drop overlay
#   lab-standin.sh reimage NAME [DIR]                     power off, fresh overlay (reprovision)
#   lab-standin.sh wait-ssh PORT [TIMEOUT] [DIR]          wait for ssh, print seconds
#
# Runner-facing files in DIR: vmlinuz + initrd-fast.img + cmdline (the known-good boot;
# initrd.img is Debian's, also in the guest's /boot),
# rootfs.ext4 (base image; domains run on DIR/overlays/NAME.qcow2), id_ed25519(.pub) (root's
# key), ssh_host_ed25519_key.pub (pin it as "[127.0.0.1]:PORT <key>"),
# overlays/NAME.console.log (every byte of the serial console, across reboots).
set -euo pipefail

DEFAULT_DIR=/var/lib/rcubench/lab-standin
MIRROR=http://deb.debian.org/debian  # what /etc/apt/sources.list.d uses on this host
SUITE=bookworm
VIRSH=(virsh -q -c qemu:///system)
ROOTFS_SIZE=3G  # sparse; leaves ~2 GB free for scp'd test kernels and whatever the runner adds
# Known-good cmdline. init= skips systemd (tens of seconds under TCG); net.ifnames=0 keeps
# eth0 for the static IP; fastboot skips fsck (the overlay is disposable); panic=-1 turns a
# panic of the known-good kernel into a reset, which on_reboot=restart turns into a reboot.
CMDLINE="root=/dev/vda rw rootfstype=ext4 init=/sbin/rcubench-init console=ttyS0,115200 quiet net.ifnames=0 fastboot panic=-1 mitigations=off"

log() { printf 'lab-standin: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# --- build -----------------------------------------------------------------------------

# PID 1 of the guest. systemd under TCG costs tens of seconds; this brings sshd up right
# after the initramfs hands over. bash reaps every orphan (waitpid(-1)) while it waits.
guest_init() {
  cat <<'EOF'
#!/bin/bash
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# The initramfs moves /proc, /sys, /dev and /run over; mount what is still missing.
mountpoint -q /proc || mount -t proc proc /proc
mountpoint -q /sys || mount -t sysfs sysfs /sys
mountpoint -q /dev || mount -t devtmpfs devtmpfs /dev
mountpoint -q /run || mount -t tmpfs -o mode=755,nosuid,nodev tmpfs /run
mkdir -p /dev/pts /dev/shm /run/sshd /run/lock
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts
mount -t tmpfs -o nosuid,nodev tmpfs /dev/shm
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /tmp
mountpoint -q /sys/kernel/debug || mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null || true
mount -o remount,rw /
hostname -F /etc/hostname
# No udev in the real root: load the NIC driver ourselves (probe is synchronous).
modprobe -q virtio_net || true
ip link set lo up
ip link set eth0 up
ip addr add 10.0.2.15/24 dev eth0
ip route add default via 10.0.2.2
/usr/sbin/sshd -E /var/log/sshd.log
echo "rcubench-lab-standin: sshd up at $(cut -d' ' -f1 /proc/uptime)s uptime, kernel $(uname -r)" >/dev/console
trap '' TERM INT HUP
while :; do sleep 86400 & wait $! 2>/dev/null; done
EOF
}

# reboot/poweroff/halt without an init to talk to: sync, then the syscall (busybox -f).
guest_power_wrapper() {
  printf '#!/bin/sh\n# No init daemon here: every %s is immediate (like %s -f).\nsync\nexec busybox %s -f\n' "$1" "$1" "$1"
}

# Everything that defines the image; its hash is the build stamp, so a recipe change
# rebuilds and an unchanged recipe is a no-op.
build_recipe() {
  declare -f build_rootfs guest_init guest_power_wrapper
  echo "$MIRROR $SUITE $ROOTFS_SIZE $CMDLINE"
}

build_rootfs() {
  local dir=$1 root=$2
  rm -rf "$root"
  mkdir -p "$dir/cache"
  # minbase + apt; kernel and kexec-tools come after the preseed/initramfs config below.
  debootstrap --variant=minbase --cache-dir="$dir/cache" --include=busybox,iproute2,kmod \
    "$SUITE" "$root" "$MIRROR"
  cat >"$root/etc/apt/sources.list" <<EOF
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb ${MIRROR%/debian}/debian-security $SUITE-security main
EOF
  # No daemons started inside the chroot.
  printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
  chmod 755 "$root/usr/sbin/policy-rc.d"
  # kexec-tools must not take over reboots: the runner kexec's explicitly, and a reboot
  # has to go back through the reset + direct kernel boot to the known-good kernel.
  echo 'kexec-tools kexec-tools/load_kexec boolean false' | chroot "$root" debconf-set-selections
  # Small initramfs (fast kexec -l, fast decompress under TCG): only what mounts /dev/vda.
  mkdir -p "$root/etc/initramfs-tools/conf.d"
  printf 'MODULES=list\nCOMPRESS=gzip\n' >"$root/etc/initramfs-tools/conf.d/rcubench"
  printf '%s\n' virtio_pci virtio_blk virtio_net ext4 >>"$root/etc/initramfs-tools/modules"
  mount -t proc proc "$root/proc"
  trap 'umount "'"$root"'/proc" 2>/dev/null || true' EXIT
  chroot "$root" apt-get update -q
  DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get -y -q -o Dpkg::Use-Pty=0 \
    --no-install-recommends install linux-image-amd64 openssh-server kexec-tools
  DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get -y -q -o Dpkg::Use-Pty=0 upgrade
  grep -qx 'LOAD_KEXEC=false' "$root/etc/default/kexec" || die "kexec-tools still loads on reboot"
  chroot "$root" apt-get clean
  umount "$root/proc"
  trap - EXIT
  rm -f "$root/usr/sbin/policy-rc.d"
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/debconf/*-old

  # ssh: only the build-time host key (pinned by the runner), root by key only.
  rm -f "$root"/etc/ssh/ssh_host_*
  install -m 600 "$dir/ssh_host_ed25519_key" "$root/etc/ssh/ssh_host_ed25519_key"
  install -m 644 "$dir/ssh_host_ed25519_key.pub" "$root/etc/ssh/ssh_host_ed25519_key.pub"
  cat >"$root/etc/ssh/sshd_config.d/rcubench.conf" <<'EOF'
HostKey /etc/ssh/ssh_host_ed25519_key
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
UseDNS no
EOF
  install -d -m 700 "$root/root/.ssh"
  install -m 600 "$dir/id_ed25519.pub" "$root/root/.ssh/authorized_keys"

  guest_init >"$root/sbin/rcubench-init"
  chmod 755 "$root/sbin/rcubench-init"
  local cmd
  for cmd in reboot poweroff halt; do
    guest_power_wrapper "$cmd" >"$root/usr/local/sbin/$cmd"
    chmod 755 "$root/usr/local/sbin/$cmd"
  done
  echo lab-standin >"$root/etc/hostname"
  printf '127.0.0.1 localhost\n127.0.1.1 lab-standin\n' >"$root/etc/hosts"
  : >"$root/etc/fstab"
  mkdir -p "$root/var/tmp/rcubench"
}

# The known-good boot's initramfs. Debian's (kept in the guest's /boot, for kexec) spends
# ~3 s under TCG in udev; this one insmods the few modules the root needs and switches root.
# Built from the base image with debugfs (no mount) and the host's static busybox.
fast_initrd_init() {
  cat <<'EOF2'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t devtmpfs devtmpfs /dev
mount -t proc proc /proc
for m in $(cat /modules.order); do insmod "/lib/modules/$m" 2>/dev/null; done
root=/dev/vda init=/sbin/init
for a in $(cat /proc/cmdline); do
  case $a in root=*) root=${a#root=} ;; init=*) init=${a#init=} ;; esac
done
i=0
while [ ! -b "$root" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
if ! mount -t ext4 -o rw "$root" /root; then
  echo "lab-standin initramfs: cannot mount $root, rebooting" >/dev/console
  sleep 5; reboot -f
fi
mount --move /dev /root/dev
umount /proc
exec switch_root /root "$init"
EOF2
}

# The base directory's name stands for the rootfs (modules) it is built from.
fast_initrd_recipe() { declare -f build_fast_initrd fast_initrd_init; basename "$1"; }

build_fast_initrd() {
  local dir=$1 kver tmp m mods=(virtio_pci virtio_blk virtio_net crc32c_generic crc32c_intel ext4)
  kver=$(cat "$dir/kernel-release")
  tmp=$(mktemp -d)
  mkdir -p "$tmp/tree/lib/modules" "$tmp/base/lib/modules" "$tmp/tree"/{bin,dev,proc,root}
  debugfs -R "rdump /lib/modules/$kver $tmp/base/lib/modules" "$dir/rootfs.ext4" 2>/dev/null
  [[ -f $tmp/base/lib/modules/$kver/modules.dep ]] || die "no modules for $kver in the base image"
  : >"$tmp/tree/modules.order"
  # modprobe resolves dependencies in load order; keep the first occurrence of each.
  for m in "${mods[@]}"; do
    modprobe -d "$tmp/base" -S "$kver" --show-depends "$m" | awk '$1 == "insmod" { print $2 }'
  done | awk '!seen[$0]++' | while read -r m; do
    install -m 644 "$m" "$tmp/tree/lib/modules/${m##*/}"
    echo "${m##*/}" >>"$tmp/tree/modules.order"
  done
  [[ -x /bin/busybox ]] && file -L /bin/busybox | grep -q 'statically linked' ||
    die "needs a static /bin/busybox on the host (apt-get install busybox-static)"
  install -m 755 /bin/busybox "$tmp/tree/bin/busybox"
  fast_initrd_init >"$tmp/tree/init"
  chmod 755 "$tmp/tree/init"
  (cd "$tmp/tree" && find . -mindepth 1 | LC_ALL=C sort |
    cpio --quiet -o -H newc -R 0:0 --reproducible | gzip -n -1) >"$dir/initrd-fast.img.new"
  chmod 644 "$dir/initrd-fast.img.new"
  mv -f "$dir/initrd-fast.img.new" "$dir/initrd-fast.img"
  rm -rf "$tmp"
}

have_outputs() {
  local f
  for f in vmlinuz initrd.img initrd-fast.img rootfs.ext4 cmdline id_ed25519 id_ed25519.pub ssh_host_ed25519_key.pub; do
    [[ -s $1/$f ]] || return 1
  done
}

# Layout: each build of the base goes to DIR/base-<recipe hash>/ and DIR/current points at
# the newest; DIR/{vmlinuz,initrd.img,initrd-fast.img,rootfs.ext4,kernel-release} point
# through current. Domains use the resolved paths, so a rebuild never changes the backing
# file under an existing overlay (that would corrupt it); old bases go when unreferenced.
BASE_FILES=(vmlinuz initrd.img initrd-fast.img rootfs.ext4 kernel-release)

link_current() {
  local dir=$1 base=$2 f
  ln -sfn "$base" "$dir/current.new"
  mv -Tf "$dir/current.new" "$dir/current"
  for f in "${BASE_FILES[@]}"; do
    [[ -L $dir/$f ]] || { rm -f "$dir/$f"; ln -s "current/$f" "$dir/$f"; }
  done
}

prune_bases() {
  local dir=$1 b o used
  used=$(for o in "$dir"/overlays/*.qcow2; do
    if [[ -e $o ]]; then qemu-img info -U "$o" | sed -n 's/^backing file: //p'; fi
  done)
  for b in "$dir"/base-*; do
    [[ -d $b && $(readlink -f "$b") != $(readlink -f "$dir/current") ]] || continue
    grep -qF "$b/" <<<"$used" || { rm -rf "$b"; log "removed unused $b"; }
  done
}

cmd_build() {
  local dir=${1:-$DEFAULT_DIR}
  local stamp=$dir/.stamp want base
  want=$(build_recipe | sha256sum | cut -d' ' -f1)
  base=$dir/base-${want:0:12}
  # Files of the first layout (plain files in DIR) move into their base directory.
  if [[ -f $stamp && -f $dir/rootfs.ext4 && ! -L $dir/rootfs.ext4 ]]; then
    local old=$dir/base-$(cut -c1-12 "$stamp") f
    mkdir -p "$old"
    for f in "${BASE_FILES[@]}" .stamp-initrd; do
      if [[ -e $dir/$f ]]; then mv -f "$dir/$f" "$old/$f"; fi
    done
    link_current "$dir" "${old##*/}"
  fi
  if [[ -f $stamp && $(cat "$stamp") == "$want" && -s $base/rootfs.ext4 ]]; then
    if [[ -f $base/.stamp-initrd && $(cat "$base/.stamp-initrd") == "$(fast_initrd_recipe "$base" | sha256sum)" ]] &&
      have_outputs "$dir"; then
      log "up to date in $dir, nothing to do"
    else
      build_fast_initrd "$base"
      fast_initrd_recipe "$base" | sha256sum >"$base/.stamp-initrd"
      log "rebuilt $base/initrd-fast.img"
    fi
    prune_bases "$dir"
    return 0
  fi
  local t0=$SECONDS
  mkdir -p "$dir"
  chmod 755 "$dir"  # QEMU (user libvirt-qemu) reads the kernel, initrd and base image
  # Keys survive rebuilds so runner configurations stay valid.
  [[ -f $dir/id_ed25519 ]] || ssh-keygen -q -t ed25519 -N '' -C rcubench-lab-runner -f "$dir/id_ed25519"
  [[ -f $dir/ssh_host_ed25519_key ]] ||
    ssh-keygen -q -t ed25519 -N '' -C lab-standin -f "$dir/ssh_host_ed25519_key"
  rm -f "$stamp"
  local root=$dir/work/rootfs
  build_rootfs "$dir" "$root"
  rm -rf "$base"
  mkdir -p "$base"
  chmod 755 "$base"
  # The guest kernel/initrd are the distribution's, booted directly by QEMU.
  basename "$(readlink -f "$root/vmlinuz")" | sed 's/^vmlinuz-//' >"$base/kernel-release"
  install -m 644 "$(readlink -f "$root/vmlinuz")" "$base/vmlinuz"
  install -m 644 "$(readlink -f "$root/initrd.img")" "$base/initrd.img"
  # mkfs.ext4 -d fills the filesystem from the tree: no loop mount needed.
  mkfs.ext4 -q -F -L lab-standin -E root_owner=0:0 -d "$root" "$base/rootfs.ext4" "$ROOTFS_SIZE"
  chmod 644 "$base/rootfs.ext4"
  build_fast_initrd "$base"
  fast_initrd_recipe "$base" | sha256sum >"$base/.stamp-initrd"
  echo "$CMDLINE" >"$dir/cmdline"
  rm -rf "$dir/work"
  link_current "$dir" "${base##*/}"
  echo "$want" >"$stamp"
  prune_bases "$dir"
  log "built in $((SECONDS - t0))s: $base (kernel $(cat "$base/kernel-release"))"
}

# --- define / undefine -------------------------------------------------------------------

check_name() { [[ $1 == rcubench-lab-* ]] || die "domain names must start with rcubench-lab- (got $1)"; }

domain_xml() {
  local name=$1 ssh_port=$2 console_port=$3 dir=$4 hash=$5 base
  base=$(readlink -f "$dir/current")
  # TCG; 1 socket x 1 core x 2 threads so the guest kernel sees SMT siblings (an Intel model:
  # QEMU models no SMT for AMD ones without topoext). RDRAND seeds the crng at once, else
  # sshd waits ~2 s for it. User-mode networking via passthrough: libvirt 9.0 cannot
  # hostfwd on <interface type='user'>. cache='unsafe': the overlay is disposable.
  cat <<EOF
<domain type='qemu' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>
  <name>$name</name>
  <metadata><lab:standin xmlns:lab='https://rcubench.invalid/lab-standin'>$hash</lab:standin></metadata>
  <memory unit='MiB'>1024</memory>
  <vcpu placement='static'>2</vcpu>
  <cpu mode='custom' match='exact' check='none'>
    <model fallback='forbid'>Nehalem</model>
    <feature policy='require' name='rdrand'/>
    <topology sockets='1' dies='1' cores='1' threads='2'/>
  </cpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>$base/vmlinuz</kernel>
    <initrd>$base/initrd-fast.img</initrd>
    <cmdline>$CMDLINE</cmdline>
  </os>
  <features><acpi/><apic/></features>
  <clock offset='utc'/>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>restart</on_reboot>
  <on_crash>restart</on_crash>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2' cache='unsafe' discard='unmap'/>
      <source file='$dir/overlays/$name.qcow2'/>
      <target dev='vda' bus='virtio'/>
    </disk>
    <serial type='tcp'>
      <source mode='bind' host='127.0.0.1' service='$console_port'/>
      <protocol type='raw'/>
      <log file='$dir/overlays/$name.console.log' append='on'/>
      <target port='0'/>
    </serial>
    <controller type='usb' model='none'/>
    <memballoon model='none'/>
  </devices>
  <qemu:commandline>
    <qemu:arg value='-netdev'/>
    <qemu:arg value='user,id=labnet,hostfwd=tcp:127.0.0.1:$ssh_port-:22'/>
    <qemu:arg value='-device'/>
    <qemu:arg value='virtio-net-pci,netdev=labnet,romfile=,addr=0x10'/>
  </qemu:commandline>
</domain>
EOF
}

domain_state() { "${VIRSH[@]}" domstate "$1" 2>/dev/null || echo absent; }

cmd_undefine() {
  local name=$1 dir=${2:-$DEFAULT_DIR}
  check_name "$name"
  if [[ $(domain_state "$name") != absent ]]; then
    [[ $(domain_state "$name") == "shut off" ]] || "${VIRSH[@]}" destroy "$name" >/dev/null
    "${VIRSH[@]}" undefine "$name" >/dev/null
    log "undefined $name"
  fi
  # The console log goes too: test domains come and go, their logs would pile up.
  rm -f "$dir/overlays/$name.qcow2" "$dir/overlays/$name.console.log"
}

cmd_define() {
  local name=$1 ssh_port=$2 console_port=$3 dir=${4:-$DEFAULT_DIR}
  check_name "$name"
  [[ -s $dir/current/.stamp-initrd && -s $dir/current/rootfs.ext4 ]] || die "no image in $dir: run '$0 build $dir' first"
  local hash xml overlay=$dir/overlays/$name.qcow2
  # The hash covers the definition and the base image's build, so a rebuilt base also
  # replaces the overlay (an overlay on a changed backing file is garbage).
  hash=$(domain_xml "$name" "$ssh_port" "$console_port" "$dir" "" | cat - "$dir/current/.stamp-initrd" |
    sha256sum | cut -d' ' -f1)
  xml=$(domain_xml "$name" "$ssh_port" "$console_port" "$dir" "$hash")
  local state
  state=$(domain_state "$name")
  if [[ $state != absent ]] && "${VIRSH[@]}" dumpxml --inactive "$name" | grep -q ">$hash</lab:standin>" &&
    [[ -f $overlay ]]; then
    if [[ $state == running ]]; then
      log "$name unchanged and running, nothing to do"
      return 0
    fi
  else
    [[ $state == absent ]] || log "$name differs from the wanted definition, replacing it"
    cmd_undefine "$name" "$dir"
    mkdir -p "$dir/overlays"
    chmod 755 "$dir/overlays"
    qemu-img create -q -f qcow2 -F raw -b "$(readlink -f "$dir/current/rootfs.ext4")" "$overlay"
    "${VIRSH[@]}" define /dev/stdin <<<"$xml" >/dev/null
    log "defined $name (ssh 127.0.0.1:$ssh_port, console 127.0.0.1:$console_port)"
  fi
  "${VIRSH[@]}" start "$name" >/dev/null
  log "started $name"
}

# The stand-in's reprovision command (a lab pool that takes untrusted kernels): power off
# and throw away whatever any kernel wrote to its disk, a fresh overlay on the same base, as
# a lab re-images a host or resets its netboot image. The power command starts it again.
cmd_reimage() {
  local name=$1 dir=${2:-$DEFAULT_DIR} base overlay
  check_name "$name"
  overlay=$dir/overlays/$name.qcow2
  [[ -f $overlay ]] || die "$name has no overlay in $dir/overlays"
  if [[ $(domain_state "$name") != "shut off" ]]; then "${VIRSH[@]}" destroy "$name" >/dev/null; fi
  base=$(qemu-img info -U "$overlay" | sed -n 's/^backing file: //p')
  [[ -f $base ]] || die "the base image of $name is gone: $base"
  qemu-img create -q -f qcow2 -F raw -b "$base" "$overlay"
  log "reimaged $name"
}

# --- wait-ssh ----------------------------------------------------------------------------

cmd_wait_ssh() {
  local port=$1 timeout=${2:-300} dir=${3:-$DEFAULT_DIR}
  local kh start
  kh=$(mktemp)
  echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$dir/ssh_host_ed25519_key.pub")" >"$kh"
  start=$(date +%s.%N)
  elapsed() { awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
  while :; do
    # slirp accepts on the host side at once and then retries its SYN to the guest with
    # backoff (1, 2, 4 s...), so an attempt made while the guest is down connects seconds
    # after sshd is up. ConnectTimeout (which also bounds the banner wait) drops such an
    # attempt early so a fresh one gets a fresh SYN; timeout bounds the rest.
    if timeout 20 ssh -q -i "$dir/id_ed25519" -o IdentitiesOnly=yes -o BatchMode=yes \
      -o UserKnownHostsFile="$kh" -o StrictHostKeyChecking=yes -o ConnectTimeout=2 \
      -p "$port" root@127.0.0.1 true </dev/null 2>/dev/null; then
      break
    fi
    if awk -v e="$(elapsed)" -v t="$timeout" 'BEGIN { exit !(e > t) }'; then
      log "ssh on port $port not up after ${timeout}s"
      rm -f "$kh"
      return 1
    fi
    sleep 0.2
  done
  rm -f "$kh"
  elapsed
  echo
}

usage() { sed -n '7,12p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

case ${1:-} in
  build) shift; (($# <= 1)) || usage; cmd_build "$@" ;;
  define) shift; (($# >= 3 && $# <= 4)) || usage; cmd_define "$@" ;;
  undefine) shift; (($# >= 1 && $# <= 2)) || usage; cmd_undefine "$@" ;;
  reimage) shift; (($# >= 1 && $# <= 2)) || usage; cmd_reimage "$@" ;;
  wait-ssh) shift; (($# >= 1 && $# <= 3)) || usage; cmd_wait_ssh "$@" ;;
  *) usage ;;
esac
