#!/usr/bin/env bash
# The wheelforge benchmark suite, one command on a fresh Debian 12 machine:
#
#   bench/run.sh [--bin PATH] [--smoke] [-- extra bench.py options]
#
# Installs what is missing with apt-get (nginx, wrk, Google Benchmark, the build dependencies),
# builds the micro-benchmarks (and the server when PATH does not exist) in build-bench/,
# generates the corpora and the static trees under bench/.work/ (kept between runs), then runs
# bench/bench.py: wrk against wheelforge and nginx, downloads, upload, startup, memory, pip,
# micro-benchmarks; then bench/upstream.py: the upstream proxy (a merged page and a cached upstream
# file against nginx, RSS after many distinct upstream projects); then bench/backends.py
# (PostgreSQL + S3 against SQLite + files) and bench/replicas.py (three replicas on one
# PostgreSQL catalog behind haproxy: reads against nginx, uploads, the change feed's lag).
# Prints markdown reports, also
# written to bench/.work/results.md and upstream.md (the raw numbers to results.json and
# upstream.json).
#
# --smoke runs every step of the suite on small corpora (3,000 files in the "large" one, a 16 MiB
# big wheel) for 1 s per case at 32 connections, in bench/.work-smoke/, and exits 1 when any
# step failed (a response that is not 200, errors under load, a refused upload, pip resolving
# differently on the two servers, RSS beyond the memory bound of upstream.py). CI runs it; its
# timings mean nothing.
#
# Environment: WF_BIN (server binary, default build/wheelforge), BENCH_JOBS (build parallelism,
# default nproc), BENCH_NOTE (text recorded with the results), BENCH_BUILD_DIR (where the
# micro-benchmarks are built, default build-bench/; an existing build keeps its settings).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
bin=${WF_BIN:-$root/build/wheelforge}
jobs=${BENCH_JOBS:-$(nproc)}
build_dir=${BENCH_BUILD_DIR:-$root/build-bench}
work=$here/.work
smoke=0
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --smoke) smoke=1; work=$here/.work-smoke; shift ;;
    --) shift; extra=("$@"); break ;;
    *) echo "usage: $0 [--bin PATH] [--smoke] [-- bench.py options]" >&2; exit 2 ;;
  esac
done
corpus_opts=()
bench_opts=()
note=${BENCH_NOTE:-}
if [ "$smoke" = 1 ]; then
  note=${note:-"smoke run: small corpora, 1 s per case; the timings mean nothing"}
  corpus_opts=(--large-projects 300 --large-files 3000 --big-mib 16)
  bench_opts=(--duration 1 --rounds 1 --conns 32 --pip-runs 1 --download-runs 1 --micro-min-time 0.01
              --strict)
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
packages=(
  nginx wrk libbenchmark-dev curl python3 python3-venv
  build-essential cmake pkg-config
  libboost-dev libssl-dev libarchive-dev libsqlite3-dev zlib1g-dev
  nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev libtomlplusplus-dev
  libkainjow-mustache-dev libcmark-dev libpq-dev
  # backends.py, replicas.py: a throwaway PostgreSQL cluster and OpenStack Swift's S3 API (the
  # test harness's); replicas.py: haproxy in front of the replicas
  haproxy
  postgresql python3-pytest swift swift-proxy swift-object swift-container swift-account
  python3-swift
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "==> installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
  # The Debian package enables and starts a system nginx on port 80; the suite runs its own.
fi

echo "==> building the micro-benchmarks in $build_dir"
targets=(wf_micro_bench)
if [ ! -x "$bin" ]; then
  echo "    ($bin does not exist: building the server there too)"
  targets+=(wheelforge)
  bin=$build_dir/wheelforge
fi
if [ -f "$build_dir/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build_dir" -DWF_BUILD_BENCH=ON >/dev/null
else
  cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DWF_BUILD_TESTS=OFF -DWF_BUILD_BENCH=ON >/dev/null
fi
for t in "${targets[@]}"; do
  nice cmake --build "$build_dir" --target "$t" -j"$jobs"
done

echo "==> corpora and static trees in $work (generated once, then reused)"
nice /usr/bin/python3 "$here/gen_corpus.py" --out "$work/corpus" "${corpus_opts[@]}"
nice /usr/bin/python3 "$here/static_tree.py" --out "$work/static/small" "$work/corpus/small"
nice /usr/bin/python3 "$here/static_tree.py" --out "$work/static/large" \
  "$work/corpus/large" "$work/corpus/variant" "$work/corpus/big"

echo "==> benchmarks ($bin)"
status=0
/usr/bin/python3 "$here/bench.py" --bin "$bin" --work "$work" \
  --micro "$build_dir/bench/wf_micro_bench" --note "$note" "${bench_opts[@]}" "${extra[@]}" || status=$?

echo "==> upstream proxy benchmarks ($bin)"
upstream_opts=()
if [ "$smoke" = 1 ]; then upstream_opts=(--smoke); fi
/usr/bin/python3 "$here/upstream.py" --bin "$bin" --work "$work" --note "$note" "${upstream_opts[@]}" || status=$?

echo "==> catalog and blob store backends: PostgreSQL + S3 against SQLite + files ($bin)"
/usr/bin/python3 "$here/backends.py" --bin "$bin" --work "$work/backends" --note "$note" \
  "${upstream_opts[@]}" || status=$?

echo "==> replicas behind haproxy: reads over 1-3 replicas against nginx, uploads, feed lag ($bin)"
/usr/bin/python3 "$here/replicas.py" --bin "$bin" --work "$work/replicas" --note "$note" \
  "${upstream_opts[@]}" || status=$?
exit "$status"
