#pragma once
// Reading ELF shared objects (and executables) for what the dynamic loader will ask of the
// system: NEEDED libraries, symbol versions, the dynamic symbol table. Part of the archive
// module; no library beyond glibc's <elf.h>. The facts are core::ElfInfo (core/elf.hpp).
//
// What is read. Only what the loader reads: the ELF header, the program headers, the PT_DYNAMIC
// segment, and the tables its entries point to (DT_STRTAB, DT_SYMTAB, DT_GNU_HASH or DT_HASH,
// DT_VERSYM, DT_VERNEED, DT_VERDEF, and the relocations DT_RELA, DT_REL and DT_JMPREL, of which
// only symbol indices are used), found by mapping their addresses to file offsets through the
// PT_LOAD segments. Section headers are never read: stripped objects (even without
// a section header table) read the same, and a section table that lies about .dynsym cannot
// make us see other symbols than the loader sees.
//
// Order of reads. In two ascending sweeps: (1) ELF header, program headers, PT_DYNAMIC; (2) the
// hash table, then the symbol table, string table, version tables and relocation tables in file
// order. A source that can only move forward (a deflated wheel member) is therefore inflated
// twice for an object laid out as linkers lay them out; other layouts cost a restart per
// backward read, up to the source's own limit.
//
// The number of dynamic symbols is what the loader can reach: the hash table's count
// (DT_GNU_HASH, else DT_HASH), extended to the highest symbol a relocation names (an object that
// exports nothing, such as a non-PIE executable, has a GNU hash table that covers no symbol).
//
// Bounds. Every offset, count and size is checked against the file and its segment before it is
// used (with overflow-safe arithmetic), and every table is held to a limit named in the error
// when exceeded. Malformed input is an Errc::invalid error naming the problem, never a crash or
// an allocation beyond the limits.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/core/binding.hpp"
#include "wheelforge/core/elf.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::archive {

/// Random access to the bytes of one file or archive member.
class ByteSource {
 public:
  ByteSource() = default;
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;
  virtual ~ByteSource() = default;

  /// Total size in bytes.
  [[nodiscard]] virtual std::uint64_t size() const = 0;

  /// Exactly `length` bytes from `offset`. Fails with Errc::invalid when the range lies outside
  /// [0, size()) or the data cannot be decoded (a damaged deflate stream), or when a
  /// forward-only source would exceed its limits; with Errc::io when reading fails. Blocks.
  [[nodiscard]] virtual Result<std::string> read_at(std::uint64_t offset, std::size_t length) = 0;
};

/// A source over bytes in memory (which must outlive it).
class MemorySource final : public ByteSource {
 public:
  explicit MemorySource(std::string_view bytes) : bytes_(bytes) {}
  [[nodiscard]] std::uint64_t size() const override { return bytes_.size(); }
  [[nodiscard]] Result<std::string> read_at(std::uint64_t offset, std::size_t length) override;

 private:
  std::string_view bytes_;
};

/// Opens a regular file as a source (positional reads; the file stays open while the source
/// lives). Fails with Errc::io when it cannot be opened or is not a regular file.
[[nodiscard]] Result<std::unique_ptr<ByteSource>> open_file_source(
    const std::filesystem::path& path);

struct ElfLimits {
  /// Most program headers (linkers write about ten).
  std::uint32_t max_program_headers = 4096;
  /// Largest PT_DYNAMIC segment (16 bytes an entry on 64-bit).
  std::uint64_t max_dynamic_bytes = std::uint64_t{1} << 20U;
  /// Largest dynamic string table (DT_STRSZ); libtorch_cpu.so's is about 20 MiB.
  std::uint64_t max_string_table_bytes = std::uint64_t{64} << 20U;
  /// Most dynamic symbols (hash-table count), and so most hash buckets.
  std::uint64_t max_symbols = std::uint64_t{1} << 20U;
  /// Most version entries (.gnu.version_r libraries + versions, .gnu.version_d definitions).
  std::uint64_t max_version_entries = 65536;
};

/// Reads the facts of the ELF object in `source` (ELF32 or ELF64, either byte order, any
/// machine). An object without PT_DYNAMIC yields its identification with has_dynamic false.
/// Fails with Errc::invalid naming the problem: "not an ELF file" (no magic), an unsupported
/// class, byte order or version, a truncated header, a table outside the file or outside its
/// PT_LOAD segment, an address no PT_LOAD maps, a string not terminated inside the string table,
/// a dynamic symbol table without DT_GNU_HASH or DT_HASH to size it, a version index no version
/// entry defines, duplicate table entries in PT_DYNAMIC, a limit exceeded; errors of `source`
/// are passed on. Blocks on the source's reads.
[[nodiscard]] Result<core::ElfInfo> read_elf(ByteSource& source, const ElfLimits& limits = {});

/// read_elf over a file on disk.
[[nodiscard]] Result<core::ElfInfo> read_elf_file(const std::filesystem::path& path,
                                                  const ElfLimits& limits = {});

struct InspectLimits {
  ElfLimits elf;
  /// Most zip members (the layout scan refuses more).
  std::uint64_t max_members = 200'000;
  /// Most ELF members in one wheel.
  std::uint64_t max_binaries = 4096;
  /// Most bytes inflated in total, over every deflated member and every pass over one: the
  /// work a wheel can ask for is bounded by this, whatever its members declare.
  std::uint64_t max_inflated_bytes = std::uint64_t{16} << 30U;
  /// Most passes over one deflated member (read_elf needs two for ordinary objects).
  std::uint32_t max_passes = 4;
};

/// Finds every ELF member of a wheel (data starting with "\x7fELF", whatever the name: extension
/// modules, bundled libraries, executables under .data/scripts) and reads its facts, without
/// extracting anything to disk and without holding a whole member in memory: a stored member is
/// read in place in the wheel file; a deflated one is inflated forward through libarchive,
/// keeping only the byte ranges read_elf asks for (plus a 64 KiB window behind them), and
/// restarted from its beginning when a read goes backward (up to `limits.max_passes`). Finding
/// the ELF members inflates the first block of each deflated member.
///
/// Returns the binaries in file order, each with its facts or, when that member cannot be
/// read as ELF, the problem (read_elf's message, or a deflated member needing more than
/// `limits.max_passes` passes); the other members are still read. Fails with Errc::invalid when
/// the zip layout is bad (the checks of read_wheel: reader.hpp), when a member's data cannot be
/// inflated, when the wheel has more ELF members than `limits.max_binaries`, or when inflating
/// needs more than `limits.max_inflated_bytes`; with Errc::io when the file cannot be read.
/// Blocks on file I/O; call from a worker thread. Member CRCs are not verified (only parts of
/// members are read).
[[nodiscard]] Result<std::vector<core::WheelBinary>> inspect_wheel_binaries(
    const std::filesystem::path& wheel, const InspectLimits& limits = {});
/// The same over any source of the wheel's bytes (a blob in an object store read by ranges):
/// only the end records, the central directory, the local headers and the parts of members
/// named above are read.
[[nodiscard]] Result<std::vector<core::WheelBinary>> inspect_wheel_binaries(
    ByteSource& wheel, const InspectLimits& limits = {});

/// The members of a wheel as its central directory declares them, in that order, after the
/// layout checks of read_wheel (reader.hpp); nothing is inflated. Fails with Errc::invalid for a
/// bad layout or more than `max_members` members, Errc::io when the file cannot be read.
/// Blocks on file I/O.
[[nodiscard]] Result<std::vector<core::WheelMember>> list_wheel_members(
    const std::filesystem::path& wheel, std::uint64_t max_members = 200'000);
/// The same over any source of the wheel's bytes: reads the end records, the central directory
/// and the local headers only.
[[nodiscard]] Result<std::vector<core::WheelMember>> list_wheel_members(
    ByteSource& wheel, std::uint64_t max_members = 200'000);

}  // namespace wf::archive
