#pragma once
// Content-addressed, immutable blob store. Two backends (docs/storage.md, "Blob store
// backends"):
//  - file (the default): blobs are files under DATA_DIR:
//      blobs/<aa>/<bb>/<sha256>   published blobs (read-only once renamed into place)
//  - object store (S3): blobs are objects `blobs/<aa>/<bb>/<sha256>` under the store's prefix,
//    and DATA_DIR/cache/blobs holds a bounded local read cache of them (read_cache.hpp).
// Both write through temp files in DATA_DIR:
//      tmp/s-XXXXXX/              this process's files being written (flock'ed session dir);
//                                 sessions of dead processes are removed when a store opens
// Readers that need a blob as a file ask local_copy(): the blob file itself, or a verified
// copy in the read cache. The serving path asks serving_path() (never blocks on the network).
// The store owns this layout: other modules get blob paths from blob_path() (or
// blob_path_in() for a data directory being written, a backup), walk the blobs with list()
// and move them with take_out() and remove_unless_replaced().
// Publishing is crash-safe: data goes to a temp file in tmp/ (same filesystem), is fsynced,
// renamed into blobs/, and the directory is fsynced. A blob only becomes visible complete.
// Batch writers defer those syncs (Sync::deferred) and make a whole batch durable with one
// flush() before they record it anywhere.
// Every function blocks on the filesystem: call from worker threads.
//
// Errors are the server's, never the client's: storage_full on ENOSPC/EDQUOT; unavailable when
// this process may not write the data directory (read-only filesystem, permissions), with a
// message naming the directory; io for any other fault (EIO above all). With an object store,
// every failure to reach it or of a request to it is unavailable, with a message naming the
// store ("object store s3://BUCKET/PREFIX at ENDPOINT: ..."): uploads answer 503 naming it.

#include <sys/types.h>

#include <cstdint>
#include <ctime>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/store/blob_reader.hpp"
#include "wheelforge/store/object_store.hpp"
#include "wheelforge/store/read_cache.hpp"
#include "wheelforge/util/atomic_file.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::store {

class BlobStore;

/// The store's own wording of a filesystem error under `data_dir`: an unavailable error
/// (read-only, permission denied) names the data directory and what the administrator must
/// do; other errors are returned as they are.
[[nodiscard]] Error store_error(const std::filesystem::path& data_dir, Error error);

/// Where the blob with this hash lives in the data directory `data_dir`:
/// `data_dir/blobs/<aa>/<bb>/<sha256>`. For a data directory that is not open as a store (a
/// backup being written); an open store answers BlobStore::blob_path().
[[nodiscard]] std::filesystem::path blob_path_in(const std::filesystem::path& data_dir,
                                                 std::string_view sha256);
/// The directories that blob_path_in(data_dir, sha256) lies in, deepest first, up to and
/// including `data_dir/blobs`: what must be fsynced for a new blob's name to be durable.
[[nodiscard]] std::vector<std::filesystem::path> blob_dirs_in(const std::filesystem::path& data_dir,
                                                              std::string_view sha256);

/// Where a store keeps its blobs.
enum class BlobBackend {
  file,          ///< files under DATA_DIR/blobs
  object_store,  ///< objects in an S3-compatible store, with a local read cache
};

/// How a BlobStore is opened beyond its data directory.
struct BlobStoreOptions {
  /// The durable tier; null: the file backend.
  std::shared_ptr<ObjectStore> objects;
  /// The bound on the local read cache (object store only).
  std::uint64_t cache_bytes = std::uint64_t{2} << 30U;
};

/// The key of a blob in an object store: `blobs/<aa>/<bb>/<sha256>`.
[[nodiscard]] std::string blob_key(std::string_view sha256);

/// A blob found by BlobStore::list() or BlobStore::stat().
struct StoredBlob {
  std::string sha256;
  std::filesystem::path path;  ///< the file; the object's key with an object store
  dev_t dev = 0;  ///< with `ino`: the file that was listed, to notice a replacement (files)
  ino_t ino = 0;
  std::uint64_t size = 0;
  std::time_t changed = 0;  ///< the later of mtime and ctime; an object's last modification
};

struct BlobListing {
  std::vector<StoredBlob> blobs;
  /// Other files under blobs/ (not regular files, names that are not a sha256, or not at the
  /// path their name gives): never blobs, left alone.
  std::vector<std::filesystem::path> unexpected;
};

/// What BlobStore::take_out() did.
enum class TakeOut {
  moved,     ///< the blob is at the destination
  vanished,  ///< there was no blob (removed meanwhile)
  replaced,  ///< the blob is another file than the one named (published again): left in place
};

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
  /// With `options.objects`, blobs live in that object store and DATA_DIR/cache/blobs is the
  /// read cache (opened here; no request is made to the store).
  [[nodiscard]] static Result<std::unique_ptr<BlobStore>> open(
      const std::filesystem::path& data_dir, BlobStoreOptions options = {});

  /// A new empty temp file in tmp/.
  [[nodiscard]] Result<TempFile> create_temp() const;

  /// Publishes a finished temp file under its sha256 (idempotent: an existing blob with the
  /// same hash is replaced by the same bytes). Returns the blob path. When the rename worked
  /// but the directory could not be synced, a blob that did not exist before is removed again.
  /// With an object store: uploads the file (multipart when large, streamed from disk), then
  /// checks that the object is there with the file's size, before it returns; the temp file
  /// becomes the blob's read-cache copy, whose path is returned. A failed upload leaves no
  /// object (the client aborts it).
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

  /// Every blob under blobs/ with what stat(2) says of it, and every other file there.
  /// Files removed while listing are left out. Fails with io when blobs/ cannot be read.
  /// With an object store: every object under the prefix blobs/ (keys that are not a blob's
  /// are `unexpected`).
  [[nodiscard]] Result<BlobListing> list() const;
  /// The blob `sha256` as list() would show it; nullopt when there is none.
  [[nodiscard]] Result<std::optional<StoredBlob>> stat(std::string_view sha256) const;

  /// Moves the blob `sha256` out of blobs/ to `to` (a path on the same filesystem), unless it
  /// is no longer the file (dev, ino) the caller looked at. A blob is replaced only by
  /// publishing the same bytes again (a commit renames a new file over it, and a catalog row
  /// may reference it from then on): the move, then a look at what was moved, makes that
  /// visible, and a replacement is put back at once, so a blob that just became referenced
  /// is never lost. Fails with io (naming the move, the stat or the put-back).
  [[nodiscard]] Result<TakeOut> take_out(std::string_view sha256, dev_t dev, ino_t ino,
                                         const std::filesystem::path& to) const;
  /// Removes a listed blob unless it has been replaced since (take_out() into this process's
  /// temp session, then unlink). True when it was removed; false when it was gone already or
  /// replaced.
  /// With an object store (no rename to look through): the object is removed unless its last
  /// modification is later than the listed one (`changed`), i.e. unless it was published
  /// again since it was listed. A republish between that look and the delete is not seen;
  /// callers only remove blobs no row references, and a republish writes the same bytes under
  /// the same key (docs/storage.md, "Consistency: blob before row").
  [[nodiscard]] Result<bool> remove_unless_replaced(const StoredBlob& blob) const;

  /// Where the blob with this hash lives (whether or not it exists). With an object store:
  /// where its read-cache copy lives. Readers use local_copy().
  [[nodiscard]] std::filesystem::path blob_path(std::string_view sha256) const;
  /// The same path as a plain string, built without std::filesystem (for the serving path).
  [[nodiscard]] std::string blob_file(std::string_view sha256) const;
  /// Whether the blob exists (with an object store: a copy in the read cache, else a HEAD of
  /// the object; false when the store cannot be reached).
  [[nodiscard]] bool contains(std::string_view sha256) const;

  /// A local file holding the blob's bytes, to read: the blob file itself (not_found when
  /// there is none), or with an object store the read cache's copy, fetched and verified
  /// first when there is none (not_found when the store has no such object; unavailable
  /// naming the store when it cannot be read). Blocks (on the network): call from workers.
  [[nodiscard]] Result<std::filesystem::path> local_copy(std::string_view sha256) const;
  /// Random access to the blob's bytes for a reader that needs parts of it (blob_reader.hpp):
  /// the blob file, or the read cache's copy when there is one, else ranged reads of the object
  /// (one HEAD now for its size; nothing is added to the read cache). not_found when there is
  /// no such blob; unavailable naming the store when it cannot be reached. Blocks (on the
  /// network): call from workers.
  [[nodiscard]] Result<std::unique_ptr<BlobReader>> open_reader(std::string_view sha256) const;
  /// The file the serving path may send without blocking on the network: the blob file
  /// (whether or not it exists, as blob_file()), or the read cache's copy when there is one;
  /// nullopt when only local_copy() can make one.
  [[nodiscard]] std::optional<std::string> serving_path(std::string_view sha256) const;

  [[nodiscard]] BlobBackend backend() const {
    return objects_ ? BlobBackend::object_store : BlobBackend::file;
  }
  /// The object store, or null with the file backend.
  [[nodiscard]] ObjectStore* object_store() const { return objects_.get(); }
  /// The read cache, or null with the file backend.
  [[nodiscard]] ReadCache* read_cache() const { return cache_.get(); }
  /// Whether the durable tier answers (/readyz): with an object store, ObjectStore::probe()
  /// (unavailable, "S3 bucket B at endpoint E is unreachable: ..."); the file backend is
  /// always ok (a local disk's faults show on the requests that meet them). Blocks on the
  /// network: call from workers.
  [[nodiscard]] Status probe() const;
  /// "the data directory D" or "object store s3://B/P at E": where the blobs are, for messages.
  [[nodiscard]] std::string describe() const;

  /// This process's temp session directory (inside DATA_DIR/tmp/).
  [[nodiscard]] const std::filesystem::path& tmp_dir() const { return tmp_dir_; }
  /// How many entries of DATA_DIR/tmp/ open() removed: sessions of dead processes (and loose
  /// files, which no process writes).
  [[nodiscard]] std::size_t stale_temps_removed() const { return stale_temps_removed_; }
  [[nodiscard]] const std::filesystem::path& blobs_dir() const { return blobs_dir_; }
  [[nodiscard]] const std::filesystem::path& data_dir() const { return data_dir_; }

  BlobStore(const BlobStore&) = delete;
  BlobStore& operator=(const BlobStore&) = delete;
  /// Removes this process's temp session directory.
  ~BlobStore();

 private:
  BlobStore(std::filesystem::path data_dir, std::filesystem::path blobs, std::filesystem::path tmp,
            UniqueFd lock, std::size_t stale_temps_removed)
      : data_dir_(std::move(data_dir)),
        blobs_dir_(std::move(blobs)),
        tmp_dir_(std::move(tmp)),
        lock_(std::move(lock)),
        stale_temps_removed_(stale_temps_removed) {}

  /// An object store's error as the store's: unavailable (not_found kept when `keep_not_found`),
  /// naming the store.
  [[nodiscard]] Error object_error(const Error& error, std::string_view what,
                                   bool keep_not_found = false) const;
  [[nodiscard]] Result<std::filesystem::path> commit_object(TempFile temp) const;

  std::shared_ptr<ObjectStore> objects_;
  std::unique_ptr<ReadCache> cache_;
  std::filesystem::path data_dir_;
  std::filesystem::path blobs_dir_;
  std::filesystem::path tmp_dir_;
  UniqueFd lock_;
  std::size_t stale_temps_removed_ = 0;
};

}  // namespace wf::store
