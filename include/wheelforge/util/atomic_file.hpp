#pragma once
// AtomicFile: the one way wheelforge publishes a file. Bytes go to a temp file, which is
// fsynced, renamed over its final name, and the directory holding that name is fsynced, so
// that a reader (or a crash) sees the old file or the whole new one, never a part. Only an
// explicit commit() publishes; the destructor never commits: it removes the temp file, so an
// error path or an exception leaves nothing behind.
//
// Every method blocks on the filesystem: call from worker threads. Errors are errno_error()s
// (storage_full on ENOSPC/EDQUOT, unavailable on EROFS/EACCES/EPERM, io otherwise) whose
// message names the operation and the file: "fsync /d/tmp/s-1/upload-x: Input/output error".

#include <sys/types.h>

#include <filesystem>
#include <string_view>

#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/result.hpp"

namespace wf {

/// When commit() makes the publish durable.
enum class Durability {
  now,       ///< fsync of the file (unless sync() did it) and of the target directory
  deferred,  ///< neither: the caller makes the batch durable itself (syncfs, fsync_dir)
};

class AtomicFile {
 public:
  /// A new empty temp file in `dir` (which must exist), named `<prefix>XXXXXX`, mode 0600
  /// until set_mode(). The temp file must be on the filesystem of the file it will be
  /// committed as: in the target directory itself (create_for()) or, for a name known only
  /// once the bytes are (the blob store's), in a directory of the same filesystem.
  [[nodiscard]] static Result<AtomicFile> create(const std::filesystem::path& dir,
                                                 std::string_view prefix = ".tmp-");
  /// A temp file in the directory of `dest` (created with its parents when missing).
  [[nodiscard]] static Result<AtomicFile> create_for(const std::filesystem::path& dest,
                                                     std::string_view prefix = ".tmp-");

  AtomicFile(AtomicFile&& other) noexcept;
  AtomicFile& operator=(AtomicFile&& other) noexcept;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  /// Removes the temp file unless commit() renamed it.
  ~AtomicFile();

  /// The open temp file, for writers that need the descriptor (libarchive, copy_file_range,
  /// FICLONE, reading back what was written); -1 after commit() or abort().
  [[nodiscard]] int fd() const { return fd_.get(); }
  /// The temp file's path; empty after commit() or abort().
  [[nodiscard]] const std::filesystem::path& temp_path() const { return temp_; }

  /// Appends all bytes (retrying short writes and EINTR).
  [[nodiscard]] Status write(const void* data, std::size_t size);
  [[nodiscard]] Status write(std::string_view bytes) { return write(bytes.data(), bytes.size()); }
  /// fchmod of the temp file: the mode the published file has.
  [[nodiscard]] Status set_mode(mode_t mode);
  /// fsync of the temp file's data.
  [[nodiscard]] Status sync();
  // After a failed write() or sync() the bytes on disk are unknown: commit() refuses
  // (Errc::internal) and the destructor removes the file.

  /// Publishes the temp file as `dest` (replacing a file of that name): with Durability::now
  /// it fsyncs the data unless sync() succeeded already, closes the file, renames it and
  /// fsyncs dest's directory; with Durability::deferred it only closes and renames. When the
  /// rename worked but the directory could not be synced, a `dest` that did not exist before
  /// is removed again, so a failed commit publishes nothing new (a replaced file stays
  /// replaced: the rename cannot be undone). After any failure the temp file is gone or is
  /// removed by the destructor; the object cannot be committed again.
  [[nodiscard]] Status commit(const std::filesystem::path& dest,
                              Durability durability = Durability::now);

  /// Closes and removes the temp file now (what the destructor does).
  void abort() noexcept;

 private:
  AtomicFile(std::filesystem::path temp, UniqueFd fd)
      : temp_(std::move(temp)), fd_(std::move(fd)) {}

  std::filesystem::path temp_;
  UniqueFd fd_;
  bool synced_ = false;
  bool failed_ = false;  ///< a write or fsync failed
};

}  // namespace wf
