#include "wheelforge/util/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <system_error>

namespace wf {

namespace fs = std::filesystem;

Result<AtomicFile> AtomicFile::create(const fs::path& dir, std::string_view prefix) {
  std::string tmpl = (dir / prefix).string();
  tmpl += "XXXXXX";
  UniqueFd fd(::mkostemp(tmpl.data(), O_CLOEXEC));
  if (!fd.valid()) return errno_error(errno, "create temp file in " + dir.string());
  return AtomicFile(fs::path(std::move(tmpl)), std::move(fd));
}

Result<AtomicFile> AtomicFile::create_for(const fs::path& dest, std::string_view prefix) {
  const fs::path dir = dest.parent_path().empty() ? fs::path(".") : dest.parent_path();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return errno_error(ec.value(), "create " + dir.string());
  return create(dir, prefix);
}

AtomicFile::AtomicFile(AtomicFile&& other) noexcept
    : temp_(std::move(other.temp_)),
      fd_(std::move(other.fd_)),
      synced_(other.synced_),
      failed_(other.failed_) {
  other.temp_.clear();
}

AtomicFile& AtomicFile::operator=(AtomicFile&& other) noexcept {
  if (this != &other) {
    abort();
    temp_ = std::move(other.temp_);
    other.temp_.clear();
    fd_ = std::move(other.fd_);
    synced_ = other.synced_;
    failed_ = other.failed_;
  }
  return *this;
}

AtomicFile::~AtomicFile() {
  abort();
}

void AtomicFile::abort() noexcept {
  fd_.reset();
  if (!temp_.empty()) {
    ::unlink(temp_.c_str());
    temp_.clear();
  }
}

Status AtomicFile::write(const void* data, std::size_t size) {
  if (!fd_.valid()) return make_error(Errc::internal, "write to a closed temp file");
  const auto* p = static_cast<const char*>(data);
  for (std::size_t left = size; left > 0;) {
    const ssize_t n = ::write(fd_.get(), p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      failed_ = true;
      return errno_error(errno, "write " + temp_.string());
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  synced_ = false;
  return ok_status();
}

Status AtomicFile::set_mode(mode_t mode) {
  if (!fd_.valid()) return make_error(Errc::internal, "chmod of a closed temp file");
  if (::fchmod(fd_.get(), mode) != 0) return errno_error(errno, "chmod " + temp_.string());
  return ok_status();
}

Status AtomicFile::sync() {
  if (!fd_.valid()) return make_error(Errc::internal, "fsync of a closed temp file");
  if (::fsync(fd_.get()) != 0) {
    failed_ = true;
    return errno_error(errno, "fsync " + temp_.string());
  }
  synced_ = true;
  return ok_status();
}

Status AtomicFile::commit(const fs::path& dest, Durability durability) {
  if (temp_.empty() || !fd_.valid()) {
    return make_error(Errc::internal, "commit of a temp file that is gone: " + dest.string());
  }
  if (failed_) {
    return make_error(Errc::internal,
                      "commit of " + temp_.string() + " after a failed write or fsync");
  }
  if (durability == Durability::now && !synced_) {
    if (auto st = sync(); !st) return st;
  }
  fd_.reset();
  struct stat st {};
  const bool existed = ::lstat(dest.c_str(), &st) == 0;
  if (::rename(temp_.c_str(), dest.c_str()) != 0) {
    return errno_error(errno, "rename to " + dest.string());
  }
  temp_.clear();
  if (durability == Durability::now) {
    const fs::path dir = dest.parent_path().empty() ? fs::path(".") : dest.parent_path();
    if (auto synced = fsync_dir(dir); !synced) {
      if (!existed) ::unlink(dest.c_str());
      return synced;
    }
  }
  return ok_status();
}

}  // namespace wf
