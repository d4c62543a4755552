#pragma once
// Filesystem primitives with crash-safety in mind: every publish is temp file + fsync +
// rename + fsync of the directory. All functions block; call them from worker threads.

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "wheelforge/util/result.hpp"

namespace wf {

/// What kind of failure an errno value is: ENOSPC/EDQUOT -> storage_full; EROFS/EACCES/EPERM
/// -> unavailable (this process may not write there: a read-only filesystem or permissions,
/// which only an administrator can change); everything else (EIO above all) -> io. None of
/// them is a client's fault.
[[nodiscard]] Errc errno_code(int err);

/// An Error with errno_code(err) and the message "<what>: <strerror(err)>".
[[nodiscard]] Error errno_error(int err, std::string_view what);

/// fsync(2) on a directory so that a rename inside it is durable.
[[nodiscard]] Status fsync_dir(const std::filesystem::path& dir);

/// fsync(2) on a file written by someone else (SQLite, a hard link): opens it read-only.
/// Fails with "fsync <path>: <strerror>".
[[nodiscard]] Status fsync_file(const std::filesystem::path& path);

/// Writes bytes to `dest` (mode 0644) atomically through an AtomicFile (atomic_file.hpp): temp
/// file in the same directory, fsync, rename, fsync of the directory. Creates parent
/// directories.
[[nodiscard]] Status write_file_atomic(const std::filesystem::path& dest, std::string_view bytes);

/// Reads a whole (small) file. Fails with too_large above max_bytes.
[[nodiscard]] Result<std::string> read_small_file(const std::filesystem::path& path,
                                                  std::uint64_t max_bytes);

/// Up to `max` bytes of a file from `offset`; empty when the file is missing or shorter.
[[nodiscard]] std::string read_file_chunk(const std::filesystem::path& path, std::uint64_t offset,
                                          std::size_t max);

/// An open file descriptor, closed on destruction. Move-only.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();

  [[nodiscard]] int get() const { return fd_; }
  [[nodiscard]] bool valid() const { return fd_ >= 0; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

/// Writes all bytes, retrying on EINTR and short writes.
[[nodiscard]] Status write_all(int fd, const void* data, std::size_t size);

}  // namespace wf
