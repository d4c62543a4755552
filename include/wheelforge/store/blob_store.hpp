#pragma once
// Content-addressed, immutable blob store under DATA_DIR:
//   blobs/<aa>/<bb>/<sha256>   published blobs (read-only once renamed into place)
//   tmp/s-XXXXXX/              this process's files being written (flock'ed session dir);
//                              sessions of dead processes are removed when a store opens
// Publishing is crash-safe: data goes to a temp file in tmp/ (same filesystem), is fsynced,
// renamed into blobs/, and the directory is fsynced. A blob only becomes visible complete.
// Batch writers defer those syncs (Sync::deferred) and make a whole batch durable with one
// flush() before they record it anywhere.
// Every function blocks on the filesystem: call from worker threads.
//
// Errors are the server's, never the client's: storage_full on ENOSPC/EDQUOT; unavailable when
// this process may not write the data directory (read-only filesystem, permissions), with a
// message naming the directory; io for any other fault (EIO above all).

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/util/atomic_file.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::store {

class BlobStore;

/// The store's own wording of a filesystem error under `data_dir`: an unavailable error
/// (read-only, permission denied) names the data directory and what the administrator must
/// do; other errors are returned as they are.
[[nodiscard]] Error store_error(const std::filesystem::path& data_dir, Error error);

/// When a write is made durable.
enum class Sync {
  now,       ///< before the call returns (fsync of the file or of its directory)
  deferred,  ///< by the caller's next BlobStore::flush()
};

/// A file being written into tmp/. Bytes are hashed (sha256) as they are written.
/// The destructor removes the file unless commit() published it: a dropped upload leaves
/// nothing behind.
class TempFile {
 public:
  TempFile(TempFile&&) noexcept = default;
  TempFile& operator=(TempFile&&) noexcept = default;
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() = default;

  /// Appends bytes. Fails with storage_full on ENOSPC/EDQUOT, unavailable when the data
  /// directory is not writable, io otherwise.
  [[nodiscard]] Status write(const void* data, std::size_t size);
  /// write() in two halves for callers that store and hash a chunk on two threads at once
  /// (they touch disjoint state): every chunk goes through both, in the same order, and
  /// neither runs concurrently with itself or with write() or finish().
  [[nodiscard]] Status write_unhashed(const void* data, std::size_t size);
  void hash(const void* data, std::size_t size);
  /// fsyncs the data (unless deferred) and fixes the digest. Must succeed before commit()
  /// and before sha256() means anything: after a failure (io on EIO) the file's content on
  /// disk is unknown.
  [[nodiscard]] Status finish(Sync sync = Sync::now);

  [[nodiscard]] std::uint64_t size() const { return size_; }
  /// Lower-case hex sha256 of everything written; valid after finish().
  [[nodiscard]] const std::string& sha256() const { return sha256_; }
  [[nodiscard]] const std::filesystem::path& path() const { return file_.temp_path(); }

 private:
  friend class BlobStore;
  TempFile(AtomicFile file, std::filesystem::path data_dir);

  AtomicFile file_;                 ///< removed on destruction unless committed
  std::filesystem::path data_dir_;  ///< for error messages
  std::unique_ptr<crypto::Hasher> hasher_;
  std::uint64_t size_ = 0;
  std::string sha256_;
  bool finished_ = false;
};

class BlobStore {
 public:
  /// Creates blobs/ and tmp/ under data_dir, removes stale temp files (a crashed writer's
  /// leftovers) and opens this process's temp session. Fails with io when the directories
  /// cannot be created.
  [[nodiscard]] static Result<std::unique_ptr<BlobStore>> open(
      const std::filesystem::path& data_dir);

  /// A new empty temp file in tmp/.
  [[nodiscard]] Result<TempFile> create_temp() const;

  /// Publishes a finished temp file under its sha256 (idempotent: an existing blob with the
  /// same hash is replaced by the same bytes). Returns the blob path. When the rename worked
  /// but the directory could not be synced, a blob that did not exist before is removed again.
  [[nodiscard]] Result<std::filesystem::path> commit(TempFile temp, Sync sync = Sync::now) const;

  /// Stores small bytes (e.g. METADATA) as a blob; returns their sha256.
  [[nodiscard]] Result<std::string> put(std::string_view bytes, Sync sync = Sync::now) const;

  /// Removes a blob that the caller published a moment ago, inside the catalog transaction
  /// that published it and before any row references it: undoes the publish of a file that
  /// could not be recorded. Never use it on a blob that a row may reference.
  [[nodiscard]] Status withdraw(std::string_view sha256) const;

  /// Makes every deferred write durable: one syncfs() of the filesystem holding the store,
  /// which also writes back other dirty files of that filesystem. Fails with io.
  [[nodiscard]] Status flush() const;

  /// Where the blob with this hash lives (whether or not it exists).
  [[nodiscard]] std::filesystem::path blob_path(std::string_view sha256) const;
  /// The same path as a plain string, built without std::filesystem (for the serving path).
  [[nodiscard]] std::string blob_file(std::string_view sha256) const;
  [[nodiscard]] bool contains(std::string_view sha256) const;

  /// This process's temp session directory (inside DATA_DIR/tmp/).
  [[nodiscard]] const std::filesystem::path& tmp_dir() const { return tmp_dir_; }
  [[nodiscard]] const std::filesystem::path& blobs_dir() const { return blobs_dir_; }
  [[nodiscard]] const std::filesystem::path& data_dir() const { return data_dir_; }

  BlobStore(const BlobStore&) = delete;
  BlobStore& operator=(const BlobStore&) = delete;
  /// Removes this process's temp session directory.
  ~BlobStore();

 private:
  BlobStore(std::filesystem::path data_dir, std::filesystem::path blobs, std::filesystem::path tmp,
            UniqueFd lock)
      : data_dir_(std::move(data_dir)),
        blobs_dir_(std::move(blobs)),
        tmp_dir_(std::move(tmp)),
        lock_(std::move(lock)) {}

  std::filesystem::path data_dir_;
  std::filesystem::path blobs_dir_;
  std::filesystem::path tmp_dir_;
  UniqueFd lock_;
};

}  // namespace wf::store
