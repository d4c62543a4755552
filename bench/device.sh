#!/usr/bin/env bash
# The load benchmark on a machine without apt or internet (the 16-core device machine), from a
# folder made by bench/device_bundle.sh:
#
#   DIR/bench/device.sh [--projects N] [--files N] [--cpus LIST] [-- load.py options]
#
# Unpacks the programs (wheelforge, nginx, wrk, perf, run through their own loader), generates
# the large corpus (N projects, N wheels; default 2,000 and 20,000) and the flash-attn variant
# project, builds nginx's static tree of them, then runs load.py: ingest, wheelforge and nginx
# with one network thread / worker per core, wrk against both taking turns. Results go to $OUT
# (or $BENCH_WORK/out): results.md, results.json, perf reports when asked for. Needs python3.
# --cpus LIST (taskset's list, e.g. 0,1) runs the load part, servers and wrk, on those CPUs only
# (the corpus is generated on all): the 2-core figures on a many-core machine.
set -euo pipefail

dir=$(cd "$(dirname "$0")/.." && pwd)
work=${BENCH_WORK:-/tmp/wf-bench}
out=${OUT:-$work/out}
projects=2000
files=20000
cpus=
while [ $# -gt 0 ]; do
  case "$1" in
    --projects) projects=$2; shift 2 ;;
    --files) files=$2; shift 2 ;;
    --cpus) cpus=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "usage: $0 [--projects N] [--files N] [--cpus LIST] [-- load.py options]" >&2; exit 2 ;;
  esac
done

t0=$(date +%s)
mkdir -p "$work/pack" "$out"
tar -xzf "$dir/pack.tar.gz" -C "$work/pack"
export PATH=$work/pack/cmd:$PATH
# nginx.conf.in includes /etc/nginx/mime.types, and nginx opens its built-in error log path
# before it reads the configuration.
if [ ! -e /etc/nginx/mime.types ]; then
  mkdir -p /etc/nginx && cp "$work/pack/etc/mime.types" /etc/nginx/mime.types
fi
mkdir -p /var/log/nginx 2>/dev/null || true
ulimit -n 65536 2>/dev/null || true
echo "==> $(nproc) CPUs, $(uname -r), python $(python3 -c 'import sys; print(sys.version.split()[0])')," \
  "$(nginx -v 2>&1), $(wrk -v 2>&1 | head -1)"

echo "==> corpus: $projects projects, $files wheels, and flash-attn (400 wheels)"
python3 "$dir/bench/gen_corpus.py" --out "$work/corpus" --only large variant \
  --large-projects "$projects" --large-files "$files"
python3 "$dir/bench/static_tree.py" --out "$work/static/large" "$work/corpus/large" "$work/corpus/variant"
echo "==> corpus and static tree ready after $(($(date +%s) - t0)) s"

pin=()
if [ -n "$cpus" ]; then
  pin=(taskset -c "$cpus")
  echo "==> the load part runs on CPUs $cpus only"
fi
BENCH_COMMIT=$(head -1 "$dir/commit") exec "${pin[@]}" python3 "$dir/bench/load.py" \
  --bin "$work/pack/cmd/wheelforge" --work "$work" --out "$out" "$@"
