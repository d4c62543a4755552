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
#include "maintenance_dir.hpp"
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
using detail::hash_file;
using detail::HashResult;
using detail::local_settings;
using detail::LockMode;
using detail::open_existing;
using detail::read_object;

using store::StoredBlob;

/// How long ago a blob was last published. An unknown time (0: an object store's date that
/// could not be read) counts as now: such a blob is never old enough to be collected.
std::chrono::seconds age_of(const StoredBlob& blob, std::time_t now) {
  if (blob.changed <= 0) return std::chrono::seconds{0};
  return std::chrono::seconds{now > blob.changed ? now - blob.changed : 0};
}

}  // namespace

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

}  // namespace wf::app
