#pragma once
// An existing data directory opened for maintenance (backup, gc, fsck, reinspect): its lock,
// catalog and blob store; and the hashing of stored files those commands share.

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "wheelforge/app/app.hpp"
#include "wheelforge/catalog/catalog.hpp"
#include "wheelforge/store/blob_store.hpp"
#include "wheelforge/util/atomic_file.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::app::detail {

/// The buffer of the maintenance commands' reads and copies.
inline constexpr std::size_t kCopyBuffer = 1U << 20U;

enum class LockMode { shared, exclusive };

/// An existing data directory, opened for maintenance.
struct MaintenanceDir {
  UniqueFd lock;
  std::unique_ptr<catalog::Catalog> catalog;
  std::unique_ptr<store::BlobStore> store;
  std::size_t stale_temp_sessions = 0;
};

/// Opens the data directory of `settings` under its maintenance lock (shared or exclusive):
/// Errc::not_found when a SQLite data directory has no catalog, Errc::unavailable while another
/// maintenance command holds the lock.
[[nodiscard]] Result<MaintenanceDir> open_existing(const Settings& settings, LockMode mode);

/// The settings of a plain data directory: SQLite and local files.
[[nodiscard]] Settings local_settings(const std::filesystem::path& data_dir);

struct HashResult {
  std::string sha256;
  std::uint64_t size = 0;
  dev_t dev = 0;  ///< the file that was hashed
  ino_t ino = 0;
};

/// Hashes an open file from its start.
[[nodiscard]] Result<HashResult> hash_fd(int fd, const std::filesystem::path& path);
/// Hashes a file.
[[nodiscard]] Result<HashResult> hash_file(const std::filesystem::path& path);

/// Reads the object of blob `sha256` from the blob store's object store, hashing it, and into
/// `out` when not null. not_found when there is no such object; unavailable naming the store
/// when it cannot be read; a failing write to `out` as it is.
[[nodiscard]] Result<HashResult> read_object(const store::BlobStore& store,
                                             const std::string& sha256, AtomicFile* out);

}  // namespace wf::app::detail
