#pragma once
// Our own reading of a zip's end records, central directory and local headers, done before
// libarchive sees the file. libarchive is lenient where a hostile wheel needs strictness: it
// silently corrects for prepended data, tolerates trailing data, rewrites backslashes in names,
// hides entries that share a local header and never compares local and central names. Zip
// parsers that disagree about a wheel's contents are an attack vector, so the layout must be
// unambiguous before we read anything from it.

#include <cstdint>
#include <string>
#include <vector>

#include "archive/member_checks.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::archive {

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

/// Reads and checks the layout of the zip open at `fd`, which is `file_size` bytes long, with
/// positional reads (the descriptor's offset is untouched). Returns the members in
/// central-directory order.
/// Fails with Errc::invalid when the file is not a zip, has more than `max_members` members,
/// or its end records or central directory cannot be trusted (trailing or prepended data,
/// multi-volume, truncated); with Errc::io on a read error.
/// Problems of single members (names, duplicates, encryption, compression method, local header
/// disagreeing with the central directory, overlapping members, unexplained bytes between
/// members) are added to `problems`; the members are still returned.
[[nodiscard]] Result<std::vector<ZipMember>> scan_zip_layout(int fd, std::uint64_t file_size,
                                                             std::uint64_t max_members,
                                                             CappedProblems& problems);

}  // namespace wf::archive
