#!/usr/bin/env bash
# End-to-end proof of the build runner on a machine with an NVIDIA GPU (not run in CI):
# start wheelforge, build a small torch.utils.cpp_extension.CUDAExtension package through the
# runner (admin API), pip-install the wheel it produced from the /cu130/torch<series>/simple/
# view into a clean target, and run its kernel on the GPU, checking the result.
#
# Needs: the wheelforge binary (WHEELFORGE_BIN, default build/wheelforge), python3 with torch
# (CUDA build) + setuptools + ninja, nvcc under CUDA_HOME (default /usr/local/cuda), curl.
# Works offline: torch comes from the interpreter itself (build.system_torch = true).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${WHEELFORGE_BIN:-$root/build/wheelforge}
python=${PYTHON:-$(command -v python3)}
cuda_home=${CUDA_HOME:-/usr/local/cuda}
work=${WORK:-$(mktemp -d /tmp/wf-gpu-proof.XXXXXX)}
echo "work dir: $work"

torch_version=$("$python" -c 'import torch; print(torch.__version__)')
series=$("$python" -c 'import torch; print(".".join(torch.__version__.split("+")[0].split(".")[:2]))')
cuda_version=$("$python" -c 'import torch; print(torch.version.cuda)')
cuda_tag=cu$(echo "$cuda_version" | tr -d .)
py_version=$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
arch=$("$python" -c 'import torch; m, n = torch.cuda.get_device_capability(); print(f"{m}.{n}")')
echo "python $py_version, torch $torch_version (series $series, CUDA $cuda_version), GPU arch $arch: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"

# --- the package: one CUDA kernel behind a pybind11 function ---------------------------------
src=$work/src
mkdir -p "$src/wf_gpu_demo" "$src/csrc"
cat > "$src/setup.py" <<'PY'
import os
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

label = os.environ.get("WF_GPU_DEMO_LOCAL_VERSION")
setup(
    name="wf-gpu-demo",
    version="0.1.0" + (f"+{label}" if label else ""),
    packages=["wf_gpu_demo"],
    ext_modules=[CUDAExtension("wf_gpu_demo._C", ["csrc/saxpy.cu"])],
    cmdclass={"build_ext": BuildExtension},
)
PY
cat > "$src/wf_gpu_demo/__init__.py" <<'PY'
import torch  # noqa: F401  (loads libtorch before the extension)
from ._C import saxpy  # noqa: F401
PY
cat > "$src/csrc/saxpy.cu" <<'CU'
#include <c10/cuda/CUDAException.h>
#include <torch/extension.h>

__global__ void saxpy_kernel(float a, const float* x, const float* y, float* out, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}

torch::Tensor saxpy(double a, torch::Tensor x, torch::Tensor y) {
  TORCH_CHECK(x.is_cuda() && y.is_cuda(), "x and y must be CUDA tensors");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && y.scalar_type() == torch::kFloat32, "float32 only");
  auto out = torch::empty_like(x);
  const int64_t n = x.numel();
  const int threads = 256;
  const int64_t blocks = (n + threads - 1) / threads;
  saxpy_kernel<<<blocks, threads>>>(static_cast<float>(a), x.data_ptr<float>(), y.data_ptr<float>(),
                                    out.data_ptr<float>(), n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("saxpy", &saxpy, "a * x + y on the GPU"); }
CU

# --- wheelforge with one recipe ---------------------------------------------------------------
cat > "$work/wheelforge.toml" <<TOML
[build]
system_torch = true
memory_reserve = "8G"
[build.python]
"$py_version" = "$python"
[build.cuda]
"$cuda_version" = "$cuda_home"
[recipes.gpu-demo]
project = "wf-gpu-demo"
source = { path = "$src" }
arch_variable = "TORCH_CUDA_ARCH_LIST"
arch_value = "$arch"
local_version_variable = "WF_GPU_DEMO_LOCAL_VERSION"
import_check = "import torch, wf_gpu_demo; x = torch.ones(4, device='cuda'); assert wf_gpu_demo.saxpy(2.0, x, x).sum().item() == 12.0"
gb_per_job = 4
timeout = "20m"
[recipes.gpu-demo.matrix]
python = ["$py_version"]
torch = ["$series"]
cuda = ["$cuda_version"]
TOML

data=$work/data
admin=$("$bin" token create --data-dir "$data" --scope admin 2>/dev/null | tail -n1)
"$bin" serve --config "$work/wheelforge.toml" --data-dir "$data" --listen 127.0.0.1:0 \
  >"$work/serve.out" 2>"$work/serve.log" &
server=$!
trap 'kill $server 2>/dev/null || true; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 50); do grep -q listening "$work/serve.out" && break; sleep 0.1; done
url=$(sed 's/^listening on //' "$work/serve.out")
echo "wheelforge: $url"

# Memory use of the whole machine while the build runs (peak of used = total - available).
(while sleep 0.5; do awk '/MemTotal/{t=$2}/MemAvailable/{a=$2}END{print (t-a)*1024}' /proc/meminfo; done) \
  >"$work/mem.samples" &
sampler=$!
base_used=$(awk '/MemTotal/{t=$2}/MemAvailable/{a=$2}END{print (t-a)*1024}' /proc/meminfo)

start=$(date +%s.%N)
curl -sf -u "__token__:$admin" -H 'Content-Type: application/json' \
  -d "{\"recipe\": \"gpu-demo\", \"version\": \"0.1.0\"}" "$url/admin/builds" >"$work/build.json"
job=$("$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["jobs"][0]["id"])' "$work/build.json")
echo "--- build log (job $job, streamed from $url/admin/jobs/$job/log?follow=1) ---"
curl -sN -u "__token__:$admin" "$url/admin/jobs/$job/log?follow=1" | grep -E '^==>|ninja|nvcc|Successfully' || true
end=$(date +%s.%N)
kill $sampler
curl -sf -u "__token__:$admin" "$url/admin/jobs/$job" >"$work/job.json"
"$python" - "$work/job.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
print(f"job {j['id']}: {j['state']} wheel={j['wheel']} MAX_JOBS={j['max_jobs']} NVCC_THREADS={j['nvcc_threads']} attempts={j['attempts']} {j['reason']}")
sys.exit(0 if j["state"] == "succeeded" else 1)
PY
peak=$(sort -n "$work/mem.samples" | tail -1)
echo "build wall time: $("$python" -c "print(round($end - $start, 1))") s; peak memory in use on the host during the build: $(( (peak - base_used) / 1048576 )) MiB above the $(( base_used / 1048576 )) MiB in use before"

# --- install from the variant view into a clean target and run the kernel --------------------
view="$url/$cuda_tag/torch$series/simple/"
echo "--- pip install from $view ---"
target=$work/target
"$python" -m pip install --no-cache-dir --disable-pip-version-check --no-deps --target "$target" \
  --index-url "$view" wf-gpu-demo 2>&1 | tail -2
cd "$(mktemp -d)"
PYTHONPATH=$target "$python" - <<'PY'
import time, torch, wf_gpu_demo, importlib.metadata as md
print("installed:", md.version("wf-gpu-demo"), "from", wf_gpu_demo.__file__)
n = 1 << 24
x = torch.randn(n, device="cuda")
y = torch.randn(n, device="cuda")
out = wf_gpu_demo.saxpy(3.0, x, y)
torch.cuda.synchronize()
t0 = time.perf_counter()
for _ in range(20):
    out = wf_gpu_demo.saxpy(3.0, x, y)
torch.cuda.synchronize()
dt = (time.perf_counter() - t0) / 20
err = (out - (3.0 * x + y)).abs().max().item()
print(f"saxpy on {torch.cuda.get_device_name()}: n={n}, max abs error {err:.2e}, {dt*1e6:.0f} us/call, {3*4*n/dt/1e9:.0f} GB/s")
assert err < 1e-5, err
print("GPU PROOF OK")
PY
