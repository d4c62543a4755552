#pragma once
// Reading distribution archives without extracting them. The only module that touches
// libarchive. Every function blocks on file I/O: call from worker threads. Each call owns its
// own archive state, so calls may run concurrently.

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "wheelforge/util/result.hpp"

namespace wf::archive {

struct Limits {
  /// Largest inflated METADATA / PKG-INFO / WHEEL accepted; inflation stops at the cap.
  std::uint64_t max_metadata_bytes = std::uint64_t{4} * 1024U * 1024U;
  /// Most archive members accepted.
  std::uint64_t max_members = 200'000;
  /// Largest total of the member sizes declared in an sdist's tar stream; streaming through
  /// a gzip bomb stops there.
  std::uint64_t max_sdist_inflated_bytes = 4ULL * 1024U * 1024U * 1024U;
};

struct WheelContents {
  std::string metadata;       ///< exact bytes of {dist-info}/METADATA
  std::string wheel;          ///< exact bytes of {dist-info}/WHEEL
  std::string dist_info_dir;  ///< e.g. "flash_attn-2.8.3+cu128torch2.8.dist-info"
};

/// Opens a wheel (zip) by seeking its central directory and reads the .dist-info METADATA and
/// WHEEL; member data other than those two is never read.
///
/// The zip layout is checked first (end records, central directory, every local header), and
/// every problem found is reported together: data before, between or after the members,
/// central-directory entries that disagree with their local headers or overlap, more members
/// than `limits.max_members`, encrypted members, compression other than stored/deflate, member
/// names that are empty, absolute, contain `.`/`..`/empty components, backslashes or control
/// characters, duplicate names.
///
/// The archive must have exactly one top-level `.dist-info` directory, named
/// `{name}-{version}.dist-info` where name equals `expected_name` after PEP 503
/// normalization and version equals `expected_version` ignoring case and `-`/`_` (both as
/// written in the file name), and it must hold METADATA and WHEEL as regular files.
///
/// Fails with Errc::invalid naming the problem(s): "not a zip archive", "no .dist-info
/// directory", "several .dist-info directories", "... does not match the file name",
/// "{dir}/METADATA is missing", "{dir}/WHEEL is missing", "{dir}/METADATA inflates to more than
/// N bytes", a data error of METADATA/WHEEL (bad CRC, wrong size), the layout problems above.
/// Fails with Errc::io when the file cannot be opened or read.
[[nodiscard]] Result<WheelContents> read_wheel(const std::filesystem::path& path,
                                               std::string_view expected_name,
                                               std::string_view expected_version,
                                               const Limits& limits = {});

/// Reads PKG-INFO from the top directory of an sdist (.tar.gz) by streaming through the whole
/// archive. Every member must lie in one top directory `{top}`; member names follow the same
/// rules as in read_wheel, and links must not point outside `{top}`.
/// Fails with Errc::invalid naming the problem(s): "not a gzip-compressed tar archive", "no
/// PKG-INFO in the top directory", members outside the top directory, escaping links, bad or
/// duplicate names, PKG-INFO above `limits.max_metadata_bytes`, more than `limits.max_members`
/// members, declared sizes above `limits.max_sdist_inflated_bytes`, a damaged stream.
/// Fails with Errc::io when the file cannot be opened or read.
[[nodiscard]] Result<std::string> read_sdist_pkg_info(const std::filesystem::path& path,
                                                      const Limits& limits = {});

}  // namespace wf::archive
