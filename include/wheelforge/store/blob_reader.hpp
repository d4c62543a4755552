#pragma once
// Random access to one blob's bytes for readers that need parts of it: the wheel inspector
// reads a wheel's end records, central directory, local headers and the tables of its ELF
// members, never the whole file (docs/storage.md, "Reading parts of a blob").
//  - a local file (the file backend, or an object store's blob already in the read cache):
//    positional reads of that file;
//  - otherwise ranged GETs of the object in aligned blocks of kRangeBlock bytes, a read that
//    needs several missing blocks being one request, sequential reads fetching ahead (doubling
//    up to kMaxReadAhead). At most kMaxCachedBlocks blocks stay in memory per reader, least
//    recently used dropped first; nothing is written to disk.
// Not thread-safe: one reader per request. Every read blocks (on the network): workers only.

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>

#include "wheelforge/archive/elf.hpp"
#include "wheelforge/store/object_store.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::store {

inline constexpr std::uint64_t kRangeBlock = std::uint64_t{64} * 1024U;
inline constexpr std::uint64_t kMaxReadAhead = std::uint64_t{4} << 20U;
inline constexpr std::size_t kMaxCachedBlocks = 256;  // 16 MiB

/// A blob as a byte source, with what reading it cost.
class BlobReader : public archive::ByteSource {
 public:
  /// Bytes fetched from the object store so far (0 for a local file).
  [[nodiscard]] virtual std::uint64_t fetched_bytes() const = 0;
  /// Ranged GET requests made so far (0 for a local file).
  [[nodiscard]] virtual std::uint64_t requests() const = 0;
};

/// The object `key` of `size` bytes in `objects` (which must outlive the reader), read by
/// ranges; `describe` names the store in error messages. A failed request is unavailable
/// ("DESCRIBE: read KEY: ..."), not_found when the object is gone.
[[nodiscard]] std::unique_ptr<BlobReader> make_object_reader(ObjectStore& objects, std::string key,
                                                             std::uint64_t size,
                                                             std::string describe);

/// The local file at `path` as a reader. Fails with io when it cannot be opened (not_found
/// when it does not exist).
[[nodiscard]] Result<std::unique_ptr<BlobReader>> make_file_reader(
    const std::filesystem::path& path);

}  // namespace wf::store
