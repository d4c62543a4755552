// An existing data directory opened for maintenance (app/maintenance_dir.hpp).

#include "maintenance_dir.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "command_support.hpp"
#include "wheelforge/catalog/pg_snapshot.hpp"
#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/util/atomic_file.hpp"

namespace wf::app::detail {

namespace fs = std::filesystem;

Result<MaintenanceDir> open_existing(const Settings& settings, LockMode mode) {
  const fs::path& data_dir = settings.data_dir;
  std::error_code ec;
  const bool postgres = catalog::is_postgres_location(settings.catalog);
  if (!postgres) {
    // Opening the catalog would create an empty one: a mistyped --data-dir must not look like
    // an empty index that backs up and checks fine.
    if (!fs::is_regular_file(data_dir / "wheelforge.db", ec)) {
      return make_error(
          Errc::not_found,
          data_dir.string() + " is not a wheelforge data directory (no wheelforge.db)");
    }
  } else {
    // With PostgreSQL the data directory holds only caches and temp files: a new host's is made.
    fs::create_directories(data_dir, ec);
    if (ec) return errno_error(ec.value(), "create " + data_dir.string());
  }
  const fs::path lock_path = data_dir / "maintenance.lock";
  // Read-only and world-readable: flock() needs no write access, so the service user and an
  // administrator can both take the lock whoever created the file.
  UniqueFd lock(::open(lock_path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0644));
  if (!lock.valid()) return errno_error(errno, "open " + lock_path.string());
  const int op = (mode == LockMode::shared ? LOCK_SH : LOCK_EX) | LOCK_NB;
  if (::flock(lock.get(), op) != 0) {
    if (errno == EWOULDBLOCK) {
      return make_error(
          Errc::unavailable,
          "another wheelforge backup, gc, fsck or reinspect is running on " + data_dir.string());
    }
    return errno_error(errno, "lock " + lock_path.string());
  }
  MaintenanceDir dir;
  dir.lock = std::move(lock);
  auto options = detail::blob_store_options(settings);
  if (!options) return options.error();
  auto store = store::BlobStore::open(data_dir, std::move(*options));
  if (!store) return store.error();
  dir.store = std::move(*store);
  dir.stale_temp_sessions = dir.store->stale_temps_removed();
  auto catalog = catalog::open_catalog(settings.catalog, data_dir);
  if (!catalog) return catalog.error();
  dir.catalog = std::move(*catalog);
  return dir;
}

Settings local_settings(const fs::path& data_dir) {
  Settings settings;
  settings.data_dir = data_dir;
  return settings;
}

Result<HashResult> hash_fd(int fd, const fs::path& path) {
  crypto::Hasher hasher(crypto::Algorithm::sha256);
  std::string buffer(kCopyBuffer, '\0');
  HashResult result;
  struct stat st {};
  if (::fstat(fd, &st) != 0) return errno_error(errno, "stat " + path.string());
  result.dev = st.st_dev;
  result.ino = st.st_ino;
  while (true) {
    const ssize_t n = ::pread(fd, buffer.data(), buffer.size(), static_cast<off_t>(result.size));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_error(errno, "read " + path.string());
    }
    if (n == 0) break;
    hasher.update(buffer.data(), static_cast<std::size_t>(n));
    result.size += static_cast<std::uint64_t>(n);
  }
  result.sha256 = hasher.finish_hex();
  return result;
}

Result<HashResult> hash_file(const fs::path& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return errno_error(errno, "open " + path.string());
  return hash_fd(fd.get(), path);
}

// Reads the object of blob `sha256` from the blob store's object store, hashing it, and into
// `out` when not null. not_found when there is no such object; unavailable naming the store
// when it cannot be read; a failing write to `out` as it is.
Result<HashResult> read_object(const store::BlobStore& store, const std::string& sha256,
                               AtomicFile* out) {
  const std::string key = store::blob_key(sha256);
  crypto::Hasher hasher(crypto::Algorithm::sha256);
  HashResult result;
  std::optional<Error> write_failed;
  const Status got =
      store.object_store()->get(key, 0, std::nullopt, [&](std::string_view chunk) -> Status {
        hasher.update(chunk);
        result.size += chunk.size();
        if (out == nullptr) return ok_status();
        if (auto st = out->write(chunk); !st) {
          write_failed = st.error();
          return st;
        }
        return ok_status();
      });
  if (write_failed) return *write_failed;
  if (!got) {
    if (got.error().code == Errc::not_found) {
      return make_error(Errc::not_found, "no object " + key + " in " + store.describe());
    }
    return make_error(Errc::unavailable,
                      store.describe() + ": read " + key + ": " + got.error().message);
  }
  result.sha256 = hasher.finish_hex();
  return result;
}

/// Streams the object of blob `sha256` into the new file `dest` through a temp file in its
/// directory, hashed on the way: Errc::invalid when its bytes do not match (then nothing is
/// left at dest), not_found when there is no such object. Returns its size.

}  // namespace wf::app::detail
