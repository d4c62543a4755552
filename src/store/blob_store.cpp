#include "wheelforge/store/blob_store.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "wheelforge/util/strings.hpp"

namespace wf::store {

namespace fs = std::filesystem;

Error store_error(const fs::path& data_dir, Error error) {
  if (error.code == Errc::unavailable) {
    error.message = "the data directory " + data_dir.string() + " is not writable (" +
                    error.message +
                    "): the server cannot store files until an administrator makes it writable";
  }
  return error;
}

TempFile::TempFile(fs::path path, UniqueFd fd, fs::path data_dir)
    : path_(std::move(path)),
      data_dir_(std::move(data_dir)),
      fd_(std::move(fd)),
      hasher_(std::make_unique<crypto::Hasher>(crypto::Algorithm::sha256)) {}

TempFile::TempFile(TempFile&& o) noexcept
    : path_(std::move(o.path_)),
      data_dir_(std::move(o.data_dir_)),
      fd_(std::move(o.fd_)),
      hasher_(std::move(o.hasher_)),
      size_(o.size_),
      sha256_(std::move(o.sha256_)),
      finished_(o.finished_) {
  o.path_.clear();
}

TempFile& TempFile::operator=(TempFile&& o) noexcept {
  if (this != &o) {
    discard();
    path_ = std::move(o.path_);
    o.path_.clear();
    data_dir_ = std::move(o.data_dir_);
    fd_ = std::move(o.fd_);
    hasher_ = std::move(o.hasher_);
    size_ = o.size_;
    sha256_ = std::move(o.sha256_);
    finished_ = o.finished_;
  }
  return *this;
}

TempFile::~TempFile() {
  discard();
}

void TempFile::discard() {
  fd_.reset();
  if (!path_.empty()) {
    ::unlink(path_.c_str());
    path_.clear();
  }
}

Status TempFile::write(const void* data, std::size_t size) {
  if (auto st = write_unhashed(data, size); !st) return st;
  hash(data, size);
  return ok_status();
}

Status TempFile::write_unhashed(const void* data, std::size_t size) {
  if (finished_ || !fd_.valid()) return make_error(Errc::internal, "write after finish");
  const auto* p = static_cast<const char*>(data);
  for (std::size_t left = size; left > 0;) {
    const ssize_t n = ::write(fd_.get(), p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return store_error(data_dir_, errno_error(errno, "write " + path_.string()));
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  size_ += size;
  return ok_status();
}

void TempFile::hash(const void* data, std::size_t size) {
  hasher_->update(data, size);
}

Status TempFile::finish(Sync sync) {
  if (finished_) return ok_status();
  if (sync == Sync::now && ::fsync(fd_.get()) != 0) {
    return store_error(data_dir_, errno_error(errno, "fsync " + path_.string()));
  }
  sha256_ = hasher_->finish_hex();
  finished_ = true;
  return ok_status();
}

Result<std::unique_ptr<BlobStore>> BlobStore::open(const fs::path& data_dir) {
  const fs::path blobs = data_dir / "blobs";
  const fs::path tmp = data_dir / "tmp";
  std::error_code ec;
  fs::create_directories(blobs, ec);
  if (ec) return store_error(data_dir, errno_error(ec.value(), "create " + blobs.string()));
  fs::create_directories(tmp, ec);
  if (ec) return store_error(data_dir, errno_error(ec.value(), "create " + tmp.string()));
  // Several processes may share a data directory (the server and `wheelforge ingest`), so
  // each writes its temp files into a session directory of its own, guarded by an flock on
  // its lock file. A session directory whose lock can be taken belongs to a dead process.
  for (const auto& entry : fs::directory_iterator(tmp, ec)) {
    const fs::path lock_path = entry.path() / ".lock";
    if (entry.is_directory()) {
      UniqueFd lock(::open(lock_path.c_str(), O_RDWR | O_CLOEXEC));
      if (lock.valid() && ::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) continue;  // alive
    }
    std::error_code rm_ec;
    fs::remove_all(entry.path(), rm_ec);
  }
  std::string session_tmpl = (tmp / "s-XXXXXX").string();
  if (::mkdtemp(session_tmpl.data()) == nullptr) {
    return store_error(data_dir, errno_error(errno, "create temp directory in " + tmp.string()));
  }
  const fs::path session(session_tmpl);
  UniqueFd lock(::open((session / ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!lock.valid() || ::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) {
    return store_error(data_dir, errno_error(errno, "lock " + session.string()));
  }
  return std::unique_ptr<BlobStore>(new BlobStore(data_dir, blobs, session, std::move(lock)));
}

BlobStore::~BlobStore() {
  std::error_code ec;
  fs::remove_all(tmp_dir_, ec);
}

Result<TempFile> BlobStore::create_temp() const {
  std::string tmpl = (tmp_dir_ / "upload-XXXXXX").string();
  UniqueFd fd(::mkostemp(tmpl.data(), O_CLOEXEC));
  if (!fd.valid()) {
    return store_error(data_dir_, errno_error(errno, "create temp file in " + tmp_dir_.string()));
  }
  return TempFile(fs::path(tmpl), std::move(fd), data_dir_);
}

fs::path BlobStore::blob_path(std::string_view sha256) const {
  return blob_file(sha256);
}

std::string BlobStore::blob_file(std::string_view sha256) const {
  const std::string& dir = blobs_dir_.native();
  std::string out;
  out.reserve(dir.size() + sha256.size() + 8);
  out += dir;
  if (!out.empty() && out.back() != '/') out.push_back('/');
  out.append(sha256.substr(0, 2));
  out.push_back('/');
  out.append(sha256.substr(2, 2));
  out.push_back('/');
  out.append(sha256);
  return out;
}

bool BlobStore::contains(std::string_view sha256) const {
  std::error_code ec;
  return is_sha256_hex(sha256) && fs::is_regular_file(blob_path(sha256), ec);
}

Result<fs::path> BlobStore::commit(TempFile temp, Sync sync) const {
  if (!temp.finished_) return make_error(Errc::internal, "commit of an unfinished temp file");
  const fs::path dest = blob_path(temp.sha256());
  const auto fail = [&](Error e) { return store_error(data_dir_, std::move(e)); };
  std::error_code ec;
  fs::create_directories(dest.parent_path(), ec);
  if (ec) return fail(errno_error(ec.value(), "create " + dest.parent_path().string()));
  if (::fchmod(temp.fd_.get(), 0444) != 0) {
    return fail(errno_error(errno, "chmod " + temp.path_.string()));
  }
  temp.fd_.reset();
  struct stat st {};
  const bool existed = ::lstat(dest.c_str(), &st) == 0;
  // rename() replaces an existing blob atomically; its bytes are identical by construction.
  if (::rename(temp.path_.c_str(), dest.c_str()) != 0) {
    return fail(errno_error(errno, "publish blob " + temp.sha256()));
  }
  temp.path_.clear();
  if (sync == Sync::now) {
    if (auto synced = fsync_dir(dest.parent_path()); !synced) {
      // The caller records nothing after a failure: a blob that is new here goes again.
      if (!existed) ::unlink(dest.c_str());
      return fail(synced.error());
    }
  }
  return dest;
}

Result<std::string> BlobStore::put(std::string_view bytes, Sync sync) const {
  auto temp = create_temp();
  if (!temp) return temp.error();
  if (auto st = temp->write(bytes.data(), bytes.size()); !st) return st.error();
  if (auto st = temp->finish(sync); !st) return st.error();
  std::string sha = temp->sha256();
  if (auto committed = commit(std::move(*temp), sync); !committed) return committed.error();
  return sha;
}

Status BlobStore::withdraw(std::string_view sha256) const {
  if (!is_sha256_hex(sha256)) return make_error(Errc::internal, "withdraw of a malformed sha256");
  const fs::path path = blob_path(sha256);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return store_error(data_dir_, errno_error(errno, "remove " + path.string()));
  }
  return ok_status();
}

Status BlobStore::flush() const {
  UniqueFd dir(::open(blobs_dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir.valid())
    return store_error(data_dir_, errno_error(errno, "open " + blobs_dir_.string()));
  if (::syncfs(dir.get()) != 0) {
    return store_error(data_dir_, errno_error(errno, "syncfs " + blobs_dir_.string()));
  }
  return ok_status();
}

}  // namespace wf::store
