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
//   6. retag                  the wheel is the recipe's project at the requested version, and
//                             is to carry the cell's label
//   7. analyze binaries       the wheel's ELF binaries: every NEEDED library provided, the
//                             lowest honest manylinux tag for a linux_<arch> wheel, within the
//                             recipe's manylinux ceiling; the label and that tag are written
//                             in one rewrite
//   8. number the build       a rebuild of a published file name gets the next build tag
//                             (docs/packaging.md, "Build tags"); one identical to the published
//                             file ends the job (no-op)
//   9. smoke test             a fresh environment installs the wheel and runs the import check
//  10. ingest                 through the one ingest path, into the cell's variant views; with
//                             yank_superseded, the builds it supersedes are yanked
//
// Where each step's commands run (Step::where): the cell's toolchain steps (1-3, 5) in the
// build placement (a container of the cell's image, a cluster's build job), the smoke test in
// the test placement (a GPU), the steps that only touch files (4, 6-8, 10; the analysis reads
// the wheel's ELF files in the server's own process) on the server.
// After each step, what the steps found is checkpointed in the work directory: a restarted
// server whose executor re-attaches (Slurm) resumes a job from its build (attaching to the
// attempt in flight) or from the step after it, with the wheel the build produced.

#include <span>
#include <string_view>

#include "job_context.hpp"

namespace wf::build {

struct Step {
  std::string_view name;
  core::JobState state;  ///< the job's state while the step runs
  Status (*run)(JobContext&);
  CommandPlacement::Where where = CommandPlacement::Where::server;
};

/// The steps above.
[[nodiscard]] std::span<const Step> job_steps();

/// Runs job_steps() over `ctx`, until one fails or sets ctx.done_early. The scheduler has
/// recorded `preparing` already. With ctx.resume, starts from the checkpoint instead: at the
/// build when the job is `building` and its build had not completed, else at the step after
/// the build.
[[nodiscard]] Status run_steps(JobContext& ctx);

/// True when a job found running at startup can be resumed from its checkpoint (see
/// run_steps) rather than run again: it got as far as its build.
[[nodiscard]] bool resumable(core::JobState state, const std::filesystem::path& work_dir);

/// Where step 3 writes the environment probe's output in the work directory (read again by the
/// analysis, also after a restart: torch's platform tag is the default manylinux ceiling).
inline constexpr std::string_view kEnvironmentProbeFile = "environment-probe.txt";

// The steps (steps.cpp, environment.cpp, toolchain.cpp).
[[nodiscard]] Status verify_cuda_toolkit(JobContext& ctx);
[[nodiscard]] Status prepare_environment(JobContext& ctx);
[[nodiscard]] Status verify_build_environment(JobContext& ctx);
[[nodiscard]] Status fetch_source(JobContext& ctx);
[[nodiscard]] Status build_wheel(JobContext& ctx);
[[nodiscard]] Status retag_wheel(JobContext& ctx);
[[nodiscard]] Status analyze_binaries(JobContext& ctx);
[[nodiscard]] Status number_build(JobContext& ctx);
[[nodiscard]] Status smoke_test(JobContext& ctx);
[[nodiscard]] Status ingest_wheel(JobContext& ctx);

/// The build step's command and its OOM retries, in `env` (build_wheel's environment).
[[nodiscard]] Status run_build(JobContext& ctx, Env env);
/// Sets up the compile cache for the build step's command (compile_cache_job.cpp): in `env`,
/// the compiler wrappers first on PATH, PYTORCH_NVCC and ccache's settings. Returns what the
/// cache is (used: its directory and bound; off or unavailable: why); a cache that cannot be
/// used is noted in the log and the build runs without it.
[[nodiscard]] catalog::CompileCacheStats prepare_compile_cache(JobContext& ctx, Env& env);
/// After the build: counts what ccache's statistics log says, measures the cache, writes
/// compile-cache.txt in the work directory and notes the summary in the log.
void finish_compile_cache(JobContext& ctx, catalog::CompileCacheStats stats);

/// Rewrites ctx.wheel with `changes` into the work directory's `subdir` and makes the result
/// ctx.wheel, noting "<old> -> <new>" in the log. Nothing happens when `changes` changes nothing.
[[nodiscard]] Status rewrite_job_wheel(JobContext& ctx, const archive::WheelChanges& changes,
                                       std::string_view subdir);

/// With the build's yank_superseded, yanks every live, not yet yanked build of `published`'s
/// file name with a lower build number than ctx.build_number, with the reason "superseded by
/// build N". Problems are noted in the log: the wheel is published either way.
void yank_superseded_builds(JobContext& ctx, const std::string& published);

/// After the git source's checkout (provenance.cpp): records the commit it is at as
/// ctx.source_digest ({"gitCommit", SHA}), read with `git rev-parse HEAD`.
[[nodiscard]] Status record_git_commit(JobContext& ctx, const std::filesystem::path& root);
/// The ingest step's attestations: the wheel's provenance signed by ctx.services.signer,
/// stating what the job knows of how it was made (render::BuildFacts). nullopt without a signer.
[[nodiscard]] std::optional<ingest::Attestations> signed_provenance(const JobContext& ctx);

/// The build's PATH after the environment's bin: with the interpreter's own torch, the
/// interpreter's bin directory (ninja and build tools installed beside torch), then the CUDA
/// toolkit's bin and the system's.
[[nodiscard]] std::string tool_path(const JobContext& ctx);

/// A new virtual environment at `dir` from the cell's interpreter; with system_torch, linked
/// to the interpreter's site-packages. Under `what` in the log.
[[nodiscard]] Status make_venv(JobContext& ctx, std::string_view what,
                               const std::filesystem::path& dir);

}  // namespace wf::build
