// Steps 1 and 3: the toolchain a cell claims is the one it gets. A `+cu128torch2.8` label is
// only true when nvcc 12.8 compiles the wheel against a torch 2.8 built for CUDA 12 under the
// cell's Python; each is asked (`nvcc --version`, the environment's interpreter), checked with
// the rules in core/toolchain.hpp, and recorded in the job.

#include "wheelforge/core/toolchain.hpp"

#include "files.hpp"
#include "steps.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::build {

namespace fs = std::filesystem;

namespace {

// What a tool printed into its own output file (small: version lines).
std::string output_of(const JobContext& ctx, const fs::path& file) {
  return ctx.executor.read_log(file, 0, 64U * 1024U);
}

// Copies a tool's output into the job's log, each line marked.
void note_output(const JobContext& ctx, std::string_view tool, std::string_view output) {
  for (const auto line : split(output, '\n')) {
    if (!trim(line).empty())
      ctx.note("[preparing] " + std::string(tool) + ": " + std::string(line));
  }
}

}  // namespace

Status verify_cuda_toolkit(JobContext& ctx) {
  const core::Cell& cell = ctx.job.cell;
  const auto home = ctx.host.cuda_homes.find(cell.cuda.str());
  if (home == ctx.host.cuda_homes.end()) {
    return make_error(Errc::invalid, "no CUDA toolkit configured for CUDA " + cell.cuda.str());
  }
  ctx.cuda_home = home->second;
  const fs::path nvcc = ctx.cuda_home / "bin" / "nvcc";
  const fs::path output = ctx.work_dir / "nvcc-version.txt";
  if (auto st = remove_tree(output); !st) return st;
  ctx.note("[preparing] " + nvcc.string() + " --version");
  auto status =
      ctx.run(ctx.command({nvcc.string(), "--version"}, ctx.base_env, ctx.work_dir, output));
  if (!status) {
    return make_error(Errc::invalid,
                      "CUDA " + cell.cuda.str() + ": no usable nvcc in the CUDA home " +
                          ctx.cuda_home.string() + " (" + status.error().message + ")");
  }
  if (ctx.stopped()) return make_error(Errc::unavailable, "stopped");
  const std::string text = output_of(ctx, output);
  note_output(ctx, "nvcc", text);
  if (!status->success()) {
    return make_error(Errc::invalid, ctx.failure(nvcc.string() + " --version", *status, output, 0));
  }
  const auto version = core::parse_nvcc_version(text);
  if (!version) {
    return make_error(Errc::invalid, "cannot read a CUDA release from `" + nvcc.string() +
                                         " --version`: " + sanitize_for_log(trim(text), 300));
  }
  ctx.toolchain.nvcc = nvcc.string();
  ctx.toolchain.nvcc_version = version->full;
  ctx.keep(ctx.services.jobs.record_toolchain(ctx.job.id, ctx.toolchain), "the toolchain");
  if (auto st = core::check_nvcc(cell, *version, nvcc.string()); !st) return st;
  ctx.note("[preparing] CUDA " + cell.cuda.str() + ": " + nvcc.string() + " (V" + version->full +
           ")");
  return ok_status();
}

Status verify_build_environment(JobContext& ctx) {
  const core::Cell& cell = ctx.job.cell;
  const fs::path output = ctx.work_dir / kEnvironmentProbeFile;
  if (auto st = remove_tree(output); !st) return st;
  const fs::path python = JobContext::venv_python(ctx.env_dir);
  ctx.note("[preparing] " + python.string() + " -c <probe of Python and torch>");
  auto status =
      ctx.run(ctx.command({python.string(), "-c", std::string(core::environment_probe_script())},
                          ctx.base_env, ctx.work_dir, output));
  if (!status)
    return make_error(status.error().code, "verify torch and Python: " + status.error().message);
  if (ctx.stopped()) return make_error(Errc::unavailable, "stopped");
  const std::string text = output_of(ctx, output);
  note_output(ctx, "probe", text);
  if (!status->success()) {
    return make_error(Errc::invalid, ctx.failure("verify torch and Python", *status, output, 0));
  }
  auto probe = core::parse_environment_probe(text);
  if (!probe) return make_error(Errc::invalid, "verify torch and Python: " + probe.error().message);
  ctx.toolchain.python = ctx.python.string();
  ctx.toolchain.python_version = probe->python_version;
  ctx.toolchain.torch_version = probe->torch_version;
  ctx.toolchain.torch_cuda = probe->torch_cuda.value_or(probe->torch_version.empty() ? "" : "None");
  // Recorded before the checks, so that a refused job shows what it found.
  ctx.keep(ctx.services.jobs.record_toolchain(ctx.job.id, ctx.toolchain), "the toolchain");
  if (auto st = core::check_python(cell, probe->python_version); !st) {
    return make_error(Errc::invalid, st.error().message + " (" + ctx.python.string() + ")");
  }
  if (auto st = core::check_torch(cell, *probe); !st) return st;
  ctx.note("[preparing] toolchain: nvcc " + ctx.toolchain.nvcc_version + " (" + ctx.toolchain.nvcc +
           "), torch " + ctx.toolchain.torch_version + " (CUDA " + ctx.toolchain.torch_cuda +
           "), Python " + ctx.toolchain.python_version + " (" + ctx.toolchain.python + ")");
  return ok_status();
}

}  // namespace wf::build
