#!/usr/bin/env bash
# Packs a Release build of wheelforge and the shared libraries it needs into one directory, for
# a machine that has none of wheelforge's build dependencies (libarchive, spdlog, toml++,
# SQLite, OpenSSL, ...), such as the GPU machine of gpu_proof.sh:
#
#   tests/gpu/bundle.sh [DIR]        # default DIR: .gpu-bundle in the repository root
#   WHEELFORGE_BIN=DIR/wheelforge tests/gpu/gpu_proof.sh
#
# DIR/bin/wheelforge    the binary (built with -DCMAKE_BUILD_TYPE=Release into build-release/,
#                       or the one WHEELFORGE_BUILD names)
# DIR/lib/              every library ldd resolves for it except glibc's own (libc, libm,
#                       libpthread, libdl, librt, the dynamic loader, ...): those of the target
#                       are used, unless it is older than the binary needs (below)
# DIR/glibc/            glibc's libraries and dynamic loader of this machine, used only when the
#                       target's glibc is older than DIR/glibc-floor (the highest GLIBC_ version
#                       the binary and DIR/lib need)
# DIR/ccache/ccache     this machine's ccache (when installed) for the compile cache, with the
#                       libraries it needs beyond glibc and libstdc++ in DIR/ccache/lib, run
#                       through the target's dynamic loader (so that the compilers it starts do
#                       not inherit the library path); gpu_proof.sh links it into /usr/local/bin
#                       where the target has none
# DIR/wheelforge        the wrapper to run: puts DIR/lib on LD_LIBRARY_PATH (build commands do
#                       not inherit it: the runner gives them a minimal environment), or starts
#                       the binary through DIR/glibc's loader when the target's glibc is too old
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
bundle=${1:-$root/.gpu-bundle}
binary=${WHEELFORGE_BUILD:-}
if [ -z "$binary" ]; then
  cmake -S "$root" -B "$root/build-release" -DCMAKE_BUILD_TYPE=Release -DWF_BUILD_TESTS=OFF >/dev/null
  cmake --build "$root/build-release" -j"$(nproc)" --target wheelforge >/dev/null
  binary=$root/build-release/wheelforge
fi
[ -x "$binary" ] || { echo "bundle.sh: no wheelforge binary at $binary" >&2; exit 1; }

rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/glibc"
cp "$binary" "$bundle/bin/wheelforge"
strip --strip-unneeded "$bundle/bin/wheelforge" 2>/dev/null || true

# glibc's own libraries: the target's are used, they must match its dynamic loader.
is_glibc() {
  case "$1" in
    ld-linux*.so.* | ld64.so.* | libc.so.* | libm.so.* | libmvec.so.* | libpthread.so.* | \
      libdl.so.* | librt.so.* | libresolv.so.* | libutil.so.* | libanl.so.* | libnsl.so.* | \
      libBrokenLocale.so.* | libthread_db.so.* | libc_malloc_debug.so.*) return 0 ;;
  esac
  return 1
}

# "name => /path (address)" and "/path/ld-linux... (address)" lines of ldd.
ldd "$binary" | while read -r first second third _; do
  if [ "$second" = "=>" ]; then path=$third; else path=$first; fi
  case "$path" in /*) ;; *) continue ;; esac
  name=$(basename "$path")
  if is_glibc "$name"; then
    cp -L "$path" "$bundle/glibc/$name"
  else
    cp -L "$path" "$bundle/lib/$name"
  fi
done
loader=
for candidate in "$bundle"/glibc/ld-linux*.so.* "$bundle"/glibc/ld64.so.*; do
  if [ -e "$candidate" ]; then loader=$(basename "$candidate"); break; fi
done
[ -n "$loader" ] || { echo "bundle.sh: ldd named no dynamic loader" >&2; exit 1; }

# The highest GLIBC_x.y the binary and the bundled libraries need.
floor=$(for f in "$bundle/bin/wheelforge" "$bundle"/lib/*; do objdump -T "$f"; done |
  grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1)
echo "$floor" >"$bundle/glibc-floor"

cat >"$bundle/wheelforge" <<EOF
#!/bin/sh
# Runs the bundled wheelforge (see tests/gpu/bundle.sh).
here=\$(cd "\$(dirname "\$0")" && pwd)
need=\$(cat "\$here/glibc-floor")
have=\$(getconf GNU_LIBC_VERSION 2>/dev/null | sed 's/^glibc //')
oldest=\$(printf '%s\n%s\n' "\$need" "\${have:-0}" | sort -V | head -1)
if [ -n "\$have" ] && [ "\$oldest" = "\$need" ]; then
  LD_LIBRARY_PATH="\$here/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "\$here/bin/wheelforge" "\$@"
fi
# This system's glibc (\${have:-unknown}) is older than the \$need the binary needs: bring ours.
exec "\$here/glibc/$loader" --library-path "\$here/lib:\$here/glibc" "\$here/bin/wheelforge" "\$@"
EOF
chmod +x "$bundle/wheelforge"

# ccache for the compile cache: the binary, its libraries other than glibc's, libstdc++ and
# libgcc (the target's are newer or the same), and a wrapper that runs it through the loader.
if ccache_bin=$(command -v ccache); then
  mkdir -p "$bundle/ccache/bin" "$bundle/ccache/lib"
  cp -L "$ccache_bin" "$bundle/ccache/bin/ccache"
  ldd "$ccache_bin" | while read -r first second third _; do
    [ "$second" = "=>" ] || continue
    name=$(basename "$third")
    case "$name" in libstdc++.so.* | libgcc_s.so.*) continue ;; esac
    is_glibc "$name" || cp -L "$third" "$bundle/ccache/lib/$name"
  done
  cat >"$bundle/ccache/ccache" <<'EOF2'
#!/bin/sh
# Runs the bundled ccache (see tests/gpu/bundle.sh) with its own libraries, through the
# system's dynamic loader: the library path is not passed on to the compilers it runs.
here=$(dirname "$(readlink -f "$0")")
exec /lib64/ld-linux-x86-64.so.2 --library-path "$here/lib" "$here/bin/ccache" "$@"
EOF2
  chmod +x "$bundle/ccache/ccache"
  "$bundle/ccache/ccache" --version | head -1
fi

echo "bundle: $bundle ($(du -sh "$bundle" | cut -f1)); needs glibc $floor or its own copy"
"$bundle/wheelforge" --version >/dev/null 2>&1 || "$bundle/wheelforge" --help >/dev/null
echo "run it as: WHEELFORGE_BIN=$bundle/wheelforge tests/gpu/gpu_proof.sh"
