#pragma once
// Filesystem operations of the runner's threads. Each returns its failure as a Status naming
// the path (the std::filesystem overloads that throw are never used in src/build: a full disk
// or a permission problem must fail the job, not end the server).

#include <filesystem>
#include <initializer_list>
#include <string_view>
#include <system_error>
#include <vector>

#include "wheelforge/util/result.hpp"

namespace wf::build {

/// "<what> <path>: <reason>", storage_full for ENOSPC/EDQUOT, io otherwise.
[[nodiscard]] Error fs_error(std::string_view what, const std::filesystem::path& path,
                             const std::error_code& ec);

/// Creates `dir` and its parents (ok when it exists as a directory).
[[nodiscard]] Status make_directories(const std::filesystem::path& dir);
/// Removes `path` and everything below it (ok when it does not exist).
[[nodiscard]] Status remove_tree(const std::filesystem::path& path);
/// remove_tree(), then make_directories(): an empty directory.
[[nodiscard]] Status fresh_directory(const std::filesystem::path& dir);
/// The entries of a directory (not recursive), in no particular order.
[[nodiscard]] Result<std::vector<std::filesystem::directory_entry>> list_directory(
    const std::filesystem::path& dir);
/// Removes every entry of `dir` except those named in `keep`.
[[nodiscard]] Status clear_directory_except(const std::filesystem::path& dir,
                                            std::initializer_list<std::string_view> keep);

}  // namespace wf::build
