#pragma once
// The bounded local read cache of a blob store whose blobs live in an object store:
//   DATA_DIR/cache/blobs/<aa>/<bb>/<sha256>   local copies of blobs, read-only
// A copy is written into the blob store's temp session (same filesystem), checked against its
// sha256 once complete and renamed into place, so a reader sees a whole, verified copy or
// none. Beyond the bound the least recently used copies are removed, whole files, oldest use
// first; the copy just added or asked for always stays, even alone above the bound. The use
// order is kept in memory (seeded from the files' atimes when the cache opens); several
// processes may share the directory, each bounding what it adds (a copy another process
// removed is noticed by lookup() and fetched again).
// A removed copy stays readable through descriptors already open on it (a response being
// sent, an archive being read): only a path handed out and not yet opened can miss it.
//
// Thread-safe. Every function blocks on the filesystem: call from worker threads, except
// lookup(), which only stats one file (the serving path opens blob files on network threads).

#include <cstdint>
#include <filesystem>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "wheelforge/util/atomic_file.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::store {

/// Receives a blob's bytes in order; a failing sink stops the transfer with its error.
using ByteSink = std::function<Status(std::string_view)>;
/// Fetches a blob's bytes into the sink (ObjectStore::get of its key).
using BlobFetch = std::function<Status(const ByteSink&)>;

class ReadCache {
 public:
  /// Opens (creating) the cache in `dir`, writing new copies through temp files in `tmp_dir`
  /// (on the same filesystem), bounded to `max_bytes`. Removes the files under `dir` that are
  /// not copies (a name that is not a sha256, not at its place) and indexes the others by
  /// atime. Fails with the directory's error.
  [[nodiscard]] static Result<std::unique_ptr<ReadCache>> open(const std::filesystem::path& dir,
                                                               std::filesystem::path tmp_dir,
                                                               std::uint64_t max_bytes);

  /// Where the copy of `sha256` lives (whether or not it exists).
  [[nodiscard]] std::string path_of(std::string_view sha256) const;
  /// The copy of `sha256` when there is one (a use: it moves to the back of the eviction
  /// order); nullopt otherwise.
  [[nodiscard]] std::optional<std::string> lookup(std::string_view sha256);
  /// The copy of `sha256`: the one there is, or a new one whose bytes `fetch` delivers,
  /// checked against `sha256` (io when they differ, nothing kept). Errors of `fetch` are
  /// returned as they are; filesystem errors are io / storage_full.
  [[nodiscard]] Result<std::string> fill(std::string_view sha256, const BlobFetch& fetch);
  /// Keeps a finished file whose bytes are known to be `sha256` (a blob just uploaded) as its
  /// copy: renamed into place, without a copy of its bytes. A failure keeps nothing.
  [[nodiscard]] Status adopt(std::string_view sha256, AtomicFile file, std::uint64_t size);
  /// Removes the copy of `sha256` (the blob was removed from the store).
  void forget(std::string_view sha256);

  [[nodiscard]] std::uint64_t bytes() const;
  [[nodiscard]] std::size_t files() const;
  [[nodiscard]] std::uint64_t max_bytes() const { return max_bytes_; }
  [[nodiscard]] const std::filesystem::path& dir() const { return dir_; }

 private:
  ReadCache(std::filesystem::path dir, std::filesystem::path tmp_dir, std::uint64_t max_bytes)
      : dir_(std::move(dir)), tmp_dir_(std::move(tmp_dir)), max_bytes_(max_bytes) {}

  struct Entry {
    std::uint64_t size = 0;
    std::list<std::string>::iterator use;  ///< its place in uses_
  };
  /// Records `sha256` as present with `size` and most recently used, then evicts the least
  /// recently used others until the total is within the bound. Called under mu_.
  void add_locked(const std::string& sha256, std::uint64_t size);
  void drop_locked(const std::string& sha256);

  std::filesystem::path dir_;
  std::filesystem::path tmp_dir_;
  std::uint64_t max_bytes_;
  mutable std::mutex mu_;
  std::list<std::string> uses_;  ///< least recently used first
  std::unordered_map<std::string, Entry> entries_;
  std::uint64_t total_ = 0;
};

}  // namespace wf::store
