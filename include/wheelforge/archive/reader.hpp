#pragma once
// Reading distribution archives without extracting them. The only module that touches
// libarchive. Every function blocks on file I/O: call from worker threads. Each call owns its
// own archive state, so calls may run concurrently.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "wheelforge/util/result.hpp"

namespace wf::archive {

class ByteSource;  // wheelforge/archive/elf.hpp

/// What an archive may declare before it is refused. Each refusal names the limit and the
/// setting that configures it (in parentheses), e.g. "(max_archive_members)".
struct Limits {
  /// Largest inflated METADATA / PKG-INFO / WHEEL accepted; inflation stops at the cap.
  std::uint64_t max_metadata_bytes = std::uint64_t{4} * 1024U * 1024U;
  /// Most archive members accepted (max_archive_members).
  std::uint64_t max_members = 200'000;
  /// Largest total of the member sizes an archive declares: a wheel's central directory, an
  /// sdist's tar headers (max_inflated_size). A torch CUDA wheel declares 2 to 4 GiB; streaming
  /// through an sdist stops here.
  std::uint64_t max_inflated_bytes = std::uint64_t{16} * 1024U * 1024U * 1024U;
  /// Largest ratio of that total to the archive's own size (max_compression_ratio), judged
  /// once the total passes `ratio_floor_bytes`. Real wheels: 2 to 4 overall (torch), about 10
  /// for single members of cubin data; a deflate bomb: up to 1032.
  std::uint64_t max_compression_ratio = 100;
  /// Archives that inflate to no more than this are not judged by their ratio: small enough
  /// to be harmless, and small text-only archives can compress very well.
  std::uint64_t ratio_floor_bytes = std::uint64_t{16} * 1024U * 1024U;
};

struct WheelContents {
  std::string metadata;       ///< exact bytes of {dist-info}/METADATA
  std::string wheel;          ///< exact bytes of {dist-info}/WHEEL
  std::string dist_info_dir;  ///< e.g. "flash_attn-2.8.3+cu128torch2.8.dist-info"
  /// exact bytes of {dist-info}/variant.json when the wheel has one (PEP 825 variant wheels,
  /// docs/variants.md), read under the same cap as METADATA
  std::optional<std::string> variant_json;
};

/// Opens a wheel (zip) by seeking its central directory and reads the .dist-info METADATA and
/// WHEEL, and variant.json where it has one; member data other than those is never read.
///
/// The zip layout is checked first (end records, central directory, every local header), and
/// every problem found is reported together: data before, between or after the members,
/// central-directory entries that disagree with their local headers or overlap, more members
/// than `limits.max_members`, encrypted members, compression other than stored/deflate, member
/// names that are empty, absolute, contain `.`/`..`/empty components, backslashes or control
/// characters, duplicate names.
///
/// The member sizes the central directory declares must stay within `limits.max_inflated_bytes`
/// and `limits.max_compression_ratio` (nothing is inflated to find out); the two members read
/// are inflated no further than their declared sizes.
///
/// The archive must have exactly one top-level `.dist-info` directory, named
/// `{name}-{version}.dist-info` where name equals `expected_name` after name
/// normalization and version equals `expected_version` ignoring case and `-`/`_` (both as
/// written in the file name), and it must hold METADATA, WHEEL and RECORD, the first two as
/// regular files.
///
/// Fails with Errc::invalid naming the problem(s): "not a zip archive", "no .dist-info
/// directory", "several .dist-info directories", "... does not match the file name",
/// "{dir}/METADATA is missing" (WHEEL, RECORD likewise), "the wheel inflates to N bytes, more
/// than ...", "{dir}/METADATA inflates to more than N bytes", a data error of METADATA/WHEEL
/// (bad CRC, more data than declared), the layout problems above.
/// Fails with Errc::io when the file cannot be opened or read.
[[nodiscard]] Result<WheelContents> read_wheel(const std::filesystem::path& path,
                                               std::string_view expected_name,
                                               std::string_view expected_version,
                                               const Limits& limits = {});
/// The same over any source of the wheel's bytes (a blob in an object store read by ranges):
/// reads the end records, the central directory, the local headers and the members named
/// above. A failed read of `file` is returned with its own code (unavailable for an object
/// store that cannot be reached), not as a damaged archive.
[[nodiscard]] Result<WheelContents> read_wheel(ByteSource& file, std::string_view expected_name,
                                               std::string_view expected_version,
                                               const Limits& limits = {});

/// Reads PKG-INFO from the top directory of an sdist (.tar.gz) by streaming through the whole
/// archive. Every member must lie in one top directory `{top}`; member names follow the same
/// rules as in read_wheel, and links must not point outside `{top}`. Members are files,
/// directories and links only: sparse files, character and block devices, FIFOs and sockets
/// are refused. A file that zip readers would also take for a zip (an end-of-central-directory
/// record where they look for one, naming a central directory inside the file) is refused
/// before it is read: one upload, two different archives depending on the tool.
/// Fails with Errc::invalid naming the problem(s): "not a gzip-compressed tar archive", "no
/// PKG-INFO in the top directory", members outside the top directory, escaping links, bad or
/// duplicate names, member types, "the sdist is also a zip archive", PKG-INFO above
/// `limits.max_metadata_bytes`, more than `limits.max_members` members, declared sizes above
/// `limits.max_inflated_bytes` or `limits.max_compression_ratio`, a damaged stream.
/// Fails with Errc::io when the file cannot be opened or read.
[[nodiscard]] Result<std::string> read_sdist_pkg_info(const std::filesystem::path& path,
                                                      const Limits& limits = {});

}  // namespace wf::archive
