#pragma once
// Reading distribution archives without extracting them. The only module that touches
// libarchive. Every function blocks on file I/O: call from worker threads.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "wheelforge/util/result.hpp"

namespace wf::archive {

struct Limits {
  /// Largest inflated METADATA / PKG-INFO / WHEEL accepted; inflation stops at the cap.
  std::uint64_t max_metadata_bytes = 4U * 1024U * 1024U;
  /// Most archive members accepted.
  std::uint64_t max_members = 200'000;
};

struct WheelContents {
  std::string metadata;  ///< exact bytes of {dist-info}/METADATA
  std::string wheel;     ///< exact bytes of {dist-info}/WHEEL
  std::string dist_info_dir;  ///< e.g. "flash_attn-2.8.3+cu128torch2.8.dist-info"
};

/// Opens a wheel (zip) by seeking its central directory and reads the .dist-info METADATA and
/// WHEEL. The .dist-info directory is the one named `{name}-{version}.dist-info` where name
/// and version are compared after normalization with `expected_name` / `expected_version`
/// (normalized project name and version text from the file name).
/// Fails with Errc::invalid naming the problem: not a zip, no .dist-info, missing METADATA or
/// WHEEL, several .dist-info directories, a member above the size cap.
[[nodiscard]] Result<WheelContents> read_wheel(const std::filesystem::path& path,
                                               std::string_view expected_name,
                                               std::string_view expected_version,
                                               const Limits& limits = {});

/// Reads PKG-INFO from the top directory of an sdist (.tar.gz) by streaming through the
/// archive. Fails with Errc::invalid when the file is not a gzip'd tar or has no
/// `{top}/PKG-INFO`.
[[nodiscard]] Result<std::string> read_sdist_pkg_info(const std::filesystem::path& path,
                                                      const Limits& limits = {});

}  // namespace wf::archive
