#pragma once
// Glue between libarchive and our files: ownership of the archive object, a data source over a
// file descriptor, and bounded reads of one member's data.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/archive/elf.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/result.hpp"

struct archive;
struct archive_entry;

namespace wf::archive {

struct ArchiveReadDeleter {
  void operator()(struct ::archive* a) const;
};
/// An archive_read object, freed on destruction.
using ArchiveReader = std::unique_ptr<struct ::archive, ArchiveReadDeleter>;

/// A new archive_read object; never null (libarchive only fails to allocate).
[[nodiscard]] ArchiveReader new_archive_reader();

/// libarchive's last error message for `a`, or "unknown error".
[[nodiscard]] std::string archive_error(struct ::archive* a);

/// A regular file opened for reading, with its size.
struct OpenFile {
  UniqueFd fd;
  std::uint64_t size = 0;
};

/// Opens `path` read-only. Fails with Errc::io when it cannot be opened or is not a regular
/// file.
[[nodiscard]] Result<OpenFile> open_archive_file(const std::filesystem::path& path);

enum class Seeking { no, yes };

/// Feeds libarchive from a file descriptor with positional reads, so that other positional
/// reads of the same descriptor do not disturb it. Must outlive the archive it is opened on.
class FdSource {
 public:
  FdSource(int fd, std::uint64_t size) : fd_(fd), size_(size), buffer_(kBufferSize) {}
  FdSource(const FdSource&) = delete;
  FdSource& operator=(const FdSource&) = delete;

  /// Installs the read (and, with Seeking::yes, seek and skip) callbacks on `a` and opens it.
  /// Returns archive_read_open1's status (ARCHIVE_OK on success).
  int open(struct ::archive* a, Seeking seeking);

 private:
  friend struct FdSourceCallbacks;
  static constexpr std::size_t kBufferSize = std::size_t{64} * 1024U;

  int fd_;
  std::uint64_t size_;
  std::uint64_t position_ = 0;
  std::vector<char> buffer_;
};

/// Feeds libarchive from a ByteSource (a blob read by ranges), in blocks of at most 64 KiB, as
/// FdSource does from a descriptor. `source` must outlive it, and it the archive it is opened
/// on.
class ByteSourceFeed {
 public:
  explicit ByteSourceFeed(ByteSource& source) : source_(source), size_(source.size()) {}
  ByteSourceFeed(const ByteSourceFeed&) = delete;
  ByteSourceFeed& operator=(const ByteSourceFeed&) = delete;

  /// As FdSource::open.
  int open(struct ::archive* a, Seeking seeking);

  /// The error of the source's last failed read, which libarchive only saw as a failed read;
  /// nullopt while every read worked.
  [[nodiscard]] const std::optional<Error>& failure() const { return failure_; }

 private:
  friend struct FeedCallbacks;
  static constexpr std::size_t kBlockSize = std::size_t{64} * 1024U;

  ByteSource& source_;
  std::uint64_t size_;
  std::uint64_t position_ = 0;
  std::string buffer_;
  std::optional<Error> failure_;
};

/// Reads the data of the member `a` is positioned on, whose header is `entry`. `what` names it
/// in messages.
/// Fails with Errc::invalid: "{what} inflates to more than {max_bytes} bytes" (declared or
/// actual size; inflation stops at the cap), or "{what} cannot be read: ..." on a data error
/// (bad CRC, wrong size, damaged stream, more data than the entry declares: inflation stops
/// at the declared size).
[[nodiscard]] Result<std::string> read_member_data(struct ::archive* a, struct archive_entry* entry,
                                                   std::string_view what, std::uint64_t max_bytes);

}  // namespace wf::archive
