#!/usr/bin/env bash
# Packs what the load benchmark needs on a machine that has none of it (no apt, no internet:
# the 16-core device machine), into one folder to carry there:
#
#   bench/device_bundle.sh [--bin PATH] [--baseline PATH] DIR
#   # there:  DIR/bench/device.sh [--projects N --files N] [-- load.py options]
#
# DIR/pack.tar.gz   bin/ (wheelforge, nginx, wrk, perf; wheelforge without debug information
#                   but with its symbol table, for perf), lib/ (every shared library ldd names
#                   for them, glibc and its dynamic loader included: the programs run through
#                   this loader, whatever the machine's own glibc), cmd/ (wrappers on PATH that
#                   start them through it), etc/mime.types (nginx's)
# DIR/bench/        the scripts: device.sh, load.py, bench.py, gen_corpus.py, static_tree.py,
#                   nginx.conf.in
# DIR/commit        the commit the binary was built from
#
# --bin: the wheelforge to measure (default build-release/wheelforge, a Release build);
# --baseline: a second wheelforge binary carried as bin/wheelforge-base, for before/after runs
# (load.py --variant 'base=BIN:.../wheelforge-base').
# nginx, wrk and perf are this machine's (apt-get install nginx wrk linux-perf).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/build-release/wheelforge
baseline=
while [ $# -gt 1 ]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --baseline) baseline=$2; shift 2 ;;
    *) break ;;
  esac
done
[ $# -eq 1 ] || { echo "usage: $0 [--bin PATH] [--baseline PATH] DIR" >&2; exit 2; }
dir=$1
[ -x "$bin" ] || { echo "device_bundle.sh: no wheelforge binary at $bin" >&2; exit 1; }

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/cmd" "$stage/etc"

programs=("wheelforge=$bin" "nginx=$(command -v nginx || echo /usr/sbin/nginx)" "wrk=$(command -v wrk)")
# Debian's /usr/bin/perf is a wrapper script that picks perf_<kernel>: take the real binary.
perf_bin=$(ls /usr/bin/perf_* 2>/dev/null | head -1 || true)
[ -n "$perf_bin" ] || perf_bin=$(command -v perf || true)
[ -n "$perf_bin" ] && programs+=("perf=$perf_bin")
[ -n "$baseline" ] && programs+=("wheelforge-base=$baseline")

for entry in "${programs[@]}"; do
  name=${entry%%=*}
  path=${entry#*=}
  [ -x "$path" ] || { echo "device_bundle.sh: $name not found ($path)" >&2; exit 1; }
  cp -L "$path" "$stage/bin/$name"
  case "$name" in wheelforge*) strip --strip-debug "$stage/bin/$name" ;; esac
  # "name => /path (address)" and "/path/ld-linux... (address)" lines of ldd.
  ldd "$path" | while read -r first second third _; do
    if [ "$second" = "=>" ]; then p=$third; else p=$first; fi
    case "$p" in /*) cp -L "$p" "$stage/lib/$(basename "$p")" ;; esac
  done
  cat >"$stage/cmd/$name" <<EOF
#!/bin/sh
# $name through the bundle's own dynamic loader and libraries (bench/device_bundle.sh).
here=\$(cd "\$(dirname "\$0")/.." && pwd)
exec "\$here/lib/ld-linux-x86-64.so.2" --library-path "\$here/lib" "\$here/bin/$name" "\$@"
EOF
  chmod +x "$stage/cmd/$name"
done
[ -e "$stage/lib/ld-linux-x86-64.so.2" ] || { echo "device_bundle.sh: ldd named no x86-64 loader" >&2; exit 1; }
cp /etc/nginx/mime.types "$stage/etc/mime.types"

rm -rf "$dir"
mkdir -p "$dir/bench"
tar -C "$stage" -czf "$dir/pack.tar.gz" .
for f in device.sh load.py bench.py gen_corpus.py static_tree.py nginx.conf.in; do
  cp "$root/bench/$f" "$dir/bench/$f"
done
git -C "$root" rev-parse HEAD >"$dir/commit" 2>/dev/null || echo unknown >"$dir/commit"
git -C "$root" diff --quiet HEAD 2>/dev/null || echo "(with uncommitted changes)" >>"$dir/commit"
echo "bundle: $dir ($(du -sh "$dir" | cut -f1), pack $(du -h "$dir/pack.tar.gz" | cut -f1))"
