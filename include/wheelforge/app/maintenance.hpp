#pragma once
// Operating an index while the server runs: online backup, garbage collection of
// unreferenced blobs, an integrity check (fsck) of every blob the catalog references, and the
// inspection of wheels stored before ingest read their binaries (reinspect). Each works on the
// catalog and blob store the settings name: SQLite or PostgreSQL, local files or an S3 object
// store (docs/operations.md).
//
// They rely on two facts of the store: a blob is published (with an object store: uploaded
// and checked) before the catalog row that references it is committed, and a published blob
// is immutable (content-addressed). Each takes DATA_DIR/maintenance.lock (shared when it only
// reads, exclusive when it removes or moves blobs), so that gc never removes a blob that a
// running backup on the same host is about to copy.
// Every function blocks on the filesystem, the database and the object store.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "wheelforge/app/app.hpp"
#include "wheelforge/catalog/catalog.hpp"
#include "wheelforge/core/binding.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::app {

/// How blobs get into a backup.
enum class BlobCopy {
  /// Independent copies: a reflink (FICLONE: shared extents, copy-on-write) where the
  /// filesystem can make one, else a byte copy (copy_file_range); damage to a live file after
  /// the backup does not reach the copy.
  copy,
  /// Hard links where DEST is on the same filesystem (else copies): no space, no time, but a
  /// link is the live file itself, so corruption of one is corruption of both.
  link,
};

struct BackupOptions {
  std::filesystem::path dest;
  BlobCopy copy = BlobCopy::copy;
};

struct BackupReport {
  std::size_t files = 0;
  std::size_t projects = 0;
  std::size_t tokens = 0;
  std::size_t blobs = 0;      ///< distinct blobs written into DEST
  std::size_t linked = 0;     ///< hard links (BlobCopy::link)
  std::size_t copied = 0;     ///< independent copies, reflinks included
  std::size_t reflinked = 0;  ///< of the copies, those made as reflinks
  std::uint64_t bytes = 0;
  std::vector<std::string> missing;  ///< sha256 of referenced blobs absent from the store
  std::vector<std::string> corrupt;  ///< sha256 of copied blobs whose bytes did not match
  /// With a PostgreSQL catalog: the pg_dump archive written (DEST/catalog.pgdump); empty with
  /// SQLite (DEST/wheelforge.db).
  std::filesystem::path catalog_dump;
};

/// Writes DEST/wheelforge.db (a consistent snapshot of the catalog taken while the server may
/// be writing), then every blob that snapshot references into DEST/blobs/ (copied, each
/// verified against its sha256 and fsynced, or hard-linked: see BlobCopy), then
/// DEST/BACKUP-INFO last: a DEST without it is incomplete. DEST is a complete data directory:
/// serving it (--data-dir DEST) restores the index as of the snapshot.
/// Fails with conflict when DEST exists and is not an empty directory, not_found when
/// data_dir holds no catalog, unavailable when gc or fsck --repair holds the lock, io or
/// storage_full on write errors. Missing or corrupt source blobs are reported, not fatal.
[[nodiscard]] Result<BackupReport> backup_data_dir(const std::filesystem::path& data_dir,
                                                   const BackupOptions& options);
/// The same for the stores `settings` names. With a PostgreSQL catalog the catalog goes into
/// DEST/catalog.pgdump (`pg_dump --format=custom`, one consistent snapshot; pg_dump from
/// PATH, the password handed over in PGPASSWORD), and the blobs the catalog references
/// before and after the dump into DEST/blobs/. With an object store, each blob is streamed
/// from the store into DEST/blobs/ and verified against its sha256 (BlobCopy::link copies).
/// DEST is then a data directory holding files: restored by pg_restore into a new database
/// (docs/operations.md), served with `blob_store = "file"` or moved into a bucket.
/// unavailable when PostgreSQL, pg_dump or the object store fails (naming it).
[[nodiscard]] Result<BackupReport> backup_data_dir(const Settings& settings,
                                                   const BackupOptions& options);

/// Removal happens only for blobs unreferenced and unchanged for min_age (the protection
/// window): a concurrent upload publishes its blob before committing the row that references
/// it, which on an object store may be a long upload before. An object's age is its
/// LastModified, a file's the later of its mtime and ctime.
struct GcOptions {
  bool dry_run = false;
  std::chrono::seconds min_age{3600};
  /// Settings::upstream_file_cache: upstream files beyond it are evicted first (not on a dry
  /// run). 0: no bound.
  std::uint64_t upstream_file_cache = 0;
  /// Settings::upstream_page_disk_cache: the disk copies of upstream pages beyond it are
  /// removed, least recently written first (not on a dry run). 0: no bound.
  std::uint64_t upstream_page_disk_cache = 0;
  /// [build] pip_cache: the least recently used files of DATA_DIR/builds/pip-cache beyond it
  /// are removed (not on a dry run). 0: no bound.
  std::uint64_t pip_cache = 0;
};

struct GcReport {
  std::vector<std::string> removed;  ///< sha256 (would be removed, on a dry run)
  std::uint64_t removed_bytes = 0;
  std::size_t referenced = 0;           ///< blobs kept because a file references them
  std::size_t too_young = 0;            ///< unreferenced blobs kept because younger than min_age
  std::size_t stale_temp_sessions = 0;  ///< dead writers' temp directories removed
  std::vector<std::string> evicted;     ///< upstream files evicted: "<upstream>/<filename>"
  std::uint64_t evicted_bytes = 0;
  std::size_t page_copies_removed = 0;  ///< disk copies of upstream pages beyond their bound
  std::uint64_t page_copies_bytes = 0;  ///< ... and their blocks
  std::size_t pip_cache_removed = 0;    ///< files of the builds' pip cache beyond its bound
  std::uint64_t pip_cache_bytes = 0;    ///< ... and their blocks
  std::vector<std::filesystem::path> unexpected;  ///< files under blobs/ that are not blobs
};

/// Removes the blobs that no file row references (deleted files' blobs included). Also
/// removes dead writers' temp sessions (as opening the store always does, dry run or not).
/// Fails with not_found when data_dir holds no catalog, unavailable when another maintenance
/// command holds the lock, io on filesystem errors.
[[nodiscard]] Result<GcReport> collect_garbage(const std::filesystem::path& data_dir,
                                               const GcOptions& options);
/// The same for the stores `settings` names (objects listed with ListObjectsV2).
[[nodiscard]] Result<GcReport> collect_garbage(const Settings& settings, const GcOptions& options);

/// How much of each object fsck reads on an object store (local files are always hashed).
enum class FsckDepth : std::uint8_t {
  size,     ///< a HEAD per blob: present, with the size the catalog records
  content,  ///< every byte read back (a streamed GET) and hashed against its sha256
};

struct FsckOptions {
  bool repair = false;
  /// Orphans younger than this are not reported (and never removed): they may belong to an
  /// upload in progress.
  std::chrono::seconds min_age{3600};
  FsckDepth depth = FsckDepth::size;
};

/// A referenced blob that is absent or damaged, with the rows that need it.
struct BlobProblem {
  std::string sha256;
  std::string detail;
  std::vector<catalog::BlobRef> refs;
};

struct FsckReport {
  std::size_t checked = 0;  ///< distinct referenced blobs
  std::size_t files = 0;    ///< file rows
  std::vector<BlobProblem> missing;
  std::vector<BlobProblem> corrupt;
  std::vector<std::string> orphans;  ///< unreferenced blobs older than min_age (sha256)
  std::size_t young_orphans = 0;
  std::vector<std::filesystem::path> unexpected;  ///< files under blobs/ that are not blobs
  /// With repair: where each corrupt blob was moved, and the orphans removed.
  std::vector<std::filesystem::path> quarantined;
  std::vector<std::string> removed_orphans;
  /// With repair: blobs recorded as damaged by this run (missing or corrupt); the files that
  /// reference them are withdrawn from the index (pages, 503 at their URLs).
  std::vector<BlobProblem> withdrawn;
  /// Blobs recorded as damaged earlier that are intact again (restored by hand); with repair
  /// their record was dropped and their files are served again.
  std::vector<BlobProblem> intact_again;

  /// True when every referenced blob is present and intact.
  [[nodiscard]] bool clean() const { return missing.empty() && corrupt.empty(); }
};

/// Hashes every referenced blob (file and METADATA) and compares it with its name and the
/// size its rows record; lists orphans and stray files. With repair, removes old orphans,
/// moves corrupt blobs to DATA_DIR/quarantine/ and records every missing or corrupt blob as
/// damaged in the catalog (Catalog::mark_damaged), so that a server on the same data
/// directory stops offering the files that need them (it notices at its next catalog poll;
/// their URLs answer 503 at once, as the blob is gone). Rows are never removed: ingesting the
/// same file again heals it, or `wheelforge delete` removes it. A damaged blob found intact
/// again (restored from a backup) is served again.
/// Fails with not_found when data_dir holds no catalog, unavailable when another maintenance
/// command holds the lock, io on filesystem errors.
[[nodiscard]] Result<FsckReport> check_data_dir(const std::filesystem::path& data_dir,
                                                const FsckOptions& options);
/// The same for the stores `settings` names. With an object store, a blob is checked by a HEAD
/// (FsckDepth::size) or read back whole (FsckDepth::content); with repair a corrupt object is
/// downloaded into DATA_DIR/quarantine/ and then deleted from the store.
[[nodiscard]] Result<FsckReport> check_data_dir(const Settings& settings,
                                                const FsckOptions& options);

struct ReinspectOptions {
  /// The archive bounds of ingest (Settings::max_archive_members, max_inflated_size).
  std::uint64_t max_members = 200'000;
  std::uint64_t max_inflated_bytes = std::uint64_t{16} << 30U;
};

/// What reinspect did with one wheel that had no findings.
struct ReinspectedWheel {
  enum class Outcome : std::uint8_t {
    recorded,  ///< its binaries were read and the findings recorded
    already,   ///< another run or process recorded findings meanwhile: kept
    gone,      ///< deleted meanwhile
    skipped,   ///< damaged (withdrawn by fsck --repair): not read
    failed,    ///< its blob is missing, damaged or cannot be read as a wheel: left without
  };
  std::string filename;
  Outcome outcome = Outcome::failed;
  /// recorded: the findings; otherwise empty.
  std::optional<core::WheelFindings> findings;
  /// recorded: a label the binaries contradict (the message ingest refuses such a wheel
  /// with); the wheel stays stored and served. skipped, failed: why.
  std::string detail;
};

struct ReinspectReport {
  std::vector<ReinspectedWheel> wheels;  ///< by file name
  [[nodiscard]] std::size_t count(ReinspectedWheel::Outcome outcome) const;
  /// Recorded wheels whose binaries contradict their label.
  [[nodiscard]] std::size_t contradicting() const;
};

/// Reads the binaries of every stored wheel that has no findings (stored before ingest read
/// them, catalog::Catalog::uninspected_wheels), through the inspection of ingest (the blob's
/// sha256 checked first, then archive::inspect_wheel_binaries and core::find_wheel with the
/// row's hints and Requires-Dist), and records them (Catalog::record_findings), one wheel at a
/// time: an interrupted run leaves the wheels before it recorded, and running it again goes
/// on with the rest (it is idempotent). Nothing is refused or removed: a label the binaries
/// contradict is reported in the wheel's detail only. `on_wheel` sees each wheel as it is
/// done. Takes the maintenance lock shared (fsck --repair waits). Fails with not_found when
/// data_dir holds no catalog, unavailable when gc or fsck --repair holds the lock, or with a
/// catalog error.
[[nodiscard]] Result<ReinspectReport> reinspect_data_dir(
    const std::filesystem::path& data_dir, const ReinspectOptions& options,
    const std::function<void(const ReinspectedWheel&)>& on_wheel = {});
/// The same for the stores `settings` names (an object's bytes read through the read cache).
[[nodiscard]] Result<ReinspectReport> reinspect_data_dir(
    const Settings& settings, const ReinspectOptions& options,
    const std::function<void(const ReinspectedWheel&)>& on_wheel = {});

/// `wheelforge backup DEST`: prints what was written; 0, 1 when blobs were missing or corrupt
/// (the backup is still usable for everything else), 2 when no backup was made.
int backup(const Settings& settings, const BackupOptions& options);

/// `wheelforge gc`: prints what was (or would be) removed; 0, or 1 on failure.
int gc(const Settings& settings, const GcOptions& options);

/// `wheelforge fsck`: prints every problem and, for rows whose blob is missing, the command
/// that removes them; 0 when clean, 1 when problems remain, 2 when the check could not run.
int fsck(const Settings& settings, const FsckOptions& options);

/// `wheelforge reinspect`: prints one line per wheel as it is done, and a summary; 0 when
/// every wheel without findings has them now, 1 when some could not be read (they stay
/// without), 2 when the command could not run.
int reinspect(const Settings& settings);

/// Where `wheelforge migrate` copies an index to; what is left out stays as configured.
struct MigrateOptions {
  std::optional<std::string> to_catalog;     ///< "sqlite" or a PostgreSQL URI
  std::optional<std::string> to_blob_store;  ///< "file" or s3://BUCKET/PREFIX ([s3] table)
  /// The target's data directory: its SQLite catalog, its blobs (file store), its temp files
  /// and read cache (S3). Default: the source's.
  std::optional<std::filesystem::path> to_data_dir;
};

/// `wheelforge migrate`: copies the index of `settings` (every catalog row: projects, files,
/// yanks, deletions, tokens as hashes, claims, audit, builds and jobs, damage records, upstream
/// blob references; and every blob a row references) into the catalog and blob store that
/// `options` name. Each blob is read from the source as a stream into a temp file of the
/// target, its sha256 and size checked against the catalog, and published before any row is
/// copied; blobs the target holds already (same size) are skipped, rows present with the same
/// values are skipped, so that an interrupted run is run again to finish. Prints one line per
/// blob and per table and a summary. Returns 0 when everything is in the target; 1 when the
/// copy stopped on the data (a source blob missing or not matching its sha256, named; the
/// target holding other data under a key, named): no row is copied while a blob failed; 2
/// when it could not run (the target is the source, a store or database unreachable, a bad
/// location).
int migrate(const Settings& settings, const MigrateOptions& options);

/// `wheelforge config check`: prints the effective configuration as TOML (the build runner's
/// as comment lines) and returns 0, or prints every problem, those of the build host included
/// (one per line, on stderr), and returns 2.
int config_check(const std::optional<std::filesystem::path>& config_file,
                 const Overrides& overrides);

}  // namespace wf::app
