#pragma once
// Building blocks of the build runner (docs/runner.md):
// recipes, the Python × torch × CUDA matrix and its cells, the local version label a cell's
// wheel carries, the parallelism a build gets from its memory grant, OOM detection in a failed
// build, and the job state machine. Pure functions, no I/O.

#include <chrono>
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wheelforge/core/manylinux.hpp"
#include "wheelforge/core/variant.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::core {

// ---------------------------------------------------------------------------------------------
// Recipes

/// Where a recipe's source comes from.
struct SourceSpec {
  enum class Kind {
    index_sdist,  ///< the project's sdist from our own index (location and ref unused)
    path,         ///< a directory on the build host
    git,          ///< a git repository
  };
  Kind kind = Kind::index_sdist;
  std::string location;  ///< directory (path) or URL (git); empty for index_sdist
  std::string ref;       ///< git ref (branch, tag or commit); empty: the default branch
  /// git: whether the submodules of `ref` are fetched (recursively) after the checkout.
  enum class Submodules { recursive, none };
  Submodules submodules = Submodules::recursive;
  /// git: a git credential-store file (one "https://USER:TOKEN@HOST" line per host) that the
  /// clone and the submodule fetches read their credentials from; empty: none. Builds run with
  /// HOME in the job's directory, so the server user's own git configuration, credential
  /// helpers and .netrc are never used.
  std::string credentials = {};
};

/// The build command used when a recipe names none. Placeholders: {python} (the cell's
/// interpreter), {out} (the directory the wheel must land in), {src} (the source directory).
inline constexpr std::string_view kDefaultBuildCommand =
    "{python} -m pip wheel --no-build-isolation --no-deps -w {out} {src}";

struct Recipe {
  std::string name;     ///< the recipe's own name in the config
  std::string project;  ///< normalized project name of the wheels it builds
  SourceSpec source;
  std::string build_command = std::string(kDefaultBuildCommand);
  /// Fixed environment, in config order (e.g. FLASH_ATTENTION_FORCE_BUILD=TRUE).
  std::vector<std::pair<std::string, std::string>> env;
  std::string arch_variable;  ///< e.g. FLASH_ATTN_CUDA_ARCHS or TORCH_CUDA_ARCH_LIST
  std::string arch_value;     ///< e.g. "80;90;100;120"
  /// Variable through which the package takes its local version label (e.g.
  /// FLASH_ATTN_LOCAL_VERSION); empty when it has none and the wheel is retagged afterwards.
  std::string local_version_variable;
  std::string import_check;  ///< Python code run against the installed wheel
  double gb_per_job = 4.0;   ///< peak memory of one compile job per nvcc thread, in GB (GiB)
  std::chrono::seconds timeout{7200};
  /// Requirements installed into the build environment besides torch, from the torch index.
  /// nullopt (the recipe says nothing): kDefaultBuildRequires. An empty list installs nothing.
  std::optional<std::vector<std::string>> build_requires;
  /// A rebuild published under a higher build number yanks the builds of the same file name it
  /// supersedes ("superseded by build N"), unless a build request says otherwise.
  bool yank_superseded = false;
  /// Builds compile through the recipe's compile cache (`[build] compile_cache`); false: never.
  bool compile_cache = true;
  /// The most CPU cores one build of this recipe uses: on this host, a cap on the cores
  /// admission grants it; on a cluster, what each of its batch jobs asks for. nullopt: no
  /// cap on this host, the cluster executor's default there.
  std::optional<unsigned> cpus;
  /// The highest manylinux tag its wheels may need (the key `manylinux`, "2_28"). nullopt: the
  /// platform tag of the torch wheel installed in the cell's build environment, when torch came
  /// from a manylinux wheel (who can install that torch can install this wheel); else none.
  std::optional<ManylinuxCeiling> manylinux;
};

/// The build requirements of a recipe that names none: what a plain setuptools project needs
/// under `pip wheel --no-build-isolation` (Python 3.12 venvs come without setuptools), and
/// ninja, which torch.utils.cpp_extension uses to compile in parallel (without it, one file at
/// a time): docs/clients.md, "pip", and docs/torch-labels.md, "Building extensions". The runner
/// leaves out what is there already: ninja when a `ninja` program is on the build's PATH;
/// setuptools and wheel, with the interpreter's own torch (system_torch), when the interpreter has
/// them.
inline constexpr std::string_view kDefaultBuildRequires[] = {"setuptools", "wheel", "ninja"};

/// Checks a recipe and returns it with `project` normalized. Fails with Errc::invalid
/// listing every problem: empty or badly formed name ([A-Za-z0-9._-], starting alphanumeric),
/// invalid project name, a path/git source without a location, a ref, submodules or
/// credentials on a non-git source, an empty build command or one with a placeholder other
/// than {python}, {out}, {src} (or an unclosed '{'), environment or variable names that are
/// not [A-Za-z_][A-Za-z0-9_]*, duplicate environment names, an arch variable without a value
/// or a value without a variable, gb_per_job not a finite number > 0, a timeout ≤ 0, empty
/// build requirements, cpus 0.
[[nodiscard]] Result<Recipe> validate_recipe(const Recipe& recipe);

/// Number of architectures in an arch list: entries separated by ';', ',' or whitespace
/// ("80;90;100;120" → 4, "8.0 9.0+PTX" → 2); 0 for an empty list.
[[nodiscard]] unsigned count_archs(std::string_view arch_value);

// ---------------------------------------------------------------------------------------------
// Matrix

/// A CUDA toolkit major.minor.
struct CudaVersion {
  int major = 0;
  int minor = 0;
  friend bool operator==(const CudaVersion&, const CudaVersion&) = default;
  friend auto operator<=>(const CudaVersion&, const CudaVersion&) = default;
  /// "12.8".
  [[nodiscard]] std::string str() const;
  /// "cu128" (the label spelling; variant.hpp's parser reads it back).
  [[nodiscard]] std::string tag() const;
};

/// Parses "12.8" (digits, no leading zeros, major 1–19, minor 0–99; the range a cuXY label can
/// express). nullopt otherwise.
[[nodiscard]] std::optional<CudaVersion> parse_cuda_version(std::string_view text);
/// Parses a torch series "2.8" (major ≥ 1, minor ≥ 0, no leading zeros). nullopt otherwise.
[[nodiscard]] std::optional<TorchSeries> parse_torch_series(std::string_view text);
/// True for a Python "X.Y" version (digits, no leading zeros, X ≥ 1), e.g. "3.11".
[[nodiscard]] bool is_valid_python_version(std::string_view text);

/// Removes the cells that match every axis the exclusion names (an absent axis matches all).
struct MatrixExclusion {
  std::optional<std::string> python;
  std::optional<TorchSeries> torch;
  std::optional<CudaVersion> cuda;
  friend bool operator==(const MatrixExclusion&, const MatrixExclusion&) = default;
};

struct Matrix {
  std::vector<std::string> python;  ///< "3.11"
  std::vector<TorchSeries> torch;
  std::vector<CudaVersion> cuda;  ///< {12, 8}
  std::vector<MatrixExclusion> exclude;
  friend bool operator==(const Matrix&, const Matrix&) = default;
};

/// One build of a recipe.
struct Cell {
  std::string python;
  TorchSeries torch;
  CudaVersion cuda;
  friend bool operator==(const Cell&, const Cell&) = default;
  /// The local version label of the cell's wheel: local_label(*this), e.g. "cu128torch2.8".
  [[nodiscard]] std::string label() const;
  /// A stable identifier, e.g. "py3.11-torch2.8-cu128".
  [[nodiscard]] std::string key() const;
};

/// Checks a recipe's matrix. Fails with Errc::invalid listing every problem: an empty axis, a
/// malformed Python version, a torch series or CUDA version out of range, a duplicate value on
/// an axis, an exclusion that names no axis (it would exclude everything) or names a value that
/// is not on its axis (a typo that would silently exclude nothing), duplicate exclusions, and a
/// matrix whose exclusions leave no cell. Returns the matrix unchanged on success.
[[nodiscard]] Result<Matrix> validate_matrix(const Matrix& matrix);

/// Checks a build request's subset of `full` (already valid). Empty axes mean "all"; every
/// value given must be on the full matrix's axis, without duplicates; exclusions are allowed
/// under the same rules as in validate_matrix. Fails with Errc::invalid listing every problem,
/// including a subset that selects no cell of `full`. Returns the subset unchanged on success.
[[nodiscard]] Result<Matrix> validate_matrix_subset(const Matrix& subset, const Matrix& full);

/// The cells of `matrix`: the cross product minus its exclusions, intersected with `subset`
/// (whose empty axes mean "all" and whose exclusions also apply). Order: Python, then torch,
/// then CUDA, each in the order the matrix lists them; duplicate axis values yield one cell.
[[nodiscard]] std::vector<Cell> expand_matrix(const Matrix& matrix,
                                              const std::optional<Matrix>& subset = std::nullopt);

/// `cu{major}{minor}torch{M}.{m}`: "cu128torch2.8", "cu130torch2.11".
[[nodiscard]] std::string local_label(const Cell& cell);

/// True when a wheel's local label (raw or normalized, leading '+' allowed) names the cell's
/// CUDA major and minor and its torch series, as parse_local_label reads them. Other parts
/// (ABI, git hashes) are not compared; a major-only CUDA label (cu12) or one without a torch
/// series does not match.
[[nodiscard]] bool label_matches(std::string_view wheel_local_label, const Cell& cell);

// ---------------------------------------------------------------------------------------------
// Parallelism
//
// nvcc compiles each translation unit once per architecture; NVCC_THREADS runs those
// per-architecture compilations in parallel inside one compile job, and MAX_JOBS runs compile
// jobs in parallel. Peak memory is therefore about
//     MAX_JOBS × NVCC_THREADS × gb_per_job,
// where gb_per_job is the peak of one cicc/ptxas process (3–5 GB for flash-attn kernels;
// docs/torch-labels.md, "Building extensions").
//
// Formula, with GiB = 2^30 and budget = min(grant, available − reserve):
//     nvcc_threads = min(clamp(arch_count, 1, 4), cores)     (more threads than archs idle)
//     while nvcc_threads > 1 and gb_per_job × nvcc_threads GiB > budget: nvcc_threads −= 1
//     max_jobs     = max(1, min(⌊cores / nvcc_threads⌋, ⌊budget / (gb_per_job × nvcc_threads
//     GiB)⌋)) memory_bytes = max_jobs × nvcc_threads × gb_per_job GiB
// so that MAX_JOBS × NVCC_THREADS, the compiler processes running at once, never exceeds the
// cores.
//
// Headroom. Upstream's auto formula min(cpus/2, avail_GB / (5 × NVCC_THREADS)) spends all the
// memory available when the build starts: it ignores other builds running at the same time,
// the host's own needs (the index server, page cache, the linker's peak at the end) and
// memory that was "available" only because it was reclaimable. Here the budget is what the
// admission controller granted this job out of available memory minus a fixed reserve, so
// concurrent builds never add up past the host, and the floor division leaves the remainder
// of the grant unused. Threads are reduced before jobs because a single job with several
// threads has the same peak as several single-threaded jobs but less parallelism overall.

struct Resources {
  std::uint64_t available_memory_bytes = 0;  ///< host memory available now (MemAvailable)
  std::uint64_t reserve_bytes = 0;           ///< kept back for the host and the server
  unsigned cores = 1;                        ///< cores this job may use
};

struct Parallelism {
  unsigned max_jobs = 1;      ///< MAX_JOBS
  unsigned nvcc_threads = 1;  ///< NVCC_THREADS
  /// Peak memory this parallelism is planned for (max_jobs × nvcc_threads × gb_per_job GiB).
  /// Above the budget only when even 1 × 1 does not fit it.
  std::uint64_t memory_bytes = 0;
  friend bool operator==(const Parallelism&, const Parallelism&) = default;
};

/// MAX_JOBS and NVCC_THREADS for a build granted `budget_bytes` on a host with `resources`, by
/// the formula above. At least 1 × 1, even when that exceeds the budget (the caller compares
/// memory_bytes with what it granted). `cores` 0 counts as 1, `arch_count` 0 as 1; a
/// non-finite or non-positive gb_per_job counts as the recipe default 4.0.
[[nodiscard]] Parallelism compute_parallelism(const Resources& resources, double gb_per_job,
                                              unsigned arch_count, std::uint64_t budget_bytes);

/// The parallelism of a retry after an OOM: max_jobs halved (at least 1); when it is already 1,
/// nvcc_threads halved instead (at least 1). memory_bytes is kept: the grant stays, each
/// compile job gets more of it. Returns `p` unchanged when both are 1 (no retry can help).
[[nodiscard]] Parallelism halve(const Parallelism& p);

/// True when a failed build looks like it ran out of memory: exit status 137 (a shell's report
/// of SIGKILL), death by SIGKILL, or the log tail showing a compiler killed or out of memory
/// ("Killed signal terminated program cicc/cc1plus/...", "internal compiler error: Killed",
/// "died due to signal 9", "terminated with signal 9", "std::bad_alloc", "virtual memory
/// exhausted", "out of memory" — the last except on lines mentioning CUDA, which report GPU
/// memory). `exit_status_or_signal_code` is the exit status when !killed_by_signal; `signal`
/// is the signal when killed_by_signal. A successful exit (0, not killed) is never an OOM. The
/// caller rules out its own kills (timeout, cancellation) first: those are SIGKILLs too.
[[nodiscard]] bool looks_like_oom(int exit_status_or_signal_code, bool killed_by_signal, int signal,
                                  std::string_view log_tail);

// ---------------------------------------------------------------------------------------------
// Job states
//
//   queued → preparing → building → retagging → testing → ingesting → succeeded
//   building → building                       (retry after an OOM)
//   retagging → succeeded                     (a rebuild identical to the published file:
//                                              nothing to test or publish)
//   any non-terminal state → failed | cancelled
//   preparing … ingesting → interrupted       (the server stopped while the job ran)
//   interrupted → queued                      (requeued at startup)
//   testing | ingesting → retagging           (a restarted server that re-attached to the job
//                                              runs the steps after the build again)
//   failed | cancelled → queued               (retry)
// succeeded is final; failed and cancelled are terminal but may be retried.

enum class JobState {
  queued,
  preparing,
  building,
  retagging,
  testing,
  ingesting,
  succeeded,
  failed,
  cancelled,
  interrupted,
};

/// The state's name as spelled in the enum ("queued", "retagging", ...).
[[nodiscard]] std::string_view state_name(JobState state);
/// The inverse of state_name (exact, lower-case); nullopt for anything else.
[[nodiscard]] std::optional<JobState> parse_job_state(std::string_view name);
/// succeeded, failed, cancelled.
[[nodiscard]] bool is_terminal(JobState state);
/// preparing, building, retagging, testing, ingesting: states in which a process works on the
/// job (and which a restart finds interrupted).
[[nodiscard]] bool is_running(JobState state);
/// True when the graph above has the edge from → to.
[[nodiscard]] bool can_transition(JobState from, JobState to);

}  // namespace wf::core

namespace wf::core {

/// What a client asks the runner for: one recipe at one version, optionally a subset of the
/// recipe's matrix, optionally rebuilding cells that were built already (a rebuild is published
/// under the next build number), optionally yanking the builds a rebuild supersedes.
struct BuildRequest {
  std::string recipe;
  std::string version;
  std::optional<Matrix> subset;
  bool force = false;
  /// Whether a rebuild yanks the builds it supersedes; nullopt: the recipe's yank_superseded.
  std::optional<bool> yank_superseded;
  /// false ("cache": false): this build's jobs compile without the compile cache, e.g. to
  /// prove a clean build.
  bool compile_cache = true;
};

/// A build request as a client sent it, before its values are checked: the admin API's JSON
/// and the web UI's form both decode into this, and check_build_request() applies the one set
/// of rules to either.
struct BuildRequestFields {
  std::string recipe;
  std::string version;
  bool force = false;
  std::optional<bool> yank_superseded;  ///< nullopt: the recipe's
  bool compile_cache = true;            ///< "cache": false turns it off for this build
  std::vector<std::string> python;      ///< the matrix subset's axes, as given
  std::vector<std::string> torch;
  std::vector<std::string> cuda;
};

/// The request, or Errc::invalid naming every problem together: `problems` (what the decoder
/// found already, such as a mistyped JSON field) and then a recipe or version that is missing
/// (surrounding whitespace is dropped), a Python version that is not X.Y, a torch series or a
/// CUDA version that does not parse. The subset is set when an axis names something. Whether
/// the recipe exists and the subset lies in its matrix is the runner's to check.
[[nodiscard]] Result<BuildRequest> check_build_request(const BuildRequestFields& fields,
                                                       Problems problems = {});

}  // namespace wf::core
