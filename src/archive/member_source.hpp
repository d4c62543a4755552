#pragma once
// Byte sources (wheelforge/archive/elf.hpp) over files and zip members: a region of an open file
// or of another source (a whole file, or a stored member read in place), and a deflated member
// inflated forward with libarchive, keeping only what is asked for.

#include <cstdint>
#include <memory>
#include <string>

#include "archive/archive_source.hpp"
#include "archive/zip_layout.hpp"
#include "wheelforge/archive/elf.hpp"
#include "wheelforge/util/fs.hpp"

namespace wf::archive {

/// [offset, offset + length) lies inside [0, size), without overflowing.
[[nodiscard]] inline bool range_fits(std::uint64_t offset, std::uint64_t length,
                                     std::uint64_t size) {
  return offset <= size && length <= size - offset;
}

/// A source over [base, base + size) of `parent` (which must outlive it).
[[nodiscard]] std::unique_ptr<ByteSource> make_region_source(ByteSource& parent, std::uint64_t base,
                                                             std::uint64_t size);

/// A source over [base, base + size) of a descriptor it owns.
[[nodiscard]] std::unique_ptr<ByteSource> make_region_source(UniqueFd fd, std::uint64_t base,
                                                             std::uint64_t size);

/// The same over a descriptor owned elsewhere (which must outlive the source).
[[nodiscard]] std::unique_ptr<ByteSource> make_region_source(int fd, std::uint64_t base,
                                                             std::uint64_t size);

/// Where a member's data begins: after its local header, name and extra field. The layout scan
/// has checked the local header; fails with Errc::io on a read error, Errc::invalid when the
/// header is not there.
[[nodiscard]] Result<std::uint64_t> member_data_offset(ByteSource& file, const ZipMember& member);
/// The same in the file open at `fd`, `file_size` bytes long.
[[nodiscard]] Result<std::uint64_t> member_data_offset(int fd, std::uint64_t file_size,
                                                       const ZipMember& member);

/// Bytes that may still be inflated, shared by every member source of one wheel.
struct InflateBudget {
  std::uint64_t remaining = 0;
  std::uint64_t limit = 0;
  bool exhausted = false;  ///< set when a read failed for want of budget
};

/// A deflated member, read forward. libarchive's streaming zip reader is fed the file from the
/// member's local header on and reads that one member, so reaching it costs nothing and no
/// other member is inflated. Reads at or after the current position inflate up to the end of
/// the range and keep [min(offset, position - 64 KiB), position); a read starting before what
/// is kept starts a new pass from the beginning of the member. Fails (Errc::invalid) beyond
/// `max_passes` passes, beyond the budget, or when the stream is damaged or ends early.
class InflatingMemberSource final : public ByteSource {
 public:
  /// libarchive may read `file` to its end (after the data it reads the data descriptor, if
  /// any); `file` must outlive the source.
  InflatingMemberSource(ByteSource& file, const ZipMember& member, InflateBudget& budget,
                        std::uint32_t max_passes);
  ~InflatingMemberSource() override;

  [[nodiscard]] std::uint64_t size() const override { return size_; }
  [[nodiscard]] Result<std::string> read_at(std::uint64_t offset, std::size_t length) override;

  /// Passes started so far (for tests and logs).
  [[nodiscard]] std::uint32_t passes() const { return passes_; }

 private:
  struct Feed;

  Status start_pass();
  Status inflate_block();

  ByteSource& file_;
  std::string name_;
  std::uint64_t begin_;  // local header offset
  std::uint64_t end_;
  std::uint64_t size_;
  InflateBudget& budget_;
  std::uint32_t max_passes_;
  std::uint32_t passes_ = 0;
  std::unique_ptr<Feed> feed_;
  ArchiveReader reader_;
  std::uint64_t position_ = 0;      // inflated bytes so far in this pass
  std::uint64_t window_start_ = 0;  // member offset of window_[0]
  std::string window_;
  std::string block_;
};

}  // namespace wf::archive
