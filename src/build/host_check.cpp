#include "wheelforge/build/host_check.hpp"

#include <unistd.h>

#include <filesystem>

#include "remote.hpp"
#include "wheelforge/core/toolchain.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::build {

namespace fs = std::filesystem;

std::vector<std::string> check_build_toolchains(const RunnerConfig& config,
                                                std::chrono::seconds timeout) {
  std::vector<std::string> problems;
  for (const auto& [name, rc] : config.recipes) {
    const core::SourceSpec& source = rc.recipe.source;
    if (source.kind != core::SourceSpec::Kind::path) continue;
    const std::string key =
        "recipes." + name + ".source.path: " + sanitize_for_log(source.location);
    std::error_code ec;
    if (!fs::exists(source.location, ec)) {
      problems.push_back(key + " does not exist");
    } else if (!fs::is_directory(source.location, ec)) {
      problems.push_back(key + " is not a directory");
    }
  }
  if (config.host.executor.remote_toolchain()) return problems;
  for (const auto& [version, home] : config.host.cuda_homes) {
    const fs::path nvcc = home / "bin" / "nvcc";
    std::error_code ec;
    if (!fs::is_regular_file(nvcc, ec) || ::access(nvcc.c_str(), X_OK) != 0) continue;
    const std::string key = "build.cuda." + version + ": ";
    auto ran = run_client({nvcc.string(), "--version"}, minimal_environment(), timeout);
    if (!ran) {
      problems.push_back(key + nvcc.string() + " --version: " + ran.error().message);
      continue;
    }
    if (!ran->status.success()) {
      problems.push_back(key + nvcc.string() + " --version failed (" + ran->status.describe() +
                         "): " + sanitize_for_log(trim(ran->output), 300));
      continue;
    }
    const auto found = core::parse_nvcc_version(ran->output);
    if (!found) {
      problems.push_back(key + nvcc.string() + " --version names no CUDA release: " +
                         sanitize_for_log(trim(ran->output), 300));
    } else if (found->release.str() != version) {
      problems.push_back(key + nvcc.string() + " reports release " + found->release.str() + " (V" +
                         found->full + "), not " + version +
                         ": the key must name the toolkit's own release");
    }
  }
  return problems;
}

}  // namespace wf::build
