#!/usr/bin/env bash
# Runs one of the README's two commands (`make test` by default, or `make demo`) on a fresh Debian 12
# machine: a bare root made by debootstrap (minbase, plus `make`), with a clean clone of this
# repository's HEAD in it and nothing from this machine's /usr. It is the proof that the set-up
# installs everything the build, the tests and the demo need; run it before submitting any change
# to scripts/setup.sh, a CMakeLists.txt or a dependency.
#
#   scripts/fresh-machine-check.sh [test|demo|gpu-bundle]      (as root; `make fresh-check` runs `test`)
#
# `gpu-bundle` proves instead that the bundle of `make gpu-bundle` is complete: in the bare root,
# with nothing installed, scripts/gpu-check.sh unpacks it and runs its parts that need no Python
# (probe, cuda, vulkan, fashion, cpu). CUDA has no driver and no cuBLAS there, Vulkan no driver;
# every test program must still pass.
#
# The bare root is made once and cached as build/fresh-machine/bookworm-minbase.tar; every run
# unpacks a new copy of it, so a run never sees what an earlier run installed.
set -euo pipefail

target=${1:-test}
case "$target" in test | demo | gpu-bundle) ;; *) echo "usage: $0 [test|demo|gpu-bundle]" >&2; exit 2 ;; esac
if [ "$target" = gpu-bundle ] && [ ! -f "$(dirname "$0")/../gpu-bundle/fluxion-gpu.tar.xz" ]; then
  echo "fresh-machine-check: no gpu-bundle/fluxion-gpu.tar.xz (make gpu-bundle)" >&2; exit 1
fi
[ "$(id -u)" -eq 0 ] || { echo "fresh-machine-check: run as root (debootstrap and chroot need it)" >&2; exit 1; }

repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
cache=$repo/build/fresh-machine
bare=$cache/bookworm-minbase.tar
root=$cache/root
log=$cache/make-$target.log
mirror=${FLUXION_DEBIAN_MIRROR:-http://deb.debian.org/debian}
mkdir -p "$cache"

command -v debootstrap >/dev/null || {
  echo "fresh-machine-check: installing debootstrap"
  apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
}

# Unmounts everything under the root, then removes it without crossing into a file system that is
# still mounted there (a bind mount of /dev left behind must never be deleted through).
cleanup() {
  for m in dev sys proc; do
    if mountpoint -q "$root/$m"; then umount -R "$root/$m" || umount -lR "$root/$m"; fi
  done
  if [ -d "$root" ]; then rm -rf --one-file-system "$root"; fi
}
trap cleanup EXIT
cleanup

if [ ! -f "$bare" ]; then
  echo "fresh-machine-check: making a bare Debian 12 root with debootstrap (once; cached in $bare)"
  staging=$cache/bare
  rm -rf --one-file-system "$staging"
  start=$(date +%s)
  debootstrap --variant=minbase --include=make bookworm "$staging" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
    { tail -20 "$cache/debootstrap.log"; exit 1; }
  tar -C "$staging" -cf "$bare.part" . && mv "$bare.part" "$bare"
  rm -rf --one-file-system "$staging"
  echo "fresh-machine-check: bare root made in $(($(date +%s) - start)) s"
fi

mkdir -p "$root"
tar -C "$root" -xf "$bare"
# What a fresh Debian 12 machine has: the release, its updates and security suites, and name
# resolution. Nothing else comes from this machine.
cat >"$root/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
cp /etc/resolv.conf "$root/etc/resolv.conf"
git clone -q --no-local "$repo" "$root/root/fluxion"
echo "fresh-machine-check: HEAD $(git -C "$root/root/fluxion" log -1 --format='%h %s')"

mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
mount --rbind /dev "$root/dev"
mount --make-rslave "$root/dev"  # unmounting it later must not propagate to this machine's /dev

command="make $target"
if [ "$target" = gpu-bundle ]; then
  cp -r "$repo/gpu-bundle" "$root/root/fluxion/"
  command="OUT=/root/gpu-check-out FASHION_DEVICE=CPU bash scripts/gpu-check.sh probe cuda vulkan fashion cpu"
fi
echo "fresh-machine-check: running '$command' in the fresh root (log: $log)"
start=$(date +%s)
set +e
chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  bash -c "cd /root/fluxion && $command" >"$log" 2>&1
status=$?
set -e
elapsed=$(($(date +%s) - start))

echo "fresh-machine-check: '$command' exited with $status after $((elapsed / 60)) min $((elapsed % 60)) s"
if [ "$target" = gpu-bundle ]; then
  cat "$log"
  grep -h -A3 "default device" "$root/root/gpu-check-out/probe.log" || true
  # Every part ran, and every test program passed.
  if [ $status -ne 0 ] || grep -q "failed=[1-9]" "$log" || grep -E "^(probe|cuda|vulkan|fashion|cpu): rc=[1-9]" "$log"; then
    for f in "$root"/root/gpu-check-out/*.log; do echo "--- $f"; grep -E "^===.*rc=[1-9]|FAILED|error" "$f" | head -20 || true; done
    echo "fresh-machine-check: the bundle failed in the bare root" >&2
    exit 1
  fi
  echo "fresh-machine-check: passed"
  exit 0
fi
grep -E "^-- fluxion:|^setup: installing" "$log" | cut -c1-200 || true
if [ "$target" = test ]; then
  grep -E "tests passed|tests failed|Total Test time" "$log" || true
else
  grep -E "^device:|^final test accuracy" "$log" || true
fi
if [ $status -ne 0 ]; then
  echo "--- last lines of $log:"
  tail -40 "$log"
  exit $status
fi
# The toolkit is not in the fresh root, so the CUDA plugin must be skipped with the reason.
grep -q "fluxion: nvcc not found, the CUDA backend plugin is not built" "$log" ||
  { echo "fresh-machine-check: the configure output does not say why the CUDA plugin was skipped" >&2; exit 1; }
echo "fresh-machine-check: passed"
