#include "archive/member_source.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "archive/member_checks.hpp"

namespace wf::archive {
namespace {

constexpr std::size_t kBlock = std::size_t{64} * 1024U;
// Kept behind the read position, so that a read that backs up a little (the next table
// starting inside the chunk just read) does not start a new pass.
constexpr std::uint64_t kWindow = std::uint64_t{64} * 1024U;
constexpr std::size_t kLocalHeaderSize = 30;

Result<std::string> pread_exact(int fd, std::uint64_t offset, std::size_t length) {
  std::string out(length, '\0');
  std::size_t done = 0;
  while (done < length) {
    const ssize_t n =
        ::pread(fd, out.data() + done, length - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_error(errno, "read");
    }
    if (n == 0) return invalid("the file ends early");
    done += static_cast<std::size_t>(n);
  }
  return out;
}

class FdRegionSource final : public ByteSource {
 public:
  FdRegionSource(int fd, UniqueFd owned, std::uint64_t base, std::uint64_t size)
      : fd_(fd), owned_(std::move(owned)), base_(base), size_(size) {}

  [[nodiscard]] std::uint64_t size() const override { return size_; }

  [[nodiscard]] Result<std::string> read_at(std::uint64_t offset, std::size_t length) override {
    if (!range_fits(offset, length, size_)) {
      return invalid("bytes " + std::to_string(offset) + "+" + std::to_string(length) +
                     " lie outside the " + std::to_string(size_) + "-byte file");
    }
    return pread_exact(fd_, base_ + offset, length);
  }

 private:
  int fd_;
  UniqueFd owned_;
  std::uint64_t base_;
  std::uint64_t size_;
};

// [base, base + size) of another source.
class SubrangeSource final : public ByteSource {
 public:
  SubrangeSource(ByteSource& parent, std::uint64_t base, std::uint64_t size)
      : parent_(parent), base_(base), size_(size) {}

  [[nodiscard]] std::uint64_t size() const override { return size_; }

  [[nodiscard]] Result<std::string> read_at(std::uint64_t offset, std::size_t length) override {
    if (!range_fits(offset, length, size_)) {
      return invalid("bytes " + std::to_string(offset) + "+" + std::to_string(length) +
                     " lie outside the " + std::to_string(size_) + "-byte member");
    }
    return parent_.read_at(base_ + offset, length);
  }

 private:
  ByteSource& parent_;
  std::uint64_t base_;
  std::uint64_t size_;
};

}  // namespace

std::unique_ptr<ByteSource> make_region_source(ByteSource& parent, std::uint64_t base,
                                               std::uint64_t size) {
  return std::make_unique<SubrangeSource>(parent, base, size);
}

std::unique_ptr<ByteSource> make_region_source(UniqueFd fd, std::uint64_t base,
                                               std::uint64_t size) {
  const int raw = fd.get();
  return std::make_unique<FdRegionSource>(raw, std::move(fd), base, size);
}

std::unique_ptr<ByteSource> make_region_source(int fd, std::uint64_t base, std::uint64_t size) {
  return std::make_unique<FdRegionSource>(fd, UniqueFd(), base, size);
}

Result<std::uint64_t> member_data_offset(ByteSource& file, const ZipMember& member) {
  if (!range_fits(member.local_header_offset, kLocalHeaderSize, file.size())) {
    return invalid("member " + quote_name(member.name) + " has no local header");
  }
  auto header = file.read_at(member.local_header_offset, kLocalHeaderSize);
  if (!header) return header.error();
  const auto le16 = [&](std::size_t at) {
    return static_cast<std::uint64_t>(static_cast<unsigned char>((*header)[at]) |
                                      (static_cast<unsigned char>((*header)[at + 1]) << 8U));
  };
  if (header->compare(0, 4, "PK\x03\x04") != 0) {
    return invalid("member " + quote_name(member.name) + " has no local header");
  }
  return member.local_header_offset + kLocalHeaderSize + le16(26) + le16(28);
}

Result<std::uint64_t> member_data_offset(int fd, std::uint64_t file_size, const ZipMember& member) {
  auto file = make_region_source(fd, 0, file_size);
  return member_data_offset(*file, member);
}

// libarchive's input: the file from the member's local header on, in blocks.
struct InflatingMemberSource::Feed {
  ByteSource* file = nullptr;
  std::uint64_t position = 0;
  std::uint64_t end = 0;
  std::string buffer;

  static la_ssize_t read(struct ::archive* a, void* data, const void** out) {
    auto* self = static_cast<Feed*>(data);
    const auto want =
        static_cast<std::size_t>(std::min<std::uint64_t>(kBlock, self->end - self->position));
    if (want == 0) return 0;
    auto bytes = self->file->read_at(self->position, want);
    if (!bytes) {
      archive_set_error(a, EIO, "%s", bytes.error().message.c_str());
      return -1;
    }
    self->buffer = std::move(*bytes);
    self->position += self->buffer.size();
    *out = self->buffer.data();
    return static_cast<la_ssize_t>(self->buffer.size());
  }
};

InflatingMemberSource::InflatingMemberSource(ByteSource& file, const ZipMember& member,
                                             InflateBudget& budget, std::uint32_t max_passes)
    : file_(file),
      name_(member.name),
      begin_(member.local_header_offset),
      end_(file.size()),
      size_(member.uncompressed_size),
      budget_(budget),
      max_passes_(max_passes) {}

InflatingMemberSource::~InflatingMemberSource() = default;

Status InflatingMemberSource::start_pass() {
  if (passes_ >= max_passes_) {
    return invalid("reading " + quote_name(name_) + " needs more than " +
                   std::to_string(max_passes_) + " passes over the deflated member");
  }
  ++passes_;
  reader_.reset();
  feed_ = std::make_unique<Feed>();
  feed_->file = &file_;
  feed_->position = begin_;
  feed_->end = end_;
  reader_ = new_archive_reader();
  archive_read_support_format_zip_streamable(reader_.get());
  archive_read_set_callback_data(reader_.get(), feed_.get());
  archive_read_set_read_callback(reader_.get(), &Feed::read);
  if (archive_read_open1(reader_.get()) != ARCHIVE_OK) {
    return invalid(quote_name(name_) + " cannot be read: " + archive_error(reader_.get()));
  }
  struct archive_entry* entry = nullptr;
  if (archive_read_next_header(reader_.get(), &entry) < ARCHIVE_WARN) {
    return invalid(quote_name(name_) + " cannot be read: " + archive_error(reader_.get()));
  }
  // The feed starts at this member's local header, which the layout scan has matched with
  // the central directory; the name only guards against feeding the wrong bytes.
  const char* seen = archive_entry_pathname(entry);
  if (seen != nullptr && name_ != seen) {
    return invalid("the zip reader found " + quote_name(seen) + " where " + quote_name(name_) +
                   " should be");
  }
  position_ = 0;
  window_start_ = 0;
  window_.clear();
  return ok_status();
}

Status InflatingMemberSource::inflate_block() {
  block_.resize(kBlock);
  const la_ssize_t n = archive_read_data(reader_.get(), block_.data(), block_.size());
  if (n < 0) {
    return invalid(quote_name(name_) + " cannot be inflated: " + archive_error(reader_.get()));
  }
  if (n == 0) {
    return invalid(quote_name(name_) + " inflates to fewer bytes than its declared " +
                   std::to_string(size_));
  }
  // Never more than the declared size: a stream that goes on is cut there.
  const auto count = static_cast<std::size_t>(
      std::min<std::uint64_t>(static_cast<std::uint64_t>(n), size_ - position_));
  if (count > budget_.remaining) {
    budget_.exhausted = true;
    return invalid("inflating the wheel's binaries needs more than " +
                   std::to_string(budget_.limit) + " bytes");
  }
  budget_.remaining -= count;
  window_.append(block_.data(), count);
  position_ += count;
  return ok_status();
}

Result<std::string> InflatingMemberSource::read_at(std::uint64_t offset, std::size_t length) {
  if (!range_fits(offset, length, size_)) {
    return invalid("bytes " + std::to_string(offset) + "+" + std::to_string(length) +
                   " lie outside the " + std::to_string(size_) + "-byte member");
  }
  if (!reader_ || offset < window_start_) {
    if (auto s = start_pass(); !s) return s.error();
  }
  const std::uint64_t end = offset + length;
  while (position_ < end) {
    if (auto s = inflate_block(); !s) return s.error();
    // Keep what the request needs, and a window behind the position; drop the rest.
    const std::uint64_t keep_from =
        std::min(offset, position_ > kWindow ? position_ - kWindow : std::uint64_t{0});
    if (keep_from > window_start_) {
      window_.erase(0, static_cast<std::size_t>(keep_from - window_start_));
      window_start_ = keep_from;
    }
  }
  return window_.substr(static_cast<std::size_t>(offset - window_start_), length);
}

}  // namespace wf::archive
