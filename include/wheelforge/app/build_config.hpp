#pragma once
// The build runner's part of the configuration file: the [build] host table and the
// [recipes.NAME] tables with their [recipes.NAME.matrix].

#include <filesystem>
#include <optional>

#include "wheelforge/build/runner.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::app {

/// Reads [build] and [recipes] from the TOML file (no file, or no recipes: an empty config,
/// which leaves the runner off). Every problem is reported, by its key, in one error.
[[nodiscard]] Result<build::RunnerConfig> load_build_config(
    const std::optional<std::filesystem::path>& config_file);

}  // namespace wf::app
