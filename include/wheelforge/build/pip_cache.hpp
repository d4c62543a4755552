#pragma once
// The pip cache that build environments share (DATA_DIR/builds/pip-cache, `[build] pip_cache`):
// the install commands of every job (the build environment's requirements, the smoke test's
// torch) run with PIP_CACHE_DIR there, so that a torch of several GiB with its nvidia-* wheels
// is downloaded once, not once per job. Its size is bounded by trimming: the least recently
// used files go first. pip reads and writes the cache with atomic renames, so trimming while
// jobs install is safe (a file removed under pip is downloaded again).

#include <cstdint>
#include <filesystem>

namespace wf::build {

/// The cache's directory under a data directory's builds directory.
[[nodiscard]] std::filesystem::path pip_cache_dir(const std::filesystem::path& builds_dir);

/// What trim_pip_cache() found and removed.
struct CacheTrim {
  std::uint64_t bytes_before = 0;  ///< on disk before (allocated blocks)
  std::size_t removed = 0;         ///< files removed
  std::uint64_t removed_bytes = 0;
};

/// When the files under `dir` take more than `limit` bytes on disk, removes the least recently
/// used (by access or modification time, whichever is later) until they take at most 7/8 of it,
/// so that a cache near its bound is not trimmed after every job. `limit` 0 or a missing
/// directory: nothing. Blocks on the directory walk.
CacheTrim trim_pip_cache(const std::filesystem::path& dir, std::uint64_t limit);

}  // namespace wf::build
