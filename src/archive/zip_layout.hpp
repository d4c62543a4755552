#pragma once
// Our own reading of a zip's end records, central directory and local headers, done before
// libarchive sees the file. libarchive is lenient where a hostile wheel needs strictness: it
// silently corrects for prepended data, tolerates trailing data, rewrites backslashes in names,
// hides entries that share a local header and never compares local and central names. Zip
// parsers that disagree about a wheel's contents are an attack vector, so the layout must be
// unambiguous before we read anything from it.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "archive/member_checks.hpp"
#include "wheelforge/archive/elf.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::archive {

/// A zip member's compression methods.
inline constexpr std::uint16_t kMethodStored = 0;
inline constexpr std::uint16_t kMethodDeflate = 8;

/// One central-directory entry, with zip64 values already applied.
struct ZipMember {
  std::string name;  ///< raw bytes as stored in the central directory
  std::uint16_t flags = 0;
  std::uint16_t method = 0;
  std::uint32_t crc32 = 0;
  std::uint64_t compressed_size = 0;
  std::uint64_t uncompressed_size = 0;
  std::uint64_t local_header_offset = 0;
};

/// Reads and checks the layout of the zip `file` with positional reads (a descriptor's offset is
/// untouched). Returns the members in
/// central-directory order.
/// Fails with Errc::invalid when the file is not a zip, has more than `limits.max_members`
/// members, or its end records or central directory cannot be trusted (trailing or prepended
/// data, multi-volume, truncated); with Errc::io on a read error.
/// Problems of single members (names, duplicates, encryption, compression method, local header
/// disagreeing with the central directory, overlapping members, unexplained bytes between
/// members) and member sizes adding up to more than `limits` allow (inflated_size_problem) are
/// added to `problems`; the members are still returned.
[[nodiscard]] Result<std::vector<ZipMember>> scan_zip_layout(ByteSource& file, const Limits& limits,
                                                             CappedProblems& problems);
/// The same over the zip open at `fd`, `file_size` bytes long.
[[nodiscard]] Result<std::vector<ZipMember>> scan_zip_layout(int fd, std::uint64_t file_size,
                                                             const Limits& limits,
                                                             CappedProblems& problems);

/// Where a zip reader would find an end-of-central-directory record in `file`: the offset of a
/// record in the last 64 KiB + 22 bytes whose central directory (at its recorded offset, or right
/// before the record as readers that tolerate prepended data assume) starts with a
/// central-directory signature, or that describes an empty zip. nullopt when there is none. For
/// files that must not be zips: a signature alone, which compressed data contains by chance, is not
/// enough. Fails with Errc::io on a read error.
[[nodiscard]] Result<std::optional<std::uint64_t>> find_zip_end_record(ByteSource& file);
/// The same over the file open at `fd`, `file_size` bytes long.
[[nodiscard]] Result<std::optional<std::uint64_t>> find_zip_end_record(int fd,
                                                                       std::uint64_t file_size);

}  // namespace wf::archive
