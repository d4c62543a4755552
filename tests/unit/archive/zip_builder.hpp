#pragma once
// Test-only writers for the archives that wheelforge reads: zips (stored entries, or deflate
// streams made of uncompressed blocks) with knobs to produce the malformed and hostile layouts
// the reader must reject, ustar tar streams, and gzip. Written from the format specifications
// so that the tests need no binary fixtures.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace wf::archive::fixtures {

/// CRC-32 (ISO-HDLC, as used by zip and gzip).
[[nodiscard]] std::uint32_t crc32(std::string_view data);

/// A raw deflate stream holding `data` in uncompressed ("stored") blocks.
[[nodiscard]] std::string deflate_stored_blocks(std::string_view data);

/// A gzip member holding `data`.
[[nodiscard]] std::string gzip(std::string_view data);

enum class Compression { stored, deflate };

struct ZipEntry {
  ZipEntry(std::string name_, std::string data_, Compression compression_ = Compression::stored)
      : name(std::move(name_)), data(std::move(data_)), compression(compression_) {}

  std::string name;
  std::string data;
  /// deflate: method 8, the data wrapped in a deflate stream; stored: method 0.
  Compression compression;
  /// Sizes and CRC after the data (flag bit 3) instead of in the local header.
  bool data_descriptor = false;
  std::uint16_t flags = 0;  ///< extra general-purpose flag bits (e.g. 1 = encrypted)
  // Lies, for hostile archives: values written instead of the true ones.
  std::optional<std::string> local_name;           ///< name in the local header only
  std::optional<std::uint16_t> method;             ///< method in both headers
  std::optional<std::uint32_t> crc;                ///< CRC in both headers
  std::optional<std::uint64_t> uncompressed_size;  ///< uncompressed size in both headers
  std::optional<std::uint64_t> compressed_size;    ///< compressed size in both headers
};

struct ZipOptions {
  /// Zip64 everywhere: saturated 32-bit fields, zip64 extra fields and end records.
  bool zip64 = false;
  /// Bytes before the first member.
  std::string prefix;
  /// With a prefix: write offsets that account for it (as `zip -A` does), instead of the
  /// offsets of the unprefixed archive.
  bool offsets_include_prefix = false;
  /// Bytes after the end record.
  std::string trailer;
  /// Bytes between the last member and the central directory.
  std::string gap_before_central_directory;
};

/// A complete zip archive.
[[nodiscard]] std::string build_zip(const std::vector<ZipEntry>& entries,
                                    const ZipOptions& options = {});

struct TarEntry {
  enum class Type { file, directory, symlink, hardlink, char_device, block_device, fifo, sparse };
  std::string name;  ///< at most 100 bytes
  std::string data;  ///< file contents (for `sparse`: the one stored extent, at offset 0)
  Type type = Type::file;
  std::string link_target;
  /// The size written into the header instead of the data's (a lie, for hostile archives);
  /// for `sparse`: the file's real size, which the sparse map's holes make up.
  std::optional<std::uint64_t> declared_size;

  static TarEntry file(std::string name, std::string data) {
    return {std::move(name), std::move(data), Type::file, {}, {}};
  }
  static TarEntry directory(std::string name) {
    return {std::move(name), {}, Type::directory, {}, {}};
  }
  static TarEntry symlink(std::string name, std::string target) {
    return {std::move(name), {}, Type::symlink, std::move(target), {}};
  }
  static TarEntry hardlink(std::string name, std::string target) {
    return {std::move(name), {}, Type::hardlink, std::move(target), {}};
  }
  static TarEntry special(std::string name, Type type) {
    return {std::move(name), {}, type, {}, {}};
  }
  /// An old-GNU sparse file (type 'S'): `data` stored, then holes up to `real_size`.
  static TarEntry sparse(std::string name, std::string data, std::uint64_t real_size) {
    return {std::move(name), std::move(data), Type::sparse, {}, real_size};
  }
};

/// An uncompressed ustar archive (old-GNU headers for sparse files), with the two terminating
/// zero blocks.
[[nodiscard]] std::string build_tar(const std::vector<TarEntry>& entries);

/// Writes `bytes` to `path`, replacing it.
void write_file(const std::filesystem::path& path, std::string_view bytes);

}  // namespace wf::archive::fixtures
