#include "wheelforge/store/blob_store.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
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

namespace {

constexpr std::string_view kBlobsDir = "blobs";

/// The layout in one place: `<blobs dir>/<aa>/<bb>/<sha256>`, as a plain string (the serving
/// path builds it per request without std::filesystem).
std::string blob_file_under(const std::string& blobs_dir, std::string_view sha256) {
  std::string out;
  out.reserve(blobs_dir.size() + sha256.size() + 8);
  out += blobs_dir;
  if (!out.empty() && out.back() != '/') out.push_back('/');
  out.append(sha256.substr(0, 2));
  out.push_back('/');
  out.append(sha256.substr(2, 2));
  out.push_back('/');
  out.append(sha256);
  return out;
}

}  // namespace

std::string blob_key(std::string_view sha256) {
  return blob_file_under(std::string(kBlobsDir), sha256);
}

fs::path blob_path_in(const fs::path& data_dir, std::string_view sha256) {
  return blob_file_under((data_dir / kBlobsDir).native(), sha256);
}

std::vector<fs::path> blob_dirs_in(const fs::path& data_dir, std::string_view sha256) {
  const fs::path blob = blob_path_in(data_dir, sha256);
  const fs::path bb = blob.parent_path();
  const fs::path aa = bb.parent_path();
  return {bb, aa, aa.parent_path()};
}

TempFile::TempFile(AtomicFile file, fs::path data_dir)
    : file_(std::move(file)),
      data_dir_(std::move(data_dir)),
      hasher_(std::make_unique<crypto::Hasher>(crypto::Algorithm::sha256)) {}

Status TempFile::write(const void* data, std::size_t size) {
  if (auto st = write_unhashed(data, size); !st) return st;
  hash(data, size);
  return ok_status();
}

Status TempFile::write_unhashed(const void* data, std::size_t size) {
  if (finished_) return make_error(Errc::internal, "write after finish");
  if (auto st = file_.write(data, size); !st) return store_error(data_dir_, st.error());
  size_ += size;
  return ok_status();
}

void TempFile::hash(const void* data, std::size_t size) {
  hasher_->update(data, size);
}

Status TempFile::finish(Sync sync) {
  if (finished_) return ok_status();
  if (sync == Sync::now) {
    if (auto st = file_.sync(); !st) return store_error(data_dir_, st.error());
  }
  sha256_ = hasher_->finish_hex();
  finished_ = true;
  return ok_status();
}

Result<std::unique_ptr<BlobStore>> BlobStore::open(const fs::path& data_dir,
                                                   BlobStoreOptions options) {
  // With an object store, DATA_DIR/blobs is the read cache's: DATA_DIR/cache/blobs.
  const fs::path blobs = options.objects ? data_dir / "cache" / kBlobsDir : data_dir / kBlobsDir;
  const fs::path tmp = data_dir / "tmp";
  std::error_code ec;
  fs::create_directories(blobs, ec);
  if (ec) return store_error(data_dir, errno_error(ec.value(), "create " + blobs.string()));
  fs::create_directories(tmp, ec);
  if (ec) return store_error(data_dir, errno_error(ec.value(), "create " + tmp.string()));
  // Several processes may share a data directory (the server and `wheelforge ingest`), so
  // each writes its temp files into a session directory of its own, guarded by an flock on
  // its lock file. A session directory whose lock can be taken belongs to a dead process.
  std::size_t removed = 0;
  for (const auto& entry : fs::directory_iterator(tmp, ec)) {
    const fs::path lock_path = entry.path() / ".lock";
    if (entry.is_directory()) {
      UniqueFd lock(::open(lock_path.c_str(), O_RDWR | O_CLOEXEC));
      if (lock.valid() && ::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) continue;  // alive
    }
    std::error_code rm_ec;
    if (fs::remove_all(entry.path(), rm_ec) > 0) ++removed;
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
  std::unique_ptr<BlobStore> store(
      new BlobStore(data_dir, blobs, session, std::move(lock), removed));
  if (options.objects) {
    auto cache = ReadCache::open(blobs, session, options.cache_bytes);
    if (!cache) return store_error(data_dir, cache.error());
    store->cache_ = std::move(*cache);
    store->objects_ = std::move(options.objects);
  }
  return store;
}

std::string BlobStore::describe() const {
  if (objects_) return "object store " + objects_->describe();
  return "the data directory " + data_dir_.string();
}

Status BlobStore::probe() const {
  if (!objects_) return ok_status();
  return objects_->probe();
}

Error BlobStore::object_error(const Error& error, std::string_view what,
                              bool keep_not_found) const {
  const Errc code = keep_not_found && error.code == Errc::not_found ? Errc::not_found
                    : error.code == Errc::storage_full || error.code == Errc::io
                        ? error.code  // the local side: the temp file or the cache
                        : Errc::unavailable;
  return make_error(code, describe() + ": " + std::string(what) + ": " + error.message);
}

BlobStore::~BlobStore() {
  std::error_code ec;
  fs::remove_all(tmp_dir_, ec);
}

Result<TempFile> BlobStore::create_temp() const {
  auto file = AtomicFile::create(tmp_dir_, "upload-");
  if (!file) return store_error(data_dir_, file.error());
  return TempFile(std::move(*file), data_dir_);
}

fs::path BlobStore::blob_path(std::string_view sha256) const {
  return blob_file(sha256);
}

std::string BlobStore::blob_file(std::string_view sha256) const {
  return blob_file_under(blobs_dir_.native(), sha256);
}

bool BlobStore::contains(std::string_view sha256) const {
  if (!is_sha256_hex(sha256)) return false;
  if (objects_) {
    if (cache_->lookup(sha256)) return true;
    auto head = objects_->head(blob_key(sha256));
    return head && head->has_value();
  }
  std::error_code ec;
  return fs::is_regular_file(blob_path(sha256), ec);
}

Result<fs::path> BlobStore::local_copy(std::string_view sha256) const {
  if (!is_sha256_hex(sha256)) return make_error(Errc::not_found, "no such blob");
  if (!objects_) {
    fs::path path = blob_path(sha256);
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) {
      return make_error(Errc::not_found, "no blob " + std::string(sha256) + " in " + describe());
    }
    return path;
  }
  const std::string key = blob_key(sha256);
  auto copy = cache_->fill(sha256, [&](const ByteSink& sink) -> Status {
    if (auto st = objects_->get(key, 0, std::nullopt, sink); !st) {
      return object_error(st.error(), "read " + key, /*keep_not_found=*/true);
    }
    return ok_status();
  });
  if (!copy) return copy.error();
  return fs::path(std::move(*copy));
}

Result<std::unique_ptr<BlobReader>> BlobStore::open_reader(std::string_view sha256) const {
  if (!is_sha256_hex(sha256)) return make_error(Errc::not_found, "no such blob");
  if (!objects_) {
    auto path = local_copy(sha256);
    if (!path) return path.error();
    return make_file_reader(*path);
  }
  if (auto cached = cache_->lookup(sha256)) {
    if (auto reader = make_file_reader(*cached)) return reader;
    // Removed by another process meanwhile: read the object.
  }
  const std::string key = blob_key(sha256);
  auto head = objects_->head(key);
  if (!head) return object_error(head.error(), "check " + key);
  if (!head->has_value()) {
    return make_error(Errc::not_found, "no blob " + std::string(sha256) + " in " + describe());
  }
  return make_object_reader(*objects_, key, (*head)->size, describe());
}

std::optional<std::string> BlobStore::serving_path(std::string_view sha256) const {
  if (!objects_) return blob_file(sha256);
  return cache_->lookup(sha256);
}

Result<fs::path> BlobStore::commit_object(TempFile temp) const {
  const std::string key = blob_key(temp.sha256());
  if (auto st = objects_->put_file(key, temp.path(), "application/octet-stream"); !st) {
    return object_error(st.error(), "upload " + key);
  }
  // Verified before anything records it: the object is there, whole.
  auto head = objects_->head(key);
  if (!head) return object_error(head.error(), "check " + key);
  if (!head->has_value() || (*head)->size != temp.size()) {
    return make_error(
        Errc::unavailable,
        describe() + ": check " + key + ": " +
            (head->has_value() ? "the object has " + std::to_string((*head)->size) + " bytes, " +
                                     std::to_string(temp.size()) + " were uploaded"
                               : "the object is missing after its upload"));
  }
  // The uploaded file becomes the read cache's copy (a failure costs a fetch later).
  std::string sha = temp.sha256();
  const std::uint64_t size = temp.size();
  (void)cache_->adopt(sha, std::move(temp.file_), size);
  return fs::path(cache_->path_of(sha));
}

Result<fs::path> BlobStore::commit(TempFile temp, Sync sync) const {
  if (!temp.finished_) return make_error(Errc::internal, "commit of an unfinished temp file");
  if (objects_) return commit_object(std::move(temp));
  const fs::path dest = blob_path(temp.sha256());
  const auto fail = [&](Error e) { return store_error(data_dir_, std::move(e)); };
  std::error_code ec;
  fs::create_directories(dest.parent_path(), ec);
  if (ec) return fail(errno_error(ec.value(), "create " + dest.parent_path().string()));
  if (auto st = temp.file_.set_mode(0444); !st) return fail(st.error());
  // The rename replaces an existing blob atomically: its bytes are identical by construction.
  // When the directory cannot be synced, a blob that is new here goes again: the caller
  // records nothing after a failure.
  const Durability durability = sync == Sync::now ? Durability::now : Durability::deferred;
  if (auto st = temp.file_.commit(dest, durability); !st) return fail(st.error());
  return dest;
}

Result<BlobListing> BlobStore::list() const {
  BlobListing listing;
  if (objects_) {
    auto objects = objects_->list(std::string(kBlobsDir) + "/");
    if (!objects) return object_error(objects.error(), "list blobs/");
    for (auto& o : *objects) {
      const std::string name = o.key.substr(o.key.rfind('/') + 1);
      if (!is_sha256_hex(name) || blob_key(name) != o.key) {
        listing.unexpected.emplace_back(o.key);
        continue;
      }
      listing.blobs.push_back(StoredBlob{name, o.key, 0, 0, o.size, o.modified});
    }
    return listing;
  }
  std::error_code ec;
  auto it = fs::recursive_directory_iterator(blobs_dir_, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const fs::path& p = it->path();
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) {
      if (errno == ENOENT) continue;  // removed meanwhile
      return errno_error(errno, "stat " + p.string());
    }
    if (S_ISDIR(st.st_mode)) continue;
    const std::string name = p.filename().string();
    if (!S_ISREG(st.st_mode) || !is_sha256_hex(name) || blob_path(name) != p) {
      listing.unexpected.push_back(p);
      continue;
    }
    listing.blobs.push_back(StoredBlob{name, p, st.st_dev, st.st_ino,
                                       static_cast<std::uint64_t>(st.st_size),
                                       std::max(st.st_mtim.tv_sec, st.st_ctim.tv_sec)});
  }
  if (ec) return errno_error(ec.value(), "list " + blobs_dir_.string());
  return listing;
}

Result<std::optional<StoredBlob>> BlobStore::stat(std::string_view sha256) const {
  if (!is_sha256_hex(sha256)) return std::optional<StoredBlob>{};
  if (objects_) {
    const std::string key = blob_key(sha256);
    auto head = objects_->head(key);
    if (!head) return object_error(head.error(), "check " + key);
    if (!head->has_value()) return std::optional<StoredBlob>{};
    return std::optional<StoredBlob>(
        StoredBlob{std::string(sha256), key, 0, 0, (*head)->size, (*head)->modified});
  }
  const fs::path path = blob_path(sha256);
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return std::optional<StoredBlob>{};
    return errno_error(errno, "stat " + path.string());
  }
  return std::optional<StoredBlob>(StoredBlob{std::string(sha256), path, st.st_dev, st.st_ino,
                                              static_cast<std::uint64_t>(st.st_size),
                                              std::max(st.st_mtim.tv_sec, st.st_ctim.tv_sec)});
}

Result<TakeOut> BlobStore::take_out(std::string_view sha256, dev_t dev, ino_t ino,
                                    const fs::path& to) const {
  if (!is_sha256_hex(sha256)) return make_error(Errc::internal, "take-out of a malformed sha256");
  if (objects_) {
    return make_error(Errc::internal, "take-out is not supported on the S3 blob store");
  }
  const fs::path from = blob_path(sha256);
  if (::rename(from.c_str(), to.c_str()) != 0) {
    if (errno == ENOENT) return TakeOut::vanished;
    return errno_error(errno, "move " + from.string() + " to " + to.string());
  }
  struct stat st {};
  if (::lstat(to.c_str(), &st) != 0) return errno_error(errno, "stat " + to.string());
  if (st.st_dev != dev || st.st_ino != ino) {
    if (::rename(to.c_str(), from.c_str()) != 0) {
      return errno_error(errno, "put back " + from.string());
    }
    return TakeOut::replaced;
  }
  return TakeOut::moved;
}

Result<bool> BlobStore::remove_unless_replaced(const StoredBlob& blob) const {
  if (objects_) {
    auto now = stat(blob.sha256);
    if (!now) return now.error();
    if (!now->has_value() || (*now)->changed > blob.changed) return false;
    const std::string key = blob_key(blob.sha256);
    if (auto st = objects_->remove(key); !st) return object_error(st.error(), "remove " + key);
    cache_->forget(blob.sha256);
    return true;
  }
  const fs::path aside = tmp_dir_ / ("gc-" + blob.sha256);
  auto taken = take_out(blob.sha256, blob.dev, blob.ino, aside);
  if (!taken) return taken.error();
  if (*taken != TakeOut::moved) return false;
  if (::unlink(aside.c_str()) != 0) return errno_error(errno, "remove " + aside.string());
  return true;
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
  if (objects_) {
    cache_->forget(sha256);
    const std::string key = blob_key(sha256);
    if (auto st = objects_->remove(key); !st) return object_error(st.error(), "remove " + key);
    return ok_status();
  }
  const fs::path path = blob_path(sha256);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return store_error(data_dir_, errno_error(errno, "remove " + path.string()));
  }
  return ok_status();
}

Status BlobStore::flush() const {
  if (objects_) return ok_status();  // every commit was complete in the store when it returned
  UniqueFd dir(::open(blobs_dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir.valid())
    return store_error(data_dir_, errno_error(errno, "open " + blobs_dir_.string()));
  if (::syncfs(dir.get()) != 0) {
    return store_error(data_dir_, errno_error(errno, "syncfs " + blobs_dir_.string()));
  }
  return ok_status();
}

}  // namespace wf::store
