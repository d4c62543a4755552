#pragma once
// What `wheelforge config check` can learn about a build configuration before any job runs,
// beyond what reading it shows: the sources recipes copy exist, and each CUDA toolkit is the
// release its key names. Both would otherwise show only when a job fails.

#include <chrono>
#include <string>
#include <vector>

#include "wheelforge/build/runner.hpp"

namespace wf::build {

/// The problems of `config` that only this host can tell, each starting with its key:
/// - `recipes.NAME.source.path`: the directory does not exist or is not a directory (sources
///   are copied on the server, whatever the executor);
/// - `build.cuda.X.Y`: `<home>/bin/nvcc --version` fails, prints no release, or reports
///   another release than X.Y (only for the local executor: with containers or Slurm the
///   homes are paths in images or on nodes; homes without an executable bin/nvcc are left to
///   the configuration's own check).
/// Blocks on each nvcc, up to `timeout` each.
[[nodiscard]] std::vector<std::string> check_build_toolchains(const RunnerConfig& config,
                                                              std::chrono::seconds timeout);

}  // namespace wf::build
