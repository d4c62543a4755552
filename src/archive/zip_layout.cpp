#include "archive/zip_layout.hpp"

#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <string_view>

#include "archive/member_checks.hpp"
#include "archive/member_source.hpp"
#include "wheelforge/util/fs.hpp"

namespace wf::archive {
namespace {

constexpr std::uint32_t kLocalSignature = 0x04034b50U;
constexpr std::uint32_t kCentralSignature = 0x02014b50U;
constexpr std::uint32_t kEndSignature = 0x06054b50U;
constexpr std::uint32_t kZip64EndSignature = 0x06064b50U;
constexpr std::uint32_t kZip64LocatorSignature = 0x07064b50U;

constexpr std::size_t kLocalSize = 30;
constexpr std::size_t kCentralSize = 46;
constexpr std::size_t kEndSize = 22;
constexpr std::size_t kZip64LocatorSize = 20;
constexpr std::size_t kZip64EndSize = 56;
constexpr std::size_t kMaxComment = 0xffff;

constexpr std::uint16_t kMax16 = 0xffffU;
constexpr std::uint32_t kMax32 = 0xffffffffU;
constexpr std::uint16_t kZip64ExtraId = 0x0001U;
// Marks a member whose local header offset could not be decoded (already reported).
constexpr std::uint64_t kUnknownOffset = ~std::uint64_t{0};

constexpr std::uint16_t kFlagEncrypted = 0x0001U;
constexpr std::uint16_t kFlagDataDescriptor = 0x0008U;
constexpr std::uint16_t kFlagStrongEncryption = 0x0040U;
constexpr std::uint16_t kMethodAes = 99;

constexpr std::size_t kReadChunk = std::size_t{64} * 1024U;

std::uint16_t le16(std::string_view b, std::size_t at) {
  return static_cast<std::uint16_t>(static_cast<unsigned char>(b[at]) |
                                    (static_cast<unsigned char>(b[at + 1]) << 8U));
}

std::uint32_t le32(std::string_view b, std::size_t at) {
  return static_cast<std::uint32_t>(le16(b, at)) |
         (static_cast<std::uint32_t>(le16(b, at + 2)) << 16U);
}

std::uint64_t le64(std::string_view b, std::size_t at) {
  return static_cast<std::uint64_t>(le32(b, at)) |
         (static_cast<std::uint64_t>(le32(b, at + 4)) << 32U);
}

// Exactly `size` bytes at `offset`; reaching the end of the file first means the zip lies about
// its own layout.
Result<std::string> read_at(ByteSource& file, std::uint64_t offset, std::size_t size) {
  if (!range_fits(offset, size, file.size())) return invalid("the zip archive is truncated");
  return file.read_at(offset, size);
}

// Sequential reads through [begin, end) in chunks: the central directory of a large wheel is
// tens of megabytes, which we neither want in one allocation nor one syscall per field.
class RegionReader {
 public:
  RegionReader(ByteSource& file, std::uint64_t begin, std::uint64_t end)
      : file_(file), pos_(begin), end_(end) {}

  // The next `n` bytes, valid until the next call.
  Result<std::string_view> take(std::size_t n) {
    if (n > end_ - pos_) return invalid("the central directory is truncated");
    if (buffer_.size() - used_ < n) {
      buffer_.erase(0, used_);
      used_ = 0;
      const std::uint64_t buffered_end = pos_ + buffer_.size();
      const std::uint64_t want =
          std::min<std::uint64_t>(std::max(n - buffer_.size(), kReadChunk), end_ - buffered_end);
      auto more = read_at(file_, buffered_end, static_cast<std::size_t>(want));
      if (!more) return more.error();
      buffer_ += *more;
    }
    const std::string_view view = std::string_view(buffer_).substr(used_, n);
    used_ += n;
    pos_ += n;
    return view;
  }

  [[nodiscard]] std::uint64_t position() const { return pos_; }

 private:
  ByteSource& file_;
  std::uint64_t pos_;
  std::uint64_t end_;
  std::string buffer_;
  std::size_t used_ = 0;
};

// The data of extra block `id`; nullopt when absent or when the blocks overrun the field.
std::optional<std::string_view> find_extra(std::string_view extra, std::uint16_t id) {
  while (extra.size() >= 4) {
    const std::uint16_t block_id = le16(extra, 0);
    const std::uint16_t block_size = le16(extra, 2);
    if (block_size > extra.size() - 4) return std::nullopt;
    if (block_id == id) return extra.substr(4, block_size);
    extra.remove_prefix(4U + block_size);
  }
  return std::nullopt;
}

// Replaces the 32-bit fields that are 0xffffffff by their zip64 values, which follow each
// other in a fixed order for exactly the saturated fields. False when the zip64 block is
// missing or too short.
bool apply_zip64(std::string_view extra, std::uint64_t& uncompressed, std::uint64_t& compressed,
                 std::uint64_t* local_offset) {
  const bool need_uncompressed = uncompressed == kMax32;
  const bool need_compressed = compressed == kMax32;
  const bool need_offset = local_offset != nullptr && *local_offset == kMax32;
  if (!need_uncompressed && !need_compressed && !need_offset) return true;
  const auto block = find_extra(extra, kZip64ExtraId);
  if (!block) return false;
  std::size_t at = 0;
  auto next = [&](std::uint64_t& field) {
    if (block->size() - at < 8) return false;
    field = le64(*block, at);
    at += 8;
    return true;
  };
  if (need_uncompressed && !next(uncompressed)) return false;
  if (need_compressed && !next(compressed)) return false;
  if (need_offset && !next(*local_offset)) return false;
  return true;
}

struct CentralDirectory {
  std::uint64_t entries = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
};

Error multi_volume() {
  return invalid("multi-volume zip archives are not supported");
}

// Finds the end records and returns where the central directory is. The end record must close
// the file exactly (its comment included) and the central directory must end where the end
// records begin: anything else means bytes that some zip readers see and others skip.
Result<CentralDirectory> locate_central_directory(ByteSource& file, std::uint64_t file_size) {
  if (file_size < kEndSize) return invalid("not a zip archive");
  const auto tail_size =
      static_cast<std::size_t>(std::min<std::uint64_t>(file_size, kEndSize + kMaxComment));
  const std::uint64_t tail_offset = file_size - tail_size;
  auto tail = read_at(file, tail_offset, tail_size);
  if (!tail) return tail.error();

  std::optional<std::size_t> end_at;
  bool saw_signature = false;
  for (std::size_t i = tail_size - kEndSize + 1; i-- > 0;) {
    if (le32(*tail, i) != kEndSignature) continue;
    saw_signature = true;
    if (i + kEndSize + le16(*tail, i + 20) == tail_size) {
      end_at = i;
      break;
    }
  }
  if (!end_at) {
    return invalid(saw_signature ? "trailing data after the end of the zip archive"
                                 : "not a zip archive");
  }
  const std::string_view end = std::string_view(*tail).substr(*end_at, kEndSize);
  const std::uint64_t end_offset = tail_offset + *end_at;
  const std::uint16_t disk = le16(end, 4);
  const std::uint16_t directory_disk = le16(end, 6);
  const std::uint16_t entries_on_disk = le16(end, 8);
  const std::uint16_t entries = le16(end, 10);
  const std::uint32_t size = le32(end, 12);
  const std::uint32_t offset = le32(end, 16);

  CentralDirectory cd{entries, offset, size};
  std::uint64_t directory_end = end_offset;

  std::optional<std::string> locator;
  if (end_offset >= kZip64LocatorSize) {
    auto bytes = read_at(file, end_offset - kZip64LocatorSize, kZip64LocatorSize);
    if (!bytes) return bytes.error();
    if (le32(*bytes, 0) == kZip64LocatorSignature) locator = std::move(*bytes);
  }
  if (locator) {
    const std::uint64_t locator_offset = end_offset - kZip64LocatorSize;
    if (le32(*locator, 4) != 0 || le32(*locator, 16) != 1) return multi_volume();
    const std::uint64_t record_offset = le64(*locator, 8);
    if (record_offset > locator_offset || locator_offset - record_offset < kZip64EndSize) {
      return invalid("the zip64 end record is not where its locator says");
    }
    auto record = read_at(file, record_offset, kZip64EndSize);
    if (!record) return record.error();
    if (le32(*record, 0) != kZip64EndSignature ||
        le64(*record, 4) != locator_offset - record_offset - 12) {
      return invalid("the zip64 end record is not where its locator says");
    }
    if (le32(*record, 16) != 0 || le32(*record, 20) != 0 ||
        le64(*record, 24) != le64(*record, 32)) {
      return multi_volume();
    }
    cd = CentralDirectory{le64(*record, 32), le64(*record, 48), le64(*record, 40)};
    directory_end = record_offset;
  } else if (disk == kMax16 || directory_disk == kMax16 || entries == kMax16 ||
             entries_on_disk == kMax16 || size == kMax32 || offset == kMax32) {
    return invalid("the zip64 end records are missing");
  } else if (disk != 0 || directory_disk != 0 || entries_on_disk != entries) {
    return multi_volume();
  }

  if (cd.offset > directory_end || directory_end - cd.offset != cd.size) {
    return invalid(
        "the central directory is not where the end record says (data prepended to the archive "
        "or inserted before its end)");
  }
  return cd;
}

Result<std::vector<ZipMember>> read_central_directory(ByteSource& file, const CentralDirectory& cd,
                                                      CappedProblems& problems) {
  std::vector<ZipMember> members;
  members.reserve(static_cast<std::size_t>(cd.entries));
  RegionReader reader(file, cd.offset, cd.offset + cd.size);
  for (std::uint64_t i = 0; i < cd.entries; ++i) {
    auto fixed = reader.take(kCentralSize);
    if (!fixed) return fixed.error();
    if (le32(*fixed, 0) != kCentralSignature) {
      return invalid("central directory entry " + std::to_string(i + 1) + " is damaged");
    }
    ZipMember m;
    m.flags = le16(*fixed, 8);
    m.method = le16(*fixed, 10);
    m.crc32 = le32(*fixed, 16);
    m.compressed_size = le32(*fixed, 20);
    m.uncompressed_size = le32(*fixed, 24);
    const std::size_t name_size = le16(*fixed, 28);
    const std::size_t extra_size = le16(*fixed, 30);
    const std::size_t comment_size = le16(*fixed, 32);
    const std::uint16_t start_disk = le16(*fixed, 34);
    m.local_header_offset = le32(*fixed, 42);

    auto name = reader.take(name_size);
    if (!name) return name.error();
    m.name = std::string(*name);
    auto extra = reader.take(extra_size);
    if (!extra) return extra.error();
    if (!apply_zip64(*extra, m.uncompressed_size, m.compressed_size, &m.local_header_offset)) {
      problems.add("member " + quote_name(m.name) + " has a damaged zip64 extra field");
      m.local_header_offset = kUnknownOffset;
    }
    if (start_disk != 0 && start_disk != kMax16) {
      problems.add("member " + quote_name(m.name) + " starts on another volume");
    }
    if (auto comment = reader.take(comment_size); !comment) return comment.error();
    members.push_back(std::move(m));
  }
  if (reader.position() != cd.offset + cd.size) {
    return invalid("the central directory holds more than the end record says");
  }
  return members;
}

void check_member_fields(const std::vector<ZipMember>& members, CappedProblems& problems) {
  for (const auto& m : members) {
    check_member_name(m.name, problems);
    if ((m.flags & (kFlagEncrypted | kFlagStrongEncryption)) != 0 || m.method == kMethodAes) {
      problems.add("member " + quote_name(m.name) + " is encrypted");
    } else if (m.method != kMethodStored && m.method != kMethodDeflate) {
      problems.add("member " + quote_name(m.name) + " uses unsupported compression method " +
                   std::to_string(m.method));
    }
  }

  std::vector<std::string_view> names;
  names.reserve(members.size());
  for (const auto& m : members) names.emplace_back(m.name);
  std::sort(names.begin(), names.end());
  for (std::size_t i = 1; i < names.size(); ++i) {
    if (names[i] == names[i - 1] && (i == 1 || names[i - 2] != names[i])) {
      problems.add("duplicate member name " + quote_name(names[i]));
    }
  }
}

// Where a member's bytes lie, as its local header tells.
struct Extent {
  std::uint64_t begin = 0;  // local header offset
  std::uint64_t end = 0;    // end of the compressed data
  bool data_descriptor = false;
  const ZipMember* member = nullptr;
};

// Compares the local header with the central-directory entry: readers that stream a zip see
// only local headers, readers that seek see the central directory, and both must see the same
// member.
Result<std::optional<Extent>> check_local_header(ByteSource& file, const ZipMember& m,
                                                 std::uint64_t directory_offset,
                                                 CappedProblems& problems) {
  if (m.local_header_offset == kUnknownOffset) return std::optional<Extent>{};
  const std::string who = "member " + quote_name(m.name);
  if (m.local_header_offset > directory_offset ||
      directory_offset - m.local_header_offset < kLocalSize + m.name.size()) {
    problems.add(who + " has its local header outside the member data");
    return std::optional<Extent>{};
  }
  auto header = read_at(file, m.local_header_offset, kLocalSize + m.name.size());
  if (!header) return header.error();
  if (le32(*header, 0) != kLocalSignature) {
    problems.add(who + " has no local header at offset " + std::to_string(m.local_header_offset));
    return std::optional<Extent>{};
  }
  const std::uint16_t flags = le16(*header, 6);
  const std::uint16_t method = le16(*header, 8);
  const std::uint32_t crc = le32(*header, 14);
  std::uint64_t compressed = le32(*header, 18);
  std::uint64_t uncompressed = le32(*header, 22);
  const std::size_t name_size = le16(*header, 26);
  const std::size_t extra_size = le16(*header, 28);

  bool consistent = true;
  if (name_size != m.name.size() || std::string_view(*header).substr(kLocalSize) != m.name) {
    problems.add(who + " has a different name in its local header");
    consistent = false;
  }
  if (method != m.method || (flags & kFlagEncrypted) != (m.flags & kFlagEncrypted)) {
    problems.add(who + " has a different compression method or encryption in its local header");
    consistent = false;
  }
  // With a data descriptor the local header carries zeros and the real values follow the data.
  if ((flags & kFlagDataDescriptor) == 0) {
    if (compressed == kMax32 || uncompressed == kMax32) {
      auto extra = read_at(file, m.local_header_offset + kLocalSize + name_size, extra_size);
      if (!extra) return extra.error();
      if (!apply_zip64(*extra, uncompressed, compressed, nullptr)) {
        problems.add(who + " has a damaged zip64 extra field in its local header");
        return std::optional<Extent>{};
      }
    }
    if (crc != m.crc32 || compressed != m.compressed_size || uncompressed != m.uncompressed_size) {
      problems.add(who + " has a different CRC or size in its local header");
      consistent = false;
    }
  }
  if (!consistent) return std::optional<Extent>{};

  const std::uint64_t data_begin = m.local_header_offset + kLocalSize + name_size + extra_size;
  if (data_begin > directory_offset || directory_offset - data_begin < m.compressed_size) {
    problems.add(who + " has data running into the central directory");
    return std::optional<Extent>{};
  }
  return std::optional<Extent>{Extent{m.local_header_offset, data_begin + m.compressed_size,
                                      (flags & kFlagDataDescriptor) != 0, &m}};
}

// A data descriptor is 12 to 24 bytes depending on its optional signature and zip64 sizes; any
// other gap is data that no member accounts for.
bool gap_explained(std::uint64_t gap, bool data_descriptor) {
  return gap == 0 || (data_descriptor && (gap == 12 || gap == 16 || gap == 20 || gap == 24));
}

void check_extents(std::vector<Extent>& extents, std::uint64_t directory_offset,
                   CappedProblems& problems) {
  if (extents.empty()) return;
  std::sort(extents.begin(), extents.end(),
            [](const Extent& a, const Extent& b) { return a.begin < b.begin; });
  if (extents.front().begin != 0) {
    problems.add(std::to_string(extents.front().begin) + " bytes of data before the first member");
  }
  for (std::size_t i = 0; i < extents.size(); ++i) {
    const Extent& e = extents[i];
    const std::uint64_t next = i + 1 < extents.size() ? extents[i + 1].begin : directory_offset;
    if (e.end > next) {
      problems.add("member " + quote_name(e.member->name) + " overlaps member " +
                   quote_name(extents[i + 1].member->name));
    } else if (!gap_explained(next - e.end, e.data_descriptor)) {
      problems.add(std::to_string(next - e.end) + " bytes of unexplained data after member " +
                   quote_name(e.member->name));
    }
  }
}

}  // namespace

Result<std::vector<ZipMember>> scan_zip_layout(ByteSource& file, const Limits& limits,
                                               CappedProblems& problems) {
  const std::uint64_t file_size = file.size();
  auto cd = locate_central_directory(file, file_size);
  if (!cd) return cd.error();
  if (cd->entries > limits.max_members) return invalid(too_many_members(cd->entries, limits));
  if (cd->entries > cd->size / kCentralSize) {
    return invalid("the central directory is too small for its " + std::to_string(cd->entries) +
                   " entries");
  }
  if (cd->entries == 0 && cd->offset != 0) {
    problems.add(std::to_string(cd->offset) + " bytes of data before the end record");
  }

  auto members = read_central_directory(file, *cd, problems);
  if (!members) return members.error();
  // From the declared sizes, before anything is inflated.
  std::uint64_t inflated = 0;
  for (const auto& m : *members) {
    inflated =
        m.uncompressed_size > UINT64_MAX - inflated ? UINT64_MAX : inflated + m.uncompressed_size;
  }
  if (auto problem =
          inflated_size_problem("the wheel", inflated, file_size, limits, Total::complete)) {
    problems.add(std::move(*problem));
  }
  check_member_fields(*members, problems);

  std::vector<Extent> extents;
  extents.reserve(members->size());
  for (const auto& m : *members) {
    auto extent = check_local_header(file, m, cd->offset, problems);
    if (!extent) return extent.error();
    if (*extent) extents.push_back(**extent);
  }
  check_extents(extents, cd->offset, problems);
  return members;
}

Result<std::optional<std::uint64_t>> find_zip_end_record(ByteSource& file) {
  const std::uint64_t file_size = file.size();
  using Found = std::optional<std::uint64_t>;
  if (file_size < kEndSize) return Found{};
  const auto tail_size =
      static_cast<std::size_t>(std::min<std::uint64_t>(file_size, kEndSize + kMaxComment));
  const std::uint64_t tail_offset = file_size - tail_size;
  auto tail = read_at(file, tail_offset, tail_size);
  if (!tail) return tail.error();
  const auto central_signature_at = [&](std::uint64_t offset) -> Result<bool> {
    if (offset > file_size || file_size - offset < 4) return false;
    auto bytes = read_at(file, offset, 4);
    if (!bytes) return bytes.error();
    return le32(*bytes, 0) == kCentralSignature;
  };
  for (std::size_t i = tail_size - kEndSize + 1; i-- > 0;) {
    if (le32(*tail, i) != kEndSignature) continue;
    const std::uint64_t at = tail_offset + i;
    const std::uint16_t entries = le16(*tail, i + 10);
    const std::uint32_t size = le32(*tail, i + 12);
    const std::uint32_t offset = le32(*tail, i + 16);
    if (entries == 0 && size == 0) return Found{at};
    // Zip64: the 32-bit fields are saturated and the locator sits right before the record.
    if ((entries == kMax16 || size == kMax32 || offset == kMax32) && at >= kZip64LocatorSize) {
      auto locator = read_at(file, at - kZip64LocatorSize, 4);
      if (!locator) return locator.error();
      if (le32(*locator, 0) == kZip64LocatorSignature) return Found{at};
    }
    auto at_offset = central_signature_at(offset);
    if (!at_offset) return at_offset.error();
    if (*at_offset) return Found{at};
    if (size <= at) {
      auto before_record = central_signature_at(at - size);
      if (!before_record) return before_record.error();
      if (*before_record) return Found{at};
    }
  }
  return Found{};
}

Result<std::vector<ZipMember>> scan_zip_layout(int fd, std::uint64_t file_size,
                                               const Limits& limits, CappedProblems& problems) {
  auto file = make_region_source(fd, 0, file_size);
  return scan_zip_layout(*file, limits, problems);
}

Result<std::optional<std::uint64_t>> find_zip_end_record(int fd, std::uint64_t file_size) {
  auto file = make_region_source(fd, 0, file_size);
  return find_zip_end_record(*file);
}

}  // namespace wf::archive
