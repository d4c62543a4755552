#pragma once
// The steps of a build job, in order. Each is a function over the job's context that returns
// ok or the reason the job fails; run_steps() runs them one after another, recording the
// job's state before a step of a new state runs (so that after a crash the job store says
// exactly where each job was), and stops at the first failure, cancellation or shutdown.
//
//   1. verify CUDA toolkit    the cell's nvcc exists and reports the cell's CUDA major.minor
//   2. prepare environment    the (python, torch, requirements, index) environment, reused
//   3. verify torch, Python   the environment's torch is of the cell's series and CUDA major,
//                             its Python the cell's; the toolchain is recorded in the job
//   4. fetch source           a copy of the recipe's source in the work directory
//   5. build                  the recipe's command, retried with half the parallelism after an
//                             OOM kill
//   6. retag                  the wheel carries the cell's label, inside and out
//   7. smoke test             a fresh environment installs the wheel and runs the import check
//   8. ingest                 through the one ingest path, into the cell's variant views

#include <span>
#include <string_view>

#include "job_context.hpp"

namespace wf::build {

struct Step {
  std::string_view name;
  core::JobState state;  ///< the job's state while the step runs
  Status (*run)(JobContext&);
};

/// The steps above.
[[nodiscard]] std::span<const Step> job_steps();

/// Runs job_steps() over `ctx`. The scheduler has recorded `preparing` already.
[[nodiscard]] Status run_steps(JobContext& ctx);

// The steps (steps.cpp, environment.cpp, toolchain.cpp).
[[nodiscard]] Status verify_cuda_toolkit(JobContext& ctx);
[[nodiscard]] Status prepare_environment(JobContext& ctx);
[[nodiscard]] Status verify_build_environment(JobContext& ctx);
[[nodiscard]] Status fetch_source(JobContext& ctx);
[[nodiscard]] Status build_wheel(JobContext& ctx);
[[nodiscard]] Status retag_wheel(JobContext& ctx);
[[nodiscard]] Status smoke_test(JobContext& ctx);
[[nodiscard]] Status ingest_wheel(JobContext& ctx);

/// The build's PATH after the environment's bin: with the interpreter's own torch, the
/// interpreter's bin directory (ninja and build tools installed beside torch), then the CUDA
/// toolkit's bin and the system's.
[[nodiscard]] std::string tool_path(const JobContext& ctx);

/// A new virtual environment at `dir` from the cell's interpreter; with system_torch, linked
/// to the interpreter's site-packages. Under `what` in the log.
[[nodiscard]] Status make_venv(JobContext& ctx, std::string_view what,
                               const std::filesystem::path& dir);

}  // namespace wf::build
