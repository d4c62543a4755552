#!/usr/bin/env bash
# GPU proof of stable-ABI wheels (not run in CI): build one torch CUDA extension on torch's
# stable C ABI only (torch/csrc/stable/, TORCH_TARGET_VERSION 2.9, py_limited_api), label it
# with its CUDA alone (+cu130) and bound torch from below (Requires-Dist: torch>=2.9), upload
# it, check what wheelforge's inspection says of its binary (stable-ABI, CUDA 13) and which
# views list it (every series from 2.9 on, not 2.8), then pip-install it from two torch-series
# views into two clean targets and run its kernel on the GPU from each, checking the result
# against torch.
#
# The wheel is built here with `pip wheel` and uploaded with PUT /upload/: the build runner
# labels every cell with its CUDA and torch series (`+cu130torch2.11`), and such a wheel fits
# that one series' view only; a stable-ABI wheel must carry its CUDA alone.
#
# Needs: the wheelforge binary (WHEELFORGE_BIN; default build/wheelforge, else the bundle of
# tests/gpu/bundle.sh in .gpu-bundle/), python3 with torch 2.9 or later (CUDA build) +
# setuptools + wheel + ninja, nvcc under CUDA_HOME (default /usr/local/cuda), curl, nm. Works
# offline (and without unzip): the installs use --no-deps, since the machine's one torch is already there.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
if [ -n "${WHEELFORGE_BIN:-}" ]; then
  bin=$WHEELFORGE_BIN
elif [ -x "$root/build/wheelforge" ]; then
  bin=$root/build/wheelforge
else
  bin=$root/.gpu-bundle/wheelforge # tests/gpu/bundle.sh
fi
echo "wheelforge: $bin ($("$bin" --version))"
python=${PYTHON:-$(command -v python3)}
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
work=${WORK:-$(mktemp -d /tmp/wf-stable-proof.XXXXXX)}
echo "work dir: $work"

torch_version=$("$python" -c 'import torch; print(torch.__version__)')
cuda_version=$("$python" -c 'import torch; print(torch.version.cuda)')
cuda_tag=cu$(echo "$cuda_version" | tr -d .)
cuda_major=${cuda_version%%.*}
arch=$("$python" -c 'import torch; m, n = torch.cuda.get_device_capability(); print(f"{m}.{n}")')
echo "torch $torch_version (CUDA $cuda_version), GPU arch $arch: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
echo "torch series importable on this machine: $("$python" -c 'import torch; print(".".join(torch.__version__.split(".")[:2]))') only (one torch, no network)"

# --- the package: one CUDA kernel, registered as a torch op through the stable ABI -------------
src=$work/src
mkdir -p "$src/wf_stable_demo" "$src/csrc"
cat >"$src/setup.py" <<'PY'
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

# Stable ABI of torch 2.9 on (torch/csrc/stable/version.h), limited API of CPython 3.9 on.
target = ["-DTORCH_TARGET_VERSION=0x0209000000000000", "-DUSE_CUDA"]
setup(
    name="wf-stable-demo",
    version="0.1.0+cu130",
    packages=["wf_stable_demo"],
    install_requires=["torch>=2.9"],
    ext_modules=[
        CUDAExtension(
            "wf_stable_demo._C",
            ["csrc/saxpy.cu", "csrc/module.cpp"],
            py_limited_api=True,
            extra_compile_args={"cxx": target + ["-DPy_LIMITED_API=0x03090000"], "nvcc": target},
        )
    ],
    cmdclass={"build_ext": BuildExtension},
    options={"bdist_wheel": {"py_limited_api": "cp39"}},
)
PY
cat >"$src/wf_stable_demo/__init__.py" <<'PY'
import torch

from . import _C  # noqa: F401  (loading it registers torch.ops.wf_stable_demo)


def saxpy(a: float, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.ops.wf_stable_demo.saxpy(a, x, y)
PY
# A module with nothing in it: importing it loads the library, whose static initialisers
# register the op. Only CPython's limited API.
cat >"$src/csrc/module.cpp" <<'CPP'
#include <Python.h>

PyMODINIT_FUNC PyInit__C(void) {
  static PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr,
                               nullptr,               nullptr, nullptr, nullptr};
  return PyModule_Create(&module);
}
CPP
cat >"$src/csrc/saxpy.cu" <<'CU'
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include <cuda_runtime.h>

using torch::stable::Tensor;

__global__ void saxpy_kernel(float a, const float* x, const float* y, float* out, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}

Tensor saxpy(double a, Tensor x, Tensor y) {
  STD_TORCH_CHECK(x.is_cuda() && y.is_cuda(), "x and y must be CUDA tensors");
  STD_TORCH_CHECK(x.scalar_type() == torch::headeronly::ScalarType::Float &&
                      y.scalar_type() == torch::headeronly::ScalarType::Float,
                  "float32 only");
  STD_TORCH_CHECK(x.is_contiguous() && y.is_contiguous() && x.numel() == y.numel(),
                  "contiguous tensors of one size only");
  Tensor out = torch::stable::empty_like(x);
  const int64_t n = x.numel();
  void* stream = nullptr;
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_current_cuda_stream(x.get_device(), &stream));
  const int threads = 256;
  const int64_t blocks = (n + threads - 1) / threads;
  saxpy_kernel<<<blocks, threads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<float>(a), static_cast<const float*>(x.data_ptr()),
      static_cast<const float*>(y.data_ptr()), static_cast<float*>(out.data_ptr()), n);
  const cudaError_t err = cudaGetLastError();
  STD_TORCH_CHECK(err == cudaSuccess, "saxpy kernel: ", cudaGetErrorString(err));
  return out;
}

STABLE_TORCH_LIBRARY(wf_stable_demo, m) { m.def("saxpy(float a, Tensor x, Tensor y) -> Tensor"); }

STABLE_TORCH_LIBRARY_IMPL(wf_stable_demo, CUDA, m) { m.impl("saxpy", TORCH_BOX(&saxpy)); }
CU

echo "--- pip wheel (TORCH_TARGET_VERSION 2.9, py_limited_api cp39) ---"
start=$(date +%s.%N)
(cd "$src" && TORCH_CUDA_ARCH_LIST=$arch MAX_JOBS=4 "$python" -m pip wheel --no-build-isolation \
  --no-deps --no-cache-dir --disable-pip-version-check -w "$work/dist" . 2>&1 | tail -3)
end=$(date +%s.%N)
wheel=$(ls "$work/dist"/*.whl)
echo "built $(basename "$wheel") in $("$python" -c "print(round($end - $start, 1))") s"
"$python" -m zipfile -e "$wheel" "$work/unpacked"
grep -E '^(Version|Requires-Dist):' "$work"/unpacked/*.dist-info/METADATA
so=$(find "$work/unpacked" -name '_C*.so')
echo "what the binary imports of torch and CUDA (nm -D --undefined-only, torch's C functions and C++ namespaces):"
nm -D --undefined-only "$so" | awk '{print $2}' | grep -E '^(aoti_torch_|torch_|_Z[^ ]*(3c10|2at|5torch))|^cuda' | sed 's/^/  /' || true
echo "NEEDED: $(readelf -d "$so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')"

# --- wheelforge, the upload and what its inspection says ---------------------------------------
data=$work/data
upload=$("$bin" token create --data-dir "$data" --scope upload 2>/dev/null | tail -n1)
"$bin" serve --data-dir "$data" --listen 127.0.0.1:0 >"$work/serve.out" 2>"$work/serve.log" &
server=$!
trap 'kill $server 2>/dev/null || true; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 50); do grep -q listening "$work/serve.out" && break; sleep 0.1; done
url=$(sed 's/^listening on //' "$work/serve.out")
echo "wheelforge: $url"

echo "--- PUT /upload/$(basename "$wheel") ---"
curl -sS -f -u "__token__:$upload" -T "$wheel" "$url/upload/" | tee "$work/upload.json"
sha=$("$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["sha256"])' "$work/upload.json")

curl -sS -f "$url/api/files/$sha/contents" >"$work/contents.json"
curl -sS -f "$url/api/projects/wf-stable-demo/variants" >"$work/variants.json"
"$python" - "$work/contents.json" "$work/variants.json" "$cuda_major" <<'PY'
import json, sys
contents = json.load(open(sys.argv[1]))
variants = json.load(open(sys.argv[2]))
cuda_major = int(sys.argv[3])
s = contents["summary"]
print(f"inspection of {contents['filename']}: torch_binding={s['torch_binding']} "
      f"(shown by {s['torch_symbol']}), torch_from={s['torch_from']}, "
      f"cuda_runtime={s['cuda_runtime']} ({s['cuda_library']}), glibc={s['glibc']}, glibcxx={s['glibcxx']}")
for b in contents["binaries"]:
    print(f"  {b['path']}: extension_module={b['extension_module']} torch_binding={b['torch_binding']} "
          f"needed={','.join(b['needed'])} exported={b['exported_total']}")
assert s["torch_binding"] == "stable-abi", s
assert s["torch_from"] == "2.9", s
assert s["cuda_runtime"] == cuda_major, s
assert any(b["extension_module"] and b["torch_binding"] == "stable-abi" for b in contents["binaries"])
(f,) = [f for v in variants["versions"] for f in v["files"]]
assert f["binaries"]["torch_binding"] == "stable-abi" and f["torch"] is None, f
series = lambda t: tuple(int(p) for p in t.split("."))
cells = sorted(((c["torch"], c["backend"]) for c in variants["matrix"]), key=lambda c: series(c[0]))
print("coverage matrix cells:", ", ".join(f"torch{t}/{b}" for t, b in cells))
assert ("2.9", "cu130") in cells and all(series(t) >= (2, 9) for t, _ in cells), cells
PY

echo "--- which views list it ---"
for series in 2.8 2.9 2.10 2.11; do
  names=$(curl -sS -f -H 'Accept: application/vnd.pypi.simple.v1+json' \
    "$url/$cuda_tag/torch$series/simple/wf-stable-demo/" |
    "$python" -c 'import json,sys; print(" ".join(f["filename"] for f in json.load(sys.stdin)["files"]))')
  echo "/$cuda_tag/torch$series/simple/wf-stable-demo/: ${names:-(nothing)}"
  if [ "$series" = 2.8 ]; then [ -z "$names" ]; else [ "$names" = "$(basename "$wheel")" ]; fi
done

# --- the same file from two series' views, each into a clean target, run on the GPU ------------
install_and_run() {
  local series=$1 target=$work/target-torch$1
  local view="$url/$cuda_tag/torch$series/simple/"
  echo "--- pip install --no-deps --target $target --index-url $view wf-stable-demo ---"
  "$python" -m pip install --no-cache-dir --disable-pip-version-check --no-deps --target "$target" \
    --index-url "$view" wf-stable-demo 2>&1 | tail -1
  (cd "$(mktemp -d)" && PYTHONPATH=$target EXPECT_SHA=$sha "$python" - <<'PY'
import hashlib, os, time, torch, wf_stable_demo, importlib.metadata as md
dist = md.distribution("wf-stable-demo")
print("installed:", dist.version, "from", os.path.dirname(wf_stable_demo.__file__),
      "requires", dist.requires, "into torch", torch.__version__)
n = 1 << 24
x = torch.randn(n, device="cuda")
y = torch.randn(n, device="cuda")
out = wf_stable_demo.saxpy(3.0, x, y)
torch.cuda.synchronize()
t0 = time.perf_counter()
for _ in range(20):
    out = wf_stable_demo.saxpy(3.0, x, y)
torch.cuda.synchronize()
dt = (time.perf_counter() - t0) / 20
err = (out - (3.0 * x + y)).abs().max().item()
print(f"saxpy on {torch.cuda.get_device_name()}: n={n}, max abs error {err:.2e}, {dt*1e6:.0f} us/call")
assert err < 1e-5, err
try:
    wf_stable_demo.saxpy(1.0, x.cpu(), y.cpu())
    raise SystemExit("a CPU tensor was accepted")
except (RuntimeError, NotImplementedError) as e:
    print("CPU tensors refused:", str(e).splitlines()[0][:100])
PY
  )
}
install_and_run 2.10
install_and_run 2.11
if "$python" -m pip install --no-cache-dir --disable-pip-version-check --no-deps --target "$work/target-torch2.8" \
  --index-url "$url/$cuda_tag/torch2.8/simple/" wf-stable-demo >"$work/pip-2.8.txt" 2>&1; then
  echo "pip installed it from the torch2.8 view" >&2
  exit 1
fi
echo "from /$cuda_tag/torch2.8/simple/: $(grep -m1 -o 'No matching distribution found for wf-stable-demo' "$work/pip-2.8.txt")"
echo "STABLE-ABI PROOF OK"
