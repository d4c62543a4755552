#pragma once
// What an ELF object says about its dynamic linking: the facts that archive::read_elf reads from
// a shared object (or executable) and that the manylinux assessment (manylinux.hpp) and the
// torch/CUDA binding checks judge. Plain data and pure helpers, no I/O.
//
// Symbol versions. glibc, libstdc++ and libgcc_s version their symbols: a binary that calls
// memcpy through `memcpy@GLIBC_2.14` records, in `.gnu.version_r`, that it needs version
// GLIBC_2.14 of libc.so.6, and the dynamic loader refuses to load it where libc.so.6 does not
// define that version. A version name is a prefix, '_', and a suffix: `GLIBC_2.2.5`,
// `GLIBCXX_3.4.21`, `CXXABI_1.3.9`, `GCC_7.0.0`, and a few named ones (`CXXABI_TM_1`,
// `GLIBC_ABI_DT_RELR`, `GLIBC_PRIVATE`). The prefix ends at the first '_' (docs/manylinux.md,
// "Sources").

#include <compare>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace wf::core {

enum class ElfClass : std::uint8_t { elf32, elf64 };
enum class ElfEndian : std::uint8_t { little, big };

/// e_type.
enum class ElfType : std::uint8_t { none, relocatable, executable, shared, core_dump, other };

enum class SymbolBinding : std::uint8_t { local, global, weak, gnu_unique, other };
enum class SymbolType : std::uint8_t {
  notype,
  object,
  func,
  section,
  file,
  common,
  tls,
  gnu_ifunc,
  other
};
enum class SymbolVisibility : std::uint8_t { default_visibility, internal, hidden, protected_ };

/// One entry of the dynamic symbol table (.dynsym), the null entry excluded.
struct ElfSymbol {
  std::string name;      ///< as stored: C++ names mangled (`_ZN3c106detail...`)
  bool defined = false;  ///< st_shndx != SHN_UNDEF: exported (or local) rather than imported
  SymbolBinding binding = SymbolBinding::global;
  SymbolType type = SymbolType::notype;
  SymbolVisibility visibility = SymbolVisibility::default_visibility;
  /// Its version name (`GLIBC_2.14`), from .gnu.version_r for imported symbols and from
  /// .gnu.version_d for exported ones; empty when the symbol is unversioned.
  std::string version;
  /// For an imported symbol with a version: the library that must provide it (`libc.so.6`).
  std::string version_library;
  /// The version is hidden (`name@VERSION` rather than the default `name@@VERSION`).
  bool version_hidden = false;

  friend bool operator==(const ElfSymbol&, const ElfSymbol&) = default;
};

/// The versions one needed library must define (one Elf_Verneed entry and its Elf_Vernaux).
struct VersionNeed {
  std::string library;                ///< vn_file: "libc.so.6"
  std::vector<std::string> versions;  ///< "GLIBC_2.2.5", "GLIBC_2.14", ... in file order

  friend bool operator==(const VersionNeed&, const VersionNeed&) = default;
};

/// The facts of one ELF file. Everything except the identification comes from the dynamic
/// section and the tables it points to; an object without PT_DYNAMIC (a relocatable object, a
/// static executable) has `has_dynamic == false` and empty lists.
struct ElfInfo {
  ElfClass elf_class = ElfClass::elf64;
  ElfEndian endian = ElfEndian::little;
  ElfType type = ElfType::shared;
  std::uint16_t machine = 0;  ///< e_machine (EM_X86_64 = 62, EM_AARCH64 = 183, ...)
  bool has_dynamic = false;
  std::optional<std::string> soname;             ///< DT_SONAME
  std::vector<std::string> rpath;                ///< DT_RPATH, split at ':'
  std::vector<std::string> runpath;              ///< DT_RUNPATH, split at ':'
  std::vector<std::string> needed;               ///< DT_NEEDED in order
  std::vector<VersionNeed> version_needs;        ///< .gnu.version_r in order
  std::vector<std::string> version_definitions;  ///< .gnu.version_d names, the base (soname) one
                                                 ///< excluded, in order
  std::vector<ElfSymbol> symbols;                ///< .dynsym in order, the null entry excluded

  /// The architecture as platform tags spell it (machine_name below).
  [[nodiscard]] std::string arch() const;

  friend bool operator==(const ElfInfo&, const ElfInfo&) = default;
};

/// The architecture name used by Linux platform tags (`linux_x86_64`, `manylinux_2_28_aarch64`)
/// for an e_machine value, class and byte order: x86_64, i686, aarch64, armv7l, ppc64le, ppc64,
/// ppc, s390x, s390, riscv64, riscv32, loongarch64, mips64/mips64el/mips/mipsel;
/// "machine-N" for anything else.
[[nodiscard]] std::string machine_name(std::uint16_t machine, ElfClass elf_class, ElfEndian endian);

/// A symbol version name split at its first '_': `GLIBC_2.2.5` → prefix "GLIBC", suffix
/// "2.2.5", numbers {2, 2, 5}; `CXXABI_TM_1` → prefix "CXXABI", suffix "TM_1", no numbers. A
/// name without '_' has an empty suffix.
struct SymbolVersion {
  std::string prefix;
  std::string suffix;
  /// The suffix as dotted decimal numbers, when it is one ("2.2.5", not "TM_1" or "2.x").
  std::optional<std::vector<std::uint32_t>> numbers;

  [[nodiscard]] static SymbolVersion parse(std::string_view name);
};

/// Orders dotted decimal versions numerically: {2, 9} < {2, 14} < {2, 14, 1}.
[[nodiscard]] std::strong_ordering compare_dotted(std::span<const std::uint32_t> a,
                                                  std::span<const std::uint32_t> b);

/// "2.14" for {2, 14}.
[[nodiscard]] std::string dotted_str(std::span<const std::uint32_t> numbers);

/// The highest numeric version of `prefix` (`"GLIBC"`, `"GLIBCXX"`, `"CXXABI"`, `"GCC"`) that
/// the object needs from any library, as its full name (`"GLIBC_2.34"`); nullopt when it needs
/// none. Named versions (`GLIBC_PRIVATE`, `CXXABI_TM_1`) are not numeric and never the highest.
[[nodiscard]] std::optional<std::string> highest_needed_version(const ElfInfo& info,
                                                                std::string_view prefix);

/// highest_needed_version(info, "GLIBC") as numbers ({2, 34}); nullopt when none.
[[nodiscard]] std::optional<std::vector<std::uint32_t>> glibc_floor(const ElfInfo& info);

/// One ELF member of a wheel: its path inside the wheel and what it says, or why it could not be
/// read. Members are binaries when their data starts with the ELF magic, whatever their name.
struct WheelBinary {
  std::string path;  ///< member name, e.g. "flash_attn_2_cuda.cpython-312-x86_64-linux-gnu.so"
  std::uint64_t size = 0;      ///< uncompressed size
  std::optional<ElfInfo> elf;  ///< absent when the member could not be read as ELF
  std::string problem;         ///< why `elf` is absent (empty otherwise)
};

}  // namespace wf::core
