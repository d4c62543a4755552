#pragma once
// The ELF reader's parser (elf_reader.cpp: the header, program headers, dynamic section and
// what they mean; elf_tables.cpp: the string, symbol, version and relocation tables), private
// to the archive module.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "archive/member_checks.hpp"
#include "archive/member_source.hpp"
#include "wheelforge/archive/elf.hpp"

namespace wf::archive::elf_detail {

using archive::invalid;

inline std::string hex(std::uint64_t value) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  do {
    out.insert(out.begin(), kDigits[value & 0xfU]);
    value >>= 4U;
  } while (value != 0);
  return "0x" + out;
}

inline Error over_limit(std::string_view what, std::uint64_t value, std::uint64_t limit) {
  return invalid(std::string(what) + " (" + std::to_string(value) + ") exceeds the limit of " +
                 std::to_string(limit));
}

// Field decoding in the object's byte order.
class Decoder {
 public:
  explicit Decoder(bool big) : big_(big) {}

  [[nodiscard]] std::uint64_t uint(std::string_view b, std::size_t at, std::size_t width) const {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < width; ++i) {
      const auto byte = static_cast<unsigned char>(b[at + (big_ ? i : width - 1 - i)]);
      v = (v << 8U) | byte;
    }
    return v;
  }
  [[nodiscard]] std::uint16_t u16(std::string_view b, std::size_t at) const {
    return static_cast<std::uint16_t>(uint(b, at, 2));
  }
  [[nodiscard]] std::uint32_t u32(std::string_view b, std::size_t at) const {
    return static_cast<std::uint32_t>(uint(b, at, 4));
  }

 private:
  bool big_;
};

struct Load {
  std::uint64_t offset = 0;
  std::uint64_t vaddr = 0;
  std::uint64_t filesz = 0;
};

// Where a table starts in the file, and how many bytes its PT_LOAD segment holds from there.
struct Located {
  std::uint64_t offset = 0;
  std::uint64_t available = 0;
};

// The dynamic entries we use; each may appear once.
struct DynamicTags {
  std::vector<std::uint64_t> needed;
  std::vector<std::uint64_t> rpath;
  std::vector<std::uint64_t> runpath;
  std::map<std::int64_t, std::uint64_t> single;  // tag -> value

  [[nodiscard]] std::optional<std::uint64_t> get(std::int64_t tag) const {
    const auto it = single.find(tag);
    if (it == single.end()) return std::nullopt;
    return it->second;
  }
};

struct RawNeed {
  std::uint32_t file = 0;
  struct Aux {
    std::uint32_t name = 0;
    std::uint16_t other = 0;
  };
  std::vector<Aux> versions;
};

struct RawDef {
  std::uint16_t flags = 0;
  std::uint16_t index = 0;
  std::optional<std::uint32_t> name;  // the first Elf_Verdaux's
};

class Parser {
 public:
  Parser(ByteSource& source, const ElfLimits& limits) : src_(source), limits_(limits) {}

  Result<core::ElfInfo> run();

 private:
  Status read_header();
  Status read_program_headers();
  Status read_dynamic();
  Result<Located> locate(std::uint64_t address, std::string_view what) const;
  Result<std::string> read_table(std::uint64_t address, std::uint64_t length,
                                 std::string_view what);
  Result<std::uint64_t> count_symbols();
  Result<std::uint64_t> count_with_gnu_hash(std::uint64_t address);
  Result<std::uint64_t> count_with_sysv_hash(std::uint64_t address);
  Status read_tables();
  Status read_verneed(std::uint64_t address, std::uint64_t count);
  Status read_verdef(std::uint64_t address, std::uint64_t count);
  Status scan_relocations(std::uint64_t address, std::uint64_t size, bool rela,
                          std::string_view what);
  Status read_unhashed_symbols();
  Status interpret();
  Result<std::string> string_at(std::uint64_t offset, std::string_view what) const;

  ByteSource& src_;
  const ElfLimits& limits_;
  core::ElfInfo info_;
  bool is64_ = true;
  Decoder dec_{false};
  std::uint64_t phoff_ = 0;
  std::uint16_t phentsize_ = 0;
  std::uint16_t phnum_ = 0;
  std::vector<Load> loads_;
  std::optional<Load> dynamic_;
  DynamicTags tags_;
  std::uint64_t symbol_count_ = 0;
  std::uint64_t relocated_symbols_ = 0;  // 1 + the highest symbol index a relocation uses
  std::string strtab_;
  std::string symtab_;
  std::string versym_;
  std::vector<RawNeed> needs_;
  std::vector<RawDef> defs_;
};

}  // namespace wf::archive::elf_detail
