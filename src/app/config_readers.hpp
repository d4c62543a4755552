#pragma once
// Internal to the app module: reading values of the configuration file's tables with every
// problem collected (each starting with the dotted key), shared by the [build] table
// (build_config.cpp) and the [recipes] tables (recipe_config.cpp). toml++ stays inside app.

#include <toml++/toml.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/build/runner.hpp"

namespace wf::app::detail {

using ProblemList = std::vector<std::string>;

/// A value as the file spells it, for messages: 'text', 12, 1.5, true, a table, a list.
[[nodiscard]] std::string spelled(const toml::node& node);

/// Text from the file, made safe for a message.
[[nodiscard]] std::string clean(std::string_view text);

/// The names of a table's key rows, for hints.
template <typename Rows>
std::vector<std::string_view> row_names(const Rows& rows) {
  std::vector<std::string_view> out;
  out.reserve(rows.size());
  for (const auto& row : rows) out.push_back(row.name);
  return out;
}

/// What follows "http://" or "https://" in `url` when it is such a URL with a host, without
/// query, fragment, blanks, control characters, quotes or backslashes; nullopt otherwise.
/// The one check of URL settings (`base_url`, `[[upstream]] url`).
[[nodiscard]] std::optional<std::string_view> http_url_rest(std::string_view url);

/// Splits a core validation error ("a; b; c", see wf::Problems::to_error) into one problem each.
void add_split(ProblemList& problems, const std::string& key, const std::string& message);

/// The value, or nullopt with a problem naming what was expected and what the file has.
[[nodiscard]] std::optional<std::string> read_string(const toml::node& node, const std::string& key,
                                                     ProblemList& problems);
[[nodiscard]] std::optional<bool> read_bool(const toml::node& node, const std::string& key,
                                            ProblemList& problems);
/// A whole number from `min` to `max`.
[[nodiscard]] std::optional<std::int64_t> read_count(const toml::node& node, const std::string& key,
                                                     std::int64_t min, std::int64_t max,
                                                     ProblemList& problems);
/// A list of strings; `what` names the expected form in the message.
[[nodiscard]] std::optional<std::vector<std::string>> read_strings(const toml::node& node,
                                                                   const std::string& key,
                                                                   std::string_view what,
                                                                   ProblemList& problems);
/// An absolute path, as given.
[[nodiscard]] std::optional<std::filesystem::path> read_absolute_path(const toml::node& node,
                                                                      const std::string& key,
                                                                      ProblemList& problems);

/// [build.executor] and [build.images] (executor_config.cpp), into `host`.
void read_executor(const toml::node& node, const std::string& key, build::HostConfig& host,
                   ProblemList& problems);
void read_images(const toml::node& node, const std::string& key, build::HostConfig& host,
                 ProblemList& problems);
/// The keys of [build.executor] read_executor() accepts ("kind", "partition", ...).
[[nodiscard]] std::vector<std::string> executor_keys();

/// [recipes.NAME] (recipe_config.cpp): the recipe into `config.recipes` when it has no problem;
/// its interpreters, toolkits and images are checked against `host`.
void read_recipe(const std::string& name, const toml::node& node, const build::HostConfig& host,
                 build::RunnerConfig& config, ProblemList& problems);

/// The keys read_recipe() accepts, as dotted paths ("recipes.*.env.*").
[[nodiscard]] std::vector<std::string> recipe_keys();

}  // namespace wf::app::detail
