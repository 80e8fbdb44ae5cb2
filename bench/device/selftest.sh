#!/bin/bash
# Checks the archive of bench/device/pack.sh on the build machine as if it were
# the bare target: runs bench/device/run.sh with small sizes, each carried
# binary in a mount namespace whose /usr/lib holds only the glibc/GCC runtime
# family (so a library or UCX module missing from the pack fails here, as it
# would there), then checks with LD_DEBUG=libs that every library goldminer's
# processes initialised, dlopen()ed UCX modules included, came from the pack.
# Needs root (unshare -m, mount --bind); the Python side runs unconfined with
# this machine's /usr/bin/python3.
#
# usage: bench/device/selftest.sh   (after bench/device/pack.sh)
# environment: K_SCALING="1 2", K_COMPARE="1 2", ROWS=20000, PYTHON=/usr/bin/python3
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
die() { echo "selftest.sh: $*" >&2; exit 1; }
if [ "$(id -u)" != 0 ] || ! unshare -m true 2>/dev/null; then
  die "needs root and unshare -m (to hide /usr/lib from the carried binaries)"
fi

tmp=$(mktemp -d /tmp/gm-selftest.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# /usr/lib as the target is assumed to have it: the glibc family only. /lib
# and /lib64 are links into /usr on Debian 12, so this hides them as well.
arch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
mkdir -p "$tmp/usr-lib/$arch"
for l in libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1 ld-linux-x86-64.so.2 libstdc++.so.6 libgcc_s.so.1; do
  cp -L "/usr/lib/$arch/$l" "$tmp/usr-lib/$arch/"
done
cat > "$tmp/bare" <<EOF
#!/bin/sh
# Runs "\$@" with $tmp/usr-lib as /usr/lib and no ld.so.cache.
exec unshare -m sh -c 'mount --bind /dev/null /etc/ld.so.cache && mount --bind "\$0" /usr/lib && exec "\$@"' "$tmp/usr-lib" "\$@"
EOF
chmod +x "$tmp/bare"

export GM_DIR=$tmp/gm OUT=$tmp/out GM_EXEC_PREFIX=$tmp/bare
export K_SCALING=${K_SCALING:-"1 2"} K_COMPARE=${K_COMPARE:-"1 2"} ROWS=${ROWS:-20000}
export PYTHON=${PYTHON:-/usr/bin/python3}
t0=$SECONDS
bash "$here/run.sh"
echo "selftest.sh: run.sh took $((SECONDS - t0)) s"

# Which files did goldminer's processes load? (trainer and 2 workers, UCX on)
/usr/bin/python3 "$here/../dataplane/gen_criteo.py" "$tmp/c.tsv" 2000 1
eval "$(grep -E '^(LD_LIBRARY_PATH|UCX_MODULE_DIR)=' "$GM_DIR/build/goldminer-consume")"
"$tmp/bare" env LD_LIBRARY_PATH="$LD_LIBRARY_PATH" UCX_MODULE_DIR="$UCX_MODULE_DIR" UCX_NET_DEVICES=lo \
  LD_DEBUG=libs LD_DEBUG_OUTPUT="$tmp/ld" "$GM_DIR/bin/goldminer-consume" --input "criteo-tsv:$tmp/c.tsv" \
  --program "$GM_DIR/programs/criteo.pt" --batch-size 512 --epochs 1 --workers 2 > /dev/null 2>&1 ||
  die "goldminer-consume failed under LD_DEBUG"
loaded=$(cat "$tmp"/ld.* | sed -n 's/.*calling init: //p' | sort -u)
[ "$(find "$tmp" -maxdepth 1 -name 'ld.*' | wc -l)" -ge 3 ] || die "LD_DEBUG saw fewer than 3 processes (trainer + 2 workers)"
stray=$(echo "$loaded" | grep -v "^$GM_DIR/" |
  grep -vE "/(libc|libm|libdl|libpthread|librt|ld-linux-x86-64|libstdc\+\+|libgcc_s)\.so" || true)
[ -z "$stray" ] || die "loaded from outside the pack: $stray"
for want in libtorch_cpu.so.1.13 libucp.so.0 libboost_program_options libuct_cma.so.0 libdnnl.so.2; do
  echo "$loaded" | grep -q "^$GM_DIR/lib/.*$want" || die "$want was not loaded from $GM_DIR/lib"
done
echo "selftest.sh: $(echo "$loaded" | grep -c "^$GM_DIR/") libraries loaded from the pack, the rest: $(echo "$loaded" | grep -v "^$GM_DIR/" | xargs -n1 basename | tr '\n' ' ')"
echo "selftest.sh: ok"
