#include "archive/archive_source.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <new>
#include <optional>

namespace wf::archive {

void ArchiveReadDeleter::operator()(struct ::archive* a) const {
  archive_read_free(a);
}

ArchiveReader new_archive_reader() {
  ArchiveReader a(archive_read_new());
  if (!a) throw std::bad_alloc();
  return a;
}

std::string archive_error(struct ::archive* a) {
  const char* message = archive_error_string(a);
  return message != nullptr ? std::string(message) : std::string("unknown error");
}

Result<OpenFile> open_archive_file(const std::filesystem::path& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return errno_error(errno, "open " + path.string());
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return errno_error(errno, "stat " + path.string());
  if (!S_ISREG(st.st_mode)) return make_error(Errc::io, path.string() + " is not a regular file");
  return OpenFile{std::move(fd), static_cast<std::uint64_t>(st.st_size)};
}

namespace {

// Seeking and skipping are the same for both feeds: they only move the position.
la_int64_t seek_feed(struct ::archive* a, std::uint64_t& position, std::uint64_t size,
                     la_int64_t offset, int whence) {
  la_int64_t base = 0;
  if (whence == SEEK_CUR) base = static_cast<la_int64_t>(position);
  if (whence == SEEK_END) base = static_cast<la_int64_t>(size);
  const la_int64_t target = base + offset;
  if (target < 0) {
    archive_set_error(a, EINVAL, "seek before the start of the file");
    return ARCHIVE_FATAL;
  }
  position = static_cast<std::uint64_t>(target);
  return target;
}

// Skipping past the end is clamped so that the next read reports the end of the file.
la_int64_t skip_feed(std::uint64_t& position, std::uint64_t size, la_int64_t request) {
  if (request <= 0 || position >= size) return 0;
  const auto step = std::min(static_cast<std::uint64_t>(request), size - position);
  position += step;
  return static_cast<la_int64_t>(step);
}

}  // namespace

struct FdSourceCallbacks {
  static la_ssize_t read(struct ::archive* a, void* data, const void** buffer) {
    auto* self = static_cast<FdSource*>(data);
    while (true) {
      const ssize_t n = ::pread(self->fd_, self->buffer_.data(), self->buffer_.size(),
                                static_cast<off_t>(self->position_));
      if (n >= 0) {
        self->position_ += static_cast<std::uint64_t>(n);
        *buffer = self->buffer_.data();
        return n;
      }
      if (errno != EINTR) {
        archive_set_error(a, errno, "read failed");
        return -1;
      }
    }
  }

  static la_int64_t seek(struct ::archive* a, void* data, la_int64_t offset, int whence) {
    auto* self = static_cast<FdSource*>(data);
    return seek_feed(a, self->position_, self->size_, offset, whence);
  }

  static la_int64_t skip(struct ::archive*, void* data, la_int64_t request) {
    auto* self = static_cast<FdSource*>(data);
    return skip_feed(self->position_, self->size_, request);
  }
};

struct FeedCallbacks {
  static la_ssize_t read(struct ::archive* a, void* data, const void** buffer) {
    auto* self = static_cast<ByteSourceFeed*>(data);
    if (self->position_ >= self->size_) return 0;
    const auto want = static_cast<std::size_t>(
        std::min<std::uint64_t>(ByteSourceFeed::kBlockSize, self->size_ - self->position_));
    auto bytes = self->source_.read_at(self->position_, want);
    if (!bytes) {
      archive_set_error(a, EIO, "%s", bytes.error().message.c_str());
      self->failure_ = bytes.error();
      return -1;
    }
    self->buffer_ = std::move(*bytes);
    self->position_ += self->buffer_.size();
    *buffer = self->buffer_.data();
    return static_cast<la_ssize_t>(self->buffer_.size());
  }

  static la_int64_t seek(struct ::archive* a, void* data, la_int64_t offset, int whence) {
    auto* self = static_cast<ByteSourceFeed*>(data);
    return seek_feed(a, self->position_, self->size_, offset, whence);
  }

  static la_int64_t skip(struct ::archive*, void* data, la_int64_t request) {
    auto* self = static_cast<ByteSourceFeed*>(data);
    return skip_feed(self->position_, self->size_, request);
  }
};

int FdSource::open(struct ::archive* a, Seeking seeking) {
  archive_read_set_callback_data(a, this);
  archive_read_set_read_callback(a, &FdSourceCallbacks::read);
  if (seeking == Seeking::yes) {
    archive_read_set_seek_callback(a, &FdSourceCallbacks::seek);
    archive_read_set_skip_callback(a, &FdSourceCallbacks::skip);
  }
  return archive_read_open1(a);
}

int ByteSourceFeed::open(struct ::archive* a, Seeking seeking) {
  archive_read_set_callback_data(a, this);
  archive_read_set_read_callback(a, &FeedCallbacks::read);
  if (seeking == Seeking::yes) {
    archive_read_set_seek_callback(a, &FeedCallbacks::seek);
    archive_read_set_skip_callback(a, &FeedCallbacks::skip);
  }
  return archive_read_open1(a);
}

Result<std::string> read_member_data(struct ::archive* a, struct archive_entry* entry,
                                     std::string_view what, std::uint64_t max_bytes) {
  const auto too_large = [&] {
    return make_error(Errc::invalid, std::string(what) + " inflates to more than " +
                                         std::to_string(max_bytes) + " bytes");
  };
  // A declared size above the cap fails early; a declared size below what the decompressor
  // yields is a lie, and inflation stops there rather than at the cap.
  std::optional<std::uint64_t> declared;
  if (archive_entry_size_is_set(entry) != 0 && archive_entry_size(entry) >= 0) {
    declared = static_cast<std::uint64_t>(archive_entry_size(entry));
    if (*declared > max_bytes) return too_large();
  }
  std::string out;
  std::vector<char> buffer(std::size_t{64} * 1024U);
  while (true) {
    const la_ssize_t n = archive_read_data(a, buffer.data(), buffer.size());
    if (n < 0) {
      return make_error(Errc::invalid, std::string(what) + " cannot be read: " + archive_error(a));
    }
    if (n == 0) break;
    const auto count = static_cast<std::size_t>(n);
    if (declared && count > *declared - out.size()) {
      return make_error(Errc::invalid, std::string(what) +
                                           " cannot be read: it inflates to more than its "
                                           "declared size of " +
                                           std::to_string(*declared) + " bytes");
    }
    if (count > max_bytes - out.size()) return too_large();
    out.append(buffer.data(), count);
  }
  return out;
}

}  // namespace wf::archive
