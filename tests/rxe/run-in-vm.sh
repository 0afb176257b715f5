#!/usr/bin/env bash
# run-in-vm.sh — boot Debian's stock kernel under qemu (TCG) with soft-RoCE
# (rdma_rxe on the loopback device) and run one command from the host's
# build tree inside it. This is where weft's verbs backend meets a real verbs
# stack: librxe (rdma-core) drives the kernel's rxe exactly as libmlx5 drives
# a ConnectX, so the same binaries run unchanged on a real fabric.
#
#   tests/rxe/run-in-vm.sh BUILD_DIR SCRIPT [ARGS...]
#
# SCRIPT runs as `bash SCRIPT ARGS...` inside the guest, with the working
# directory BUILD_DIR, the host's root filesystem visible read-only (under a
# throw-away overlay) and BUILD_DIR itself shared read-write at the same path.
# The guest's exit status is SCRIPT's. How the VM is made:
#   * kernel: linux-image-6.1.0-*-amd64 (not -cloud-, which lacks rdma_rxe),
#     fetched with `apt-get download` into BUILD_DIR/rxe-vm and unpacked with
#     dpkg-deb; its modules are uncompressed, so busybox insmod loads them;
#   * initramfs: busybox-static plus those modules; it mounts the host root
#     over 9p, switches into it and runs `rdma link add rxe0 type rxe netdev lo`;
#   * exit: SCRIPT's status is written to BUILD_DIR/rxe-vm/status, then the
#     guest reboots, which -no-reboot turns into qemu exiting. A guest that
#     hangs or panics leaves no status: that is a failure, never a pass.
# Without the kernel package (no apt access): in CI (CI=true) a loud failure;
# elsewhere exit 77 with a message saying so (ctest/.ci/run treat 77 as skip).
set -euo pipefail

if [ $# -lt 2 ]; then
  echo "usage: $0 BUILD_DIR SCRIPT [ARGS...]" >&2
  exit 2
fi
BUILD_DIR=$(cd "$1" && pwd)
SCRIPT=$(realpath "$2")
shift 2
VM_TIMEOUT=${WEFT_VM_TIMEOUT:-900}
VM_MEM=${WEFT_VM_MEM:-6G}
WORK=$BUILD_DIR/rxe-vm
CACHE=${WEFT_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/weft-rxe-vm}
mkdir -p "$WORK" "$CACHE"

skip_or_fail() {
  if [ "${CI:-}" = true ]; then
    echo "rxe VM lane: FAILED: $*" >&2
    exit 1
  fi
  echo "rxe VM lane: SKIPPED: $* (set CI=true to make this an error)" >&2
  exit 77
}

for tool in qemu-system-x86_64 busybox dpkg-deb apt-get; do
  command -v "$tool" >/dev/null || skip_or_fail "$tool not installed (scripts/install-deps.sh installs it)"
done
[ -x /bin/busybox ] && file_is_static=$(ldd /bin/busybox 2>&1 | grep -c 'not a dynamic' || true)
[ "${file_is_static:-0}" = 1 ] || skip_or_fail "/bin/busybox is not busybox-static"

# ------------------------------------------------------------- the kernel
KPKG=${WEFT_VM_KERNEL_PKG:-}
if [ -z "$KPKG" ]; then
  # The metapackage names the current 6.1 kernel.
  KPKG=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-6\.[0-9.]+-[0-9]+-amd64$/{print $2; exit}')
fi
[ -n "$KPKG" ] || skip_or_fail "apt knows no linux-image-amd64 (run apt-get update)"
KDIR=$CACHE/$KPKG
if [ ! -f "$KDIR/.unpacked" ]; then
  rm -rf "$KDIR" && mkdir -p "$KDIR"
  echo "rxe VM: fetching $KPKG with apt-get download" >&2
  # apt drops to the _apt user when it can; the work dir may not be its.
  if ! (cd "$KDIR" && apt-get download -q "$KPKG" >/dev/null 2>"$KDIR/apt.log"); then
    cat "$KDIR/apt.log" >&2
    skip_or_fail "apt-get download $KPKG failed"
  fi
  dpkg-deb -x "$KDIR"/*.deb "$KDIR/root"
  rm -f "$KDIR"/*.deb
  touch "$KDIR/.unpacked"
fi
KVER=$(ls "$KDIR/root/lib/modules")
VMLINUZ=$KDIR/root/boot/vmlinuz-$KVER
[ -f "$VMLINUZ" ] || skip_or_fail "no vmlinuz in $KPKG"

# ----------------------------------------------------------- initramfs
# Load order matters (no modprobe, no depmod in the initramfs). crc32_generic
# must be loaded by hand: rdma_rxe needs crc32 and nothing pulls it in.
MODULES="virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci
netfs fscache 9pnet 9pnet_virtio 9p overlay
crc32_generic ib_core ib_uverbs udp_tunnel ip6_udp_tunnel rdma_rxe
ib_cm iw_cm configfs rdma_cm rdma_ucm dummy"
INITRD=$CACHE/initramfs-$KVER.cpio
if [ ! -f "$INITRD" ] || [ "$0" -nt "$INITRD" ]; then
  IR=$CACHE/initramfs
  rm -rf "$IR" && mkdir -p "$IR"/{bin,dev,proc,sys,mnt,host,newroot,upper,modules}
  cp /bin/busybox "$IR/bin/busybox"
  for m in $MODULES; do
    f=$(find "$KDIR/root/lib/modules/$KVER" -name "$m.ko" | head -n1)
    if [ -n "$f" ]; then cp "$f" "$IR/modules/"; echo "$m" >>"$IR/modules/order"; fi
  done
  cat >"$IR/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
die() { echo "rxe VM init: $*"; echo 1 >/proc/sys/kernel/sysrq; echo b >/proc/sysrq-trigger; }
for m in $(cat /modules/order); do insmod /modules/$m.ko || die "insmod $m failed"; done
BUILD=$(sed -n 's/.*weft_build=\([^ ]*\).*/\1/p' /proc/cmdline)
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144 hostroot /host || die "9p host root"
mount -t tmpfs -o size=2g tmpfs /upper || die "tmpfs"
mkdir -p /upper/u /upper/w
mount -t overlay overlay -o lowerdir=/host,upperdir=/upper/u,workdir=/upper/w /newroot || die "overlay"
mount -t proc proc /newroot/proc
mount -t sysfs sys /newroot/sys
mount -t devtmpfs dev /newroot/dev
mkdir -p /newroot/dev/shm /newroot/dev/pts
mount -t tmpfs -o mode=1777 shm /newroot/dev/shm
# /tmp stays the overlay's (the host's, writable in the guest's tmpfs
# upper layer): CI clones the sources under /tmp, and the guest needs them.
mkdir -p /newroot$BUILD
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=none build /newroot$BUILD || die "9p build dir"
ip link set lo up
chroot /newroot /bin/sh -c "rdma link add rxe0 type rxe netdev lo" || die "rdma link add"
chroot /newroot /bin/bash -c "cd $BUILD && . rxe-vm/env && bash rxe-vm/cmd.sh" </dev/console >/dev/console 2>&1
echo $? >/newroot$BUILD/rxe-vm/status
sync
echo 1 >/proc/sys/kernel/sysrq
echo b >/proc/sysrq-trigger
INIT
  chmod +x "$IR/init"
  (cd "$IR" && find . | busybox cpio -o -H newc 2>/dev/null) >"$INITRD.tmp"
  mv "$INITRD.tmp" "$INITRD"
fi

# -------------------------------------------------------------- the run
# The command, and the environment it needs (what CI set, plus PATH).
{
  printf 'bash %q' "$SCRIPT"
  printf ' %q' "$@"
  printf '\n'
} >"$WORK/cmd.sh"
{
  printf 'export PATH=%q HOME=/root CI=%q\n' "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" "${CI:-}"
  for v in $(compgen -e | grep -E '^(WEFT_|UCX_|GTEST_)' || true); do printf 'export %s=%q\n' "$v" "${!v}"; done
} >"$WORK/env"
rm -f "$WORK/status"

echo "rxe VM: booting $KVER (TCG, 2 vCPUs, $VM_MEM) to run: $SCRIPT $*" >&2
t0=$(date +%s)
set +e
timeout --foreground -k 10 "$VM_TIMEOUT" qemu-system-x86_64 -accel tcg,thread=multi -cpu max -smp 2 -m "$VM_MEM" \
  -nographic -nic none -no-reboot -monitor none -serial stdio \
  -kernel "$VMLINUZ" -initrd "$INITRD" \
  -append "console=ttyS0 quiet loglevel=3 panic=-1 weft_build=$BUILD_DIR" \
  -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
  -virtfs local,path="$BUILD_DIR",mount_tag=build,security_model=none,multidevs=remap \
  </dev/null
qrc=$?
set -e
t1=$(date +%s)
if [ ! -f "$WORK/status" ]; then
  echo "rxe VM lane: FAILED: the guest left no exit status (qemu status $qrc after $((t1 - t0)) s: timeout, panic or init failure)" >&2
  exit 1
fi
rc=$(cat "$WORK/status")
echo "rxe VM: guest command exited $rc after $((t1 - t0)) s" >&2
exit "$rc"
