#pragma once
// A test bed for the build runner: a temporary data directory with a real catalog, blob store,
// job store and ingestor, a FakeExecutor scripted as a working build host, and a runner
// configuration with one recipe. Nothing here runs a compiler or Python: the fake answers
// `nvcc --version`, the environment probe and the build command (which writes a small real
// wheel, so that retagging and ingest run for real).

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "build/fake_executor.hpp"
#include "wheelforge/build/runner.hpp"
#include "wheelforge/catalog/catalog.hpp"
#include "wheelforge/catalog/jobs.hpp"
#include "wheelforge/ingest/ingestor.hpp"
#include "wheelforge/store/blob_store.hpp"

namespace wf::build::testing {

// Paths the fake host pretends to have (nothing exists there: the fake runs nothing).
inline constexpr std::string_view kPython = "/opt/wf-test/python3.12/bin/python3.12";
inline constexpr std::string_view kCudaHome = "/opt/wf-test/cuda-13.0";
inline constexpr std::string_view kSource = "/opt/wf-test/src/demo";
inline constexpr std::string_view kServer = "http://127.0.0.1:9";
/// The commit `git rev-parse HEAD` reports for a git source.
inline constexpr std::string_view kCommit = "0123456789abcdef0123456789abcdef01234567";

/// What the fake host reports about its tools.
struct HostScript {
  std::string nvcc_release = "13.0";
  std::string nvcc_full = "13.0.48";
  std::string python_version = "3.12.1";
  std::string torch_version = "2.8.0+cu130";
  std::string torch_cuda = "13.0";  ///< "None" for a CPU torch
  /// The Tag lines of torch's WHEEL file, blank-separated ("cp312-cp312-manylinux_2_28_x86_64");
  /// empty: torch from no wheel (the probe prints an empty torch_wheel_tags=).
  std::string torch_wheel_tags;
  bool ninja_on_path = true;
};

/// Scripts `nvcc --version`, the environment probe, the ninja look-up and a git source's
/// `rev-parse HEAD` (kCommit). Rules added later
/// come after these: add a failing rule first to override one.
void script_host(FakeExecutor& fake, const HostScript& host = {});

/// A pure-Python wheel of `project` at `version` (with its own RECORD) in `dir`, whose package
/// holds `init` as its __init__.py.
std::filesystem::path write_wheel(const std::filesystem::path& dir, std::string_view project,
                                  std::string_view version,
                                  std::string_view init = "ANSWER = 42\n");

/// A wheel of `project` at `version` tagged `tag` ("cp312-cp312-linux_x86_64") with these
/// files besides its .dist-info (METADATA, WHEEL, RECORD), in `dir`. A file among them named
/// `<dist>-<version>.dist-info/METADATA` is the wheel's METADATA.
std::filesystem::path write_wheel_with(
    const std::filesystem::path& dir, std::string_view project, std::string_view version,
    std::string_view tag, const std::vector<std::pair<std::string, std::string>>& files);

/// Scripts the recipe's build command ("fake-build ..."): it writes a wheel of `project`
/// `version` (with `init` as its __init__.py) into the job's out directory; for `times` builds
/// (-1: every one).
void script_build(FakeExecutor& fake, std::string project = "demo-pkg",
                  std::string version = "1.0.0", std::string init = "ANSWER = 42\n",
                  int times = -1);

/// Scripts the build command to write a copy of `wheel` into the job's out directory.
void script_build_copies(FakeExecutor& fake, std::filesystem::path wheel, int times = -1);

/// The recipe the bed configures: demo-pkg from a path source, built with "fake-build {out}",
/// import check "import demo_pkg", 1 GiB per job, one arch, for Python 3.12 × torch 2.8 ×
/// CUDA 13.0.
RecipeConfig demo_recipe(std::string name = "demo", std::string project = "demo-pkg");

class RunnerBed {
 public:
  explicit RunnerBed(std::string_view name);
  ~RunnerBed();
  RunnerBed(const RunnerBed&) = delete;
  RunnerBed& operator=(const RunnerBed&) = delete;

  std::filesystem::path data_dir;
  std::unique_ptr<catalog::Catalog> catalog;
  std::unique_ptr<store::BlobStore> store;
  std::unique_ptr<catalog::JobStore> jobs;
  std::unique_ptr<ingest::Ingestor> ingestor;
  FakeExecutor fake;
  RunnerConfig config;
  std::atomic<int> ingested{0};

  /// A runner over this bed's data directory with `config` (another executor if given).
  std::unique_ptr<Runner> make_runner(Executor* executor = nullptr);
  /// The bed's own runner (made on first use).
  Runner& runner();
  /// Starts the bed's runner; fails the test if it does not start.
  Runner& start(Runner::Recovery recovery = Runner::Recovery::requeue_interrupted);
  /// Submits a build of one cell and returns its job.
  catalog::JobRecord submit(Runner& runner, const std::string& recipe = "demo", bool force = false,
                            std::optional<bool> yank_superseded = std::nullopt);
  catalog::JobRecord submit(const std::string& recipe = "demo") { return submit(runner(), recipe); }
  /// Waits until the job is in a terminal state (or 60 s have passed) and returns it.
  catalog::JobRecord wait_terminal(std::int64_t id);
  /// Waits until `done(job)` holds (or 60 s have passed) and returns the job.
  catalog::JobRecord wait_until(std::int64_t id,
                                const std::function<bool(const catalog::JobRecord&)>& done);
  /// The job's log.
  [[nodiscard]] std::string log(std::int64_t id) const;
  /// submit() + wait_terminal() on the started bed runner.
  catalog::JobRecord run_one(const std::string& recipe = "demo");
  /// A forced rebuild of the one cell: submit(force) + wait_terminal().
  catalog::JobRecord rebuild(std::optional<bool> yank_superseded = std::nullopt);

 private:
  std::unique_ptr<Runner> runner_;
};

}  // namespace wf::build::testing
