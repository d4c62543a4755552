// `wheelforge backup` (app/maintenance.hpp): a consistent copy of the catalog and every blob it
// references, each blob verified against its sha256 on the way.

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <set>

#include "command_support.hpp"
#include "maintenance_dir.hpp"
#include "wheelforge/app/maintenance.hpp"
#include "wheelforge/build/process.hpp"
#include "wheelforge/catalog/pg_snapshot.hpp"
#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/store/blob_store.hpp"
#include "wheelforge/util/atomic_file.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/strings.hpp"
#include "wheelforge/util/time.hpp"

namespace wf::app {
namespace {

namespace fs = std::filesystem;
using detail::hash_fd;
using detail::kCopyBuffer;
using detail::local_settings;
using detail::LockMode;
using detail::open_existing;
using detail::read_object;

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

}  // namespace wf::app
