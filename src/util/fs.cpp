#include "wheelforge/util/fs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "wheelforge/util/atomic_file.hpp"

namespace wf {

Errc errno_code(int err) {
  switch (err) {
    case ENOSPC:
    case EDQUOT:
      return Errc::storage_full;
    case EROFS:
    case EACCES:
    case EPERM:
      return Errc::unavailable;
    default:
      return Errc::io;
  }
}

Error errno_error(int err, std::string_view what) {
  const Errc code = errno_code(err);
  std::string message(what);
  message += ": ";
  message += std::strerror(err);
  return Error{code, std::move(message)};
}

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) reset(o.release());
  return *this;
}

UniqueFd::~UniqueFd() {
  reset();
}

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

Status write_all(int fd, const void* data, std::size_t size) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_error(errno, "write");
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return ok_status();
}

Status fsync_dir(const std::filesystem::path& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return errno_error(errno, "open directory " + dir.string());
  if (::fsync(fd.get()) != 0) return errno_error(errno, "fsync directory " + dir.string());
  return ok_status();
}

Status fsync_file(const std::filesystem::path& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid() || ::fsync(fd.get()) != 0) return errno_error(errno, "fsync " + path.string());
  return ok_status();
}

Status write_file_atomic(const std::filesystem::path& dest, std::string_view bytes) {
  auto file = AtomicFile::create_for(dest);
  if (!file) return file.error();
  if (auto st = file->write(bytes); !st) return st;
  if (auto st = file->set_mode(0644); !st) return st;
  return file->commit(dest);
}

Result<std::string> read_small_file(const std::filesystem::path& path, std::uint64_t max_bytes) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return errno_error(errno, "open " + path.string());
  std::string out;
  char buf[65536];
  while (true) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_error(errno, "read " + path.string());
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
    if (out.size() > max_bytes) {
      return make_error(Errc::too_large,
                        path.string() + " is larger than " + std::to_string(max_bytes) + " bytes");
    }
  }
  return out;
}

std::string read_file_chunk(const std::filesystem::path& path, std::uint64_t offset,
                            std::size_t max) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return {};
  std::string out(max, '\0');
  ssize_t n = 0;
  do {
    n = ::pread(fd.get(), out.data(), max, static_cast<off_t>(offset));
  } while (n < 0 && errno == EINTR);
  out.resize(n > 0 ? static_cast<std::size_t>(n) : 0U);
  return out;
}

}  // namespace wf
