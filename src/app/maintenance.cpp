#include "wheelforge/app/maintenance.hpp"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <map>
#include <set>

#include "command_support.hpp"
#include "wheelforge/archive/elf.hpp"
#include "wheelforge/build/pip_cache.hpp"
#include "wheelforge/build/process.hpp"
#include "wheelforge/catalog/pg_snapshot.hpp"
#include "wheelforge/core/filename.hpp"
#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/handlers/upstreams.hpp"
#include "wheelforge/store/blob_store.hpp"
#include "wheelforge/util/atomic_file.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/strings.hpp"
#include "wheelforge/util/time.hpp"

namespace wf::app {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kCopyBuffer = 1U << 20U;

enum class LockMode { shared, exclusive };

/// An existing data directory, opened for maintenance.
struct DataDir {
  UniqueFd lock;
  std::unique_ptr<catalog::Catalog> catalog;
  std::unique_ptr<store::BlobStore> store;
  std::size_t stale_temp_sessions = 0;
};

Result<DataDir> open_existing(const Settings& settings, LockMode mode) {
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
  DataDir dir;
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

/// The settings of a plain data directory: SQLite and local files.
Settings local_settings(const fs::path& data_dir) {
  Settings settings;
  settings.data_dir = data_dir;
  return settings;
}

using store::StoredBlob;

/// How long ago a blob was last published. An unknown time (0: an object store's date that
/// could not be read) counts as now: such a blob is never old enough to be collected.
std::chrono::seconds age_of(const StoredBlob& blob, std::time_t now) {
  if (blob.changed <= 0) return std::chrono::seconds{0};
  return std::chrono::seconds{now > blob.changed ? now - blob.changed : 0};
}

struct HashResult {
  std::string sha256;
  std::uint64_t size = 0;
  dev_t dev = 0;  ///< the file that was hashed
  ino_t ino = 0;
};

/// Hashes an open file from its start.
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

/// Copies the rest of `in` to `out`: copy_file_range (in the kernel, no bytes through user
/// space), else read and write where the filesystems cannot.
Status copy_bytes(int in, int out, const fs::path& src, const fs::path& dest) {
  bool in_kernel = true;
  std::string buffer;
  while (true) {
    if (in_kernel) {
      const ssize_t n = ::copy_file_range(in, nullptr, out, nullptr, kCopyBuffer, 0);
      if (n > 0) continue;
      if (n == 0) return ok_status();
      if (errno == EINTR) continue;
      if (errno != EXDEV && errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP) {
        return errno_error(errno, "copy " + src.string() + " to " + dest.string());
      }
      in_kernel = false;  // both offsets stand where the kernel stopped
      buffer.resize(kCopyBuffer);
    }
    const ssize_t n = ::read(in, buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_error(errno, "read " + src.string());
    }
    if (n == 0) return ok_status();
    if (auto st = write_all(out, buffer.data(), static_cast<std::size_t>(n)); !st) {
      return make_error(st.error().code, dest.string() + ": " + st.error().message);
    }
  }
}

struct Copied {
  std::uint64_t size = 0;
  bool reflink = false;
};

/// Copies src to dest (a new file) through a temp file in dest's directory: a reflink
/// (FICLONE) where the filesystem shares extents copy-on-write, else a byte copy. The copy
/// itself is then hashed against `sha256` and fsynced; dest's directory is left to the caller
/// (the backup syncs its directories once, deepest first). Returns its size, or Errc::invalid
/// on a mismatch (then nothing is left at dest).
Result<Copied> copy_verified(const fs::path& src, const fs::path& dest, std::string_view sha256) {
  UniqueFd in(::open(src.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in.valid()) return errno_error(errno, "open " + src.string());
  auto out = AtomicFile::create(dest.parent_path(), ".partial-");
  if (!out) return out.error();
  Copied copied;
  copied.reflink = ::ioctl(out->fd(), FICLONE, in.get()) == 0;
  if (!copied.reflink) {
    if (auto st = copy_bytes(in.get(), out->fd(), src, dest); !st) return st.error();
  }
  // What is checked is what the backup holds.
  auto hashed = hash_fd(out->fd(), out->temp_path());
  if (!hashed) return hashed.error();
  if (hashed->sha256 != sha256) {
    return make_error(Errc::invalid, src.string() + ": content does not match its name");
  }
  copied.size = hashed->size;
  if (auto st = out->set_mode(0444); !st) return st.error();
  if (auto st = out->sync(); !st) return st.error();
  if (auto st = out->commit(dest, Durability::deferred); !st) return st.error();
  return copied;
}

/// Reads the object of blob `sha256` from the blob store's object store, hashing it, and into
/// `out` when not null. not_found when there is no such object; unavailable naming the store
/// when it cannot be read; a failing write to `out` as it is.
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
Result<std::uint64_t> fetch_verified(const store::BlobStore& store, const std::string& sha256,
                                     const fs::path& dest) {
  auto out = AtomicFile::create(dest.parent_path(), ".partial-");
  if (!out) return out.error();
  auto hashed = read_object(store, sha256, &*out);
  if (!hashed) return hashed.error();
  if (hashed->sha256 != sha256) {
    return make_error(Errc::invalid, store::blob_key(sha256) + ": content does not match its name");
  }
  if (auto st = out->set_mode(0444); !st) return st.error();
  if (auto st = out->sync(); !st) return st.error();
  if (auto st = out->commit(dest, Durability::deferred); !st) return st.error();
  return hashed->size;
}

/// Runs `pg_dump --format=custom` (from PATH) of the database `uri` into the new file `dest`:
/// one consistent snapshot of it. The password goes in PGPASSWORD, never on the command line.
/// unavailable naming the database and saying what pg_dump said when it fails.
Status dump_postgres(const std::string& uri, const fs::path& dest, const std::string& snapshot) {
  build::ProcessSpec spec;
  spec.argv = {"pg_dump",
               "--format=custom",
               "--no-password",
               "--snapshot=" + snapshot,
               "--file=" + dest.string(),
               "--dbname=" + catalog::uri_without_password(uri)};
  const std::string password = catalog::uri_password(uri);
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const auto eq = entry.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    const std::string name(entry.substr(0, eq));
    if (name == "PGPASSWORD" && !password.empty()) continue;
    spec.env.emplace_back(name, std::string(entry.substr(eq + 1)));
  }
  if (!password.empty()) spec.env.emplace_back("PGPASSWORD", password);
  const fs::path log = dest.parent_path() / ".pg_dump.log";
  spec.log_file = log;
  const std::string what = "pg_dump of " + catalog::describe_catalog_location(uri);
  auto process = build::Process::start(spec);
  if (!process) {
    if (process.error().code == Errc::not_found) {
      return make_error(Errc::unavailable,
                        what + ": pg_dump is not on PATH (Debian: postgresql-client)");
    }
    return make_error(Errc::unavailable, what + ": " + process.error().message);
  }
  const build::ExitStatus status = process->wait();
  std::string said;
  if (auto text = read_small_file(log, 1U << 20U)) said = std::move(*text);
  std::error_code ec;
  fs::remove(log, ec);
  if (status.success()) return ok_status();
  while (!said.empty() && (said.back() == '\n' || said.back() == ' ')) said.pop_back();
  if (said.size() > 2000) said = said.substr(said.size() - 2000);
  return make_error(Errc::unavailable,
                    what + " failed (" + status.describe() + "): " + sanitize_for_log(said));
}

}  // namespace

Result<BackupReport> backup_data_dir(const fs::path& data_dir, const BackupOptions& options) {
  return backup_data_dir(local_settings(data_dir), options);
}

Result<BackupReport> backup_data_dir(const Settings& settings, const BackupOptions& options) {
  const fs::path& data_dir = settings.data_dir;
  const fs::path& dest = options.dest;
  std::error_code ec;
  if (fs::exists(dest, ec)) {
    if (!fs::is_directory(dest, ec) || !fs::is_empty(dest, ec)) {
      return make_error(Errc::conflict, dest.string() + " exists and is not an empty directory");
    }
  } else {
    fs::create_directories(dest, ec);
    if (ec) return errno_error(ec.value(), "create " + dest.string());
  }
  auto source = open_existing(settings, LockMode::shared);
  if (!source) return source.error();
  const bool postgres = catalog::is_postgres_location(settings.catalog);
  const bool objects = source->store->backend() == store::BlobBackend::object_store;

  // 1. The catalog, as of one instant.
  const fs::path db = dest / (postgres ? "catalog.pgdump" : "wheelforge.db");
  BackupReport report;
  std::vector<catalog::BlobRef> refs;
  if (postgres) {
    // pg_dump dumps a snapshot that a transaction of ours exported and holds, and what the
    // report counts and the blobs copied are read in that same snapshot: exactly the dump's
    // files, while uploads go on.
    auto summary = catalog::with_exported_snapshot(
        settings.catalog,
        [&](const std::string& snapshot) { return dump_postgres(settings.catalog, db, snapshot); });
    if (!summary) return summary.error();
    report.files = summary->files;
    report.projects = summary->projects;
    report.tokens = summary->tokens;
    refs = std::move(summary->refs);
    report.catalog_dump = db;
  } else {
    if (auto st = source->catalog->backup_to(db); !st) return st.error();
    auto copy = catalog::open_sqlite_catalog(db);
    if (!copy) return copy.error();
    auto contents = (*copy)->load();
    if (!contents) return contents.error();
    report.files = contents->files.size();
    report.projects = contents->projects.size();
    report.tokens = contents->tokens.size();
    auto r = (*copy)->referenced_blobs();
    if (!r) return r.error();
    refs = std::move(*r);
  }

  // 2. The blobs that snapshot references. Rows are committed only after their blobs are
  // published, and referenced blobs are never removed (gc waits for our shared lock), so
  // copying after the snapshot yields exactly the snapshot's files.
  std::set<std::string> shas;
  for (const auto& r : refs) shas.insert(r.sha256);

  std::set<fs::path> dirs{dest};
  // Objects are always copied: there is nothing to link to.
  bool try_link = options.copy == BlobCopy::link && !objects;
  for (const auto& sha : shas) {
    if (!is_sha256_hex(sha)) {
      report.missing.push_back(sha);
      continue;
    }
    if (objects) {
      const fs::path out = store::blob_path_in(dest, sha);
      fs::create_directories(out.parent_path(), ec);
      if (ec) return errno_error(ec.value(), "create " + out.parent_path().string());
      for (auto& d : store::blob_dirs_in(dest, sha)) dirs.insert(std::move(d));
      auto fetched = fetch_verified(*source->store, sha, out);
      if (!fetched) {
        if (fetched.error().code == Errc::not_found) {
          report.missing.push_back(sha);
        } else if (fetched.error().code == Errc::invalid) {
          report.corrupt.push_back(sha);
        } else {
          return fetched.error();
        }
        continue;
      }
      ++report.copied;
      ++report.blobs;
      report.bytes += *fetched;
      continue;
    }
    const fs::path src = source->store->blob_path(sha);
    const fs::path out = store::blob_path_in(dest, sha);
    struct stat st {};
    if (::stat(src.c_str(), &st) != 0) {
      if (errno != ENOENT) return errno_error(errno, "stat " + src.string());
      report.missing.push_back(sha);
      continue;
    }
    fs::create_directories(out.parent_path(), ec);
    if (ec) return errno_error(ec.value(), "create " + out.parent_path().string());
    for (auto& d : store::blob_dirs_in(dest, sha)) dirs.insert(std::move(d));
    if (try_link) {
      if (::link(src.c_str(), out.c_str()) == 0) {
        ++report.linked;
        ++report.blobs;
        report.bytes += static_cast<std::uint64_t>(st.st_size);
        continue;
      }
      // Another filesystem (or one without hard links): copy this and every later blob.
      if (errno != EXDEV && errno != EPERM && errno != EMLINK && errno != ENOTSUP) {
        return errno_error(errno, "link " + out.string());
      }
      try_link = false;
    }
    auto copied = copy_verified(src, out, sha);
    if (!copied) {
      if (copied.error().code != Errc::invalid) return copied.error();
      report.corrupt.push_back(sha);
      continue;
    }
    ++report.copied;
    if (copied->reflink) ++report.reflinked;
    ++report.blobs;
    report.bytes += copied->size;
  }
  // Deepest first, so that each directory entry is durable before its parent's.
  for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) {
    if (auto st = fsync_dir(*it); !st) return st.error();
  }
  if (auto st = fsync_file(db); !st) return st.error();

  // 3. The marker that says the backup is complete.
  std::string info =
      postgres
          ? "# A wheelforge backup: the PostgreSQL catalog (catalog.pgdump, pg_dump's custom\n"
            "# format) and the files' blobs (blobs/). Restore the catalog with pg_restore into\n"
            "# a new database, then serve with --catalog URI --data-dir THIS_DIRECTORY, or\n"
            "# move the blobs into an object store (docs/operations.md).\n"
          : "# A wheelforge backup: a complete data directory. Restore by serving it\n"
            "# (wheelforge serve --data-dir THIS_DIRECTORY) or by copying it to a data "
            "directory.\n";
  info += "created = " + toml_quote(iso8601_micros(now_micros())) + "\n";
  info += "source = " + toml_quote(fs::absolute(data_dir, ec).string()) + "\n";
  info += "catalog = " +
          toml_quote(postgres ? catalog::describe_catalog_location(settings.catalog) : "sqlite") +
          "\n";
  info += "blob_store = " + toml_quote(objects ? source->store->describe() : "file") + "\n";
  info += "files = " + std::to_string(report.files) + "\n";
  info += "projects = " + std::to_string(report.projects) + "\n";
  info += "tokens = " + std::to_string(report.tokens) + "\n";
  info += "blobs = " + std::to_string(report.blobs) + "\n";
  info += "bytes = " + std::to_string(report.bytes) + "\n";
  info += "hardlinked = " + std::to_string(report.linked) + "\n";
  info += "copied = " + std::to_string(report.copied) + "\n";
  info += "reflinked = " + std::to_string(report.reflinked) + "\n";
  info += "missing_blobs = " + std::to_string(report.missing.size()) + "\n";
  info += "corrupt_blobs = " + std::to_string(report.corrupt.size()) + "\n";
  if (auto st = write_file_atomic(dest / "BACKUP-INFO", info); !st) return st.error();
  return report;
}

Result<GcReport> collect_garbage(const fs::path& data_dir, const GcOptions& options) {
  return collect_garbage(local_settings(data_dir), options);
}

Result<GcReport> collect_garbage(const Settings& settings, const GcOptions& options) {
  const fs::path& data_dir = settings.data_dir;
  auto dir = open_existing(settings, options.dry_run ? LockMode::shared : LockMode::exclusive);
  if (!dir) return dir.error();
  GcReport report;
  report.stale_temp_sessions = dir->stale_temp_sessions;
  if (options.upstream_file_cache != 0 && !options.dry_run) {
    auto evicted =
        handlers::evict_upstream_files(*dir->catalog, *dir->store, options.upstream_file_cache);
    if (!evicted) return evicted.error();
    for (const auto& b : evicted->evicted) report.evicted.push_back(b.upstream + "/" + b.filename);
    report.evicted_bytes = evicted->evicted_bytes;
  }
  if (options.upstream_page_disk_cache != 0 && !options.dry_run) {
    const auto trimmed = handlers::trim_upstream_page_copies(data_dir / "upstream" / "pages",
                                                             options.upstream_page_disk_cache);
    report.page_copies_removed = trimmed.removed;
    report.page_copies_bytes = trimmed.removed_bytes;
  }
  if (options.pip_cache != 0 && !options.dry_run) {
    const auto trimmed =
        build::trim_pip_cache(build::pip_cache_dir(data_dir / "builds"), options.pip_cache);
    report.pip_cache_removed = trimmed.removed;
    report.pip_cache_bytes = trimmed.removed_bytes;
  }

  // The listing comes before the references: a blob that becomes referenced after the
  // references were read was published again by that upload (a new inode), which
  // remove_unless_replaced() notices.
  auto listing = dir->store->list();
  if (!listing) return listing.error();
  report.unexpected = std::move(listing->unexpected);
  const std::time_t now = std::time(nullptr);
  auto refs = dir->catalog->referenced_blobs();
  if (!refs) return refs.error();
  std::set<std::string> referenced;
  for (const auto& r : *refs) referenced.insert(r.sha256);

  for (const auto& blob : listing->blobs) {
    if (referenced.contains(blob.sha256)) {
      ++report.referenced;
      continue;
    }
    if (age_of(blob, now) < options.min_age) {
      ++report.too_young;
      continue;
    }
    if (!options.dry_run) {
      auto removed = dir->store->remove_unless_replaced(blob);
      if (!removed) return removed.error();
      if (!*removed) continue;
    }
    report.removed.push_back(blob.sha256);
    report.removed_bytes += blob.size;
  }
  return report;
}

/// Moves a corrupt blob into DATA_DIR/quarantine/, unless it is no longer the file that was
/// hashed (published again since, so intact: then it stays). True when the blob is gone from
/// blobs/ (moved, or vanished meanwhile).
Result<bool> quarantine_blob(const store::BlobStore& store, const std::string& sha256,
                             const fs::path& to, const HashResult& hashed,
                             std::vector<fs::path>& quarantined) {
  auto taken = store.take_out(sha256, hashed.dev, hashed.ino, to);
  if (!taken) return taken.error();
  switch (*taken) {
    case store::TakeOut::moved:
      quarantined.push_back(to);
      return true;
    case store::TakeOut::vanished:
      return true;
    case store::TakeOut::replaced:
      break;
  }
  return false;
}

/// An object store's corrupt blob with repair: its bytes are downloaded into `to` (the
/// quarantine), then the object is deleted unless it was published again since it was looked
/// at (`seen`). False when it turned out intact (republished meanwhile) or was replaced.
Result<bool> quarantine_object(const store::BlobStore& store, const StoredBlob& seen,
                               const fs::path& to, std::vector<fs::path>& quarantined) {
  auto out = AtomicFile::create(to.parent_path(), ".partial-");
  if (!out) return out.error();
  auto hashed = read_object(store, seen.sha256, &*out);
  if (!hashed) {
    if (hashed.error().code == Errc::not_found) return true;  // vanished meanwhile
    return hashed.error();
  }
  if (hashed->sha256 == seen.sha256) return false;
  if (auto st = out->sync(); !st) return st.error();
  if (auto st = out->commit(to, Durability::deferred); !st) return st.error();
  quarantined.push_back(to);
  auto removed = store.remove_unless_replaced(seen);
  if (!removed) return removed.error();
  return *removed;
}

Result<FsckReport> check_data_dir(const fs::path& data_dir, const FsckOptions& options) {
  return check_data_dir(local_settings(data_dir), options);
}

Result<FsckReport> check_data_dir(const Settings& settings, const FsckOptions& options) {
  const fs::path& data_dir = settings.data_dir;
  auto dir = open_existing(settings, options.repair ? LockMode::exclusive : LockMode::shared);
  if (!dir) return dir.error();
  const bool objects = dir->store->backend() == store::BlobBackend::object_store;
  FsckReport report;

  auto listing = dir->store->list();
  if (!listing) return listing.error();
  report.unexpected = std::move(listing->unexpected);
  const std::time_t now = std::time(nullptr);
  auto refs = dir->catalog->referenced_blobs();
  if (!refs) return refs.error();
  auto damaged = dir->catalog->damaged_blobs();
  if (!damaged) return damaged.error();
  std::map<std::string, std::string> recorded;  // sha256 -> detail, damaged before this run
  for (auto& d : *damaged) recorded.emplace(std::move(d.sha256), std::move(d.detail));

  std::map<std::string, std::vector<catalog::BlobRef>> by_sha;
  std::set<std::string> filenames;
  for (auto& r : *refs) {
    filenames.insert(r.filename);
    by_sha[r.sha256].push_back(std::move(r));
  }
  report.files = filenames.size();
  report.checked = by_sha.size();

  std::map<std::string, HashResult> corrupt_files;    // what was hashed, for the quarantine
  std::map<std::string, StoredBlob> corrupt_objects;  // what was looked at, for the quarantine
  for (auto& [sha, users] : by_sha) {
    if (!is_sha256_hex(sha)) {
      report.missing.push_back(BlobProblem{sha, "the catalog's sha256 is malformed", users});
      continue;
    }
    const auto earlier = recorded.find(sha);
    if (objects) {
      // A HEAD: present, with the recorded size; the bytes themselves with FsckDepth::content.
      auto found = dir->store->stat(sha);
      if (!found) return found.error();
      std::string detail;
      if (found->has_value() && (*found)->size != users.front().size) {
        detail = "size is " + std::to_string((*found)->size) + ", the catalog says " +
                 std::to_string(users.front().size);
      } else if (found->has_value() && options.depth == FsckDepth::content) {
        auto hashed = read_object(*dir->store, sha, nullptr);
        if (!hashed && hashed.error().code != Errc::not_found) return hashed.error();
        if (!hashed) {
          found->reset();  // deleted since the HEAD
        } else if (hashed->sha256 != sha) {
          detail = "content has sha256 " + hashed->sha256;
        }
      }
      if (!found->has_value()) {
        std::string missing_detail =
            "no object " + store::blob_key(sha) + " in " + dir->store->describe();
        if (earlier != recorded.end()) {
          missing_detail += " (found damaged earlier: " + earlier->second + ")";
        }
        report.missing.push_back(BlobProblem{sha, std::move(missing_detail), users});
      } else if (!detail.empty()) {
        report.corrupt.push_back(BlobProblem{sha, detail, users});
        corrupt_objects.emplace(sha, **found);
      } else if (earlier != recorded.end()) {
        report.intact_again.push_back(BlobProblem{sha, earlier->second, users});
      }
      continue;
    }
    const fs::path path = dir->store->blob_path(sha);
    std::error_code ec;
    if (!fs::exists(path, ec)) {
      std::string detail = "no such blob " + path.string();
      if (earlier != recorded.end()) detail += " (found damaged earlier: " + earlier->second + ")";
      report.missing.push_back(BlobProblem{sha, std::move(detail), users});
      continue;
    }
    auto hashed = hash_file(path);
    if (!hashed) return hashed.error();
    std::string detail;
    if (hashed->sha256 != sha) {
      detail = "content has sha256 " + hashed->sha256;
    } else if (hashed->size != users.front().size) {
      detail = "size is " + std::to_string(hashed->size) + ", the catalog says " +
               std::to_string(users.front().size);
    }
    if (!detail.empty()) {
      report.corrupt.push_back(BlobProblem{sha, detail, users});
      corrupt_files.emplace(sha, *hashed);
    } else if (earlier != recorded.end()) {
      report.intact_again.push_back(BlobProblem{sha, earlier->second, users});
    }
  }

  std::vector<const StoredBlob*> old_orphans;
  for (const auto& blob : listing->blobs) {
    if (by_sha.contains(blob.sha256)) continue;
    if (age_of(blob, now) < options.min_age) {
      ++report.young_orphans;
    } else {
      report.orphans.push_back(blob.sha256);
      old_orphans.push_back(&blob);
    }
  }
  if (!options.repair) return report;

  for (const StoredBlob* blob : old_orphans) {
    auto removed = dir->store->remove_unless_replaced(*blob);
    if (!removed) return removed.error();
    if (*removed) report.removed_orphans.push_back(blob->sha256);
  }
  // Each damaged blob is recorded in a catalog write transaction of its own, with the move
  // into quarantine inside it: uploads publish blobs inside such transactions too, so a file
  // healed by an upload meanwhile is never quarantined or withdrawn.
  const fs::path quarantine = data_dir / "quarantine";
  if (!report.corrupt.empty()) {
    std::error_code ec;
    fs::create_directories(quarantine, ec);
    if (ec) return errno_error(ec.value(), "create " + quarantine.string());
  }
  // The time suffix keeps an earlier quarantined copy of the same name.
  const std::string suffix = "." + std::to_string(now);
  for (const auto& problem : report.corrupt) {
    const fs::path to = quarantine / (problem.sha256 + suffix);
    auto marked = dir->catalog->mark_damaged(problem.sha256, problem.detail, [&] {
      if (objects) {
        return quarantine_object(*dir->store, corrupt_objects.at(problem.sha256), to,
                                 report.quarantined);
      }
      return quarantine_blob(*dir->store, problem.sha256, to, corrupt_files.at(problem.sha256),
                             report.quarantined);
    });
    if (!marked) return marked.error();
    if (*marked) report.withdrawn.push_back(problem);
  }
  if (!report.quarantined.empty()) {
    if (auto st = fsync_dir(quarantine); !st) return st.error();
  }
  for (const auto& problem : report.missing) {
    if (!is_sha256_hex(problem.sha256) || recorded.contains(problem.sha256)) continue;
    auto marked = dir->catalog->mark_damaged(problem.sha256, "missing", [&]() -> Result<bool> {
      // An upload may have published it again meanwhile.
      auto found = dir->store->stat(problem.sha256);
      if (!found) return found.error();
      return !found->has_value();
    });
    if (!marked) return marked.error();
    if (*marked) report.withdrawn.push_back(problem);
  }
  // Records of blobs intact again, and of blobs no file needs any more (deleted files).
  std::vector<std::string> cleared;
  for (const auto& p : report.intact_again) cleared.push_back(p.sha256);
  for (const auto& [sha, detail] : recorded) {
    if (!by_sha.contains(sha)) cleared.push_back(sha);
  }
  if (!cleared.empty()) {
    if (auto st = dir->catalog->clear_damaged(cleared); !st) return st.error();
  }
  return report;
}

std::size_t ReinspectReport::count(ReinspectedWheel::Outcome outcome) const {
  return static_cast<std::size_t>(std::count_if(
      wheels.begin(), wheels.end(), [&](const auto& w) { return w.outcome == outcome; }));
}

std::size_t ReinspectReport::contradicting() const {
  return static_cast<std::size_t>(std::count_if(wheels.begin(), wheels.end(), [](const auto& w) {
    return w.outcome == ReinspectedWheel::Outcome::recorded && !w.detail.empty();
  }));
}

namespace {

// Reads one stored wheel's binaries as ingest does; the label check only reports.
ReinspectedWheel reinspect_wheel(const DataDir& dir, const catalog::UninspectedWheel& wheel,
                                 const archive::InspectLimits& limits) {
  using Outcome = ReinspectedWheel::Outcome;
  const core::FileRecord& f = wheel.file;
  ReinspectedWheel out{f.filename, Outcome::failed, std::nullopt, {}};
  if (f.damaged) {
    out.outcome = Outcome::skipped;
    out.detail = "damaged (withdrawn by fsck --repair): heal it first";
    return out;
  }
  if (!is_sha256_hex(f.sha256)) {
    out.detail = "the catalog's sha256 is malformed";
    return out;
  }
  // A blob file, or an object's verified copy in the read cache.
  auto local = dir.store->local_copy(f.sha256);
  if (!local) {
    out.detail = local.error().message + " (wheelforge fsck tells more)";
    return out;
  }
  const fs::path& path = *local;
  // The findings are kept for the file's lifetime: read them from its own bytes only.
  auto hashed = hash_file(path);
  if (!hashed) {
    out.detail = hashed.error().message + " (wheelforge fsck tells more)";
    return out;
  }
  if (hashed->sha256 != f.sha256) {
    out.detail = "its blob has sha256 " + hashed->sha256 + " (wheelforge fsck tells more)";
    return out;
  }
  auto binaries = archive::inspect_wheel_binaries(path, limits);
  if (!binaries) {
    out.detail = "reading the wheel's binaries: " + binaries.error().message;
    return out;
  }
  core::WheelFindings findings = core::find_wheel(*binaries, f.hints, wheel.requires_dist);
  const auto name = core::parse_dist_filename(f.filename);
  const std::string label = name ? name->version.local_str() : std::string();
  if (auto st = core::check_label_against_binaries(f.hints, label, findings); !st) {
    out.detail = st.error().message;
  }
  auto recorded = dir.catalog->record_findings(f.filename, f.sha256, findings);
  if (!recorded) {
    out.detail = recorded.error().message;
    if (recorded.error().code == Errc::not_found) out.outcome = Outcome::gone;
    return out;
  }
  out.outcome = *recorded ? Outcome::recorded : Outcome::already;
  if (*recorded) {
    out.findings = std::move(findings);
  } else {
    out.detail.clear();
  }
  return out;
}

}  // namespace

Result<ReinspectReport> reinspect_data_dir(
    const fs::path& data_dir, const ReinspectOptions& options,
    const std::function<void(const ReinspectedWheel&)>& on_wheel) {
  return reinspect_data_dir(local_settings(data_dir), options, on_wheel);
}

Result<ReinspectReport> reinspect_data_dir(
    const Settings& settings, const ReinspectOptions& options,
    const std::function<void(const ReinspectedWheel&)>& on_wheel) {
  auto dir = open_existing(settings, LockMode::shared);
  if (!dir) return dir.error();
  auto wheels = dir->catalog->uninspected_wheels();
  if (!wheels) return wheels.error();
  archive::InspectLimits limits;
  limits.max_members = options.max_members;
  limits.max_inflated_bytes = options.max_inflated_bytes;
  ReinspectReport report;
  for (const auto& wheel : *wheels) {
    ReinspectedWheel done = reinspect_wheel(*dir, wheel, limits);
    if (on_wheel) on_wheel(done);
    report.wheels.push_back(std::move(done));
  }
  return report;
}

}  // namespace wf::app
