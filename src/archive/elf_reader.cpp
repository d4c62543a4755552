#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "archive/member_source.hpp"
#include "wheelforge/archive/elf.hpp"
#include "wheelforge/util/fs.hpp"

namespace wf::archive {
namespace {

Error invalid(std::string message) {
  return make_error(Errc::invalid, std::move(message));
}

std::string hex(std::uint64_t value) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  do {
    out.insert(out.begin(), kDigits[value & 0xfU]);
    value >>= 4U;
  } while (value != 0);
  return "0x" + out;
}

Error over_limit(std::string_view what, std::uint64_t value, std::uint64_t limit) {
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

Status Parser::read_header() {
  if (src_.size() < EI_NIDENT) return invalid("not an ELF file (too short)");
  auto ident = src_.read_at(0, EI_NIDENT);
  if (!ident) return ident.error();
  const std::string_view id = *ident;
  if (id.substr(0, SELFMAG) != std::string_view(ELFMAG, SELFMAG)) {
    return invalid("not an ELF file (no ELF magic)");
  }
  const auto cls = static_cast<unsigned char>(id[EI_CLASS]);
  const auto data = static_cast<unsigned char>(id[EI_DATA]);
  if (cls != ELFCLASS32 && cls != ELFCLASS64) {
    return invalid("unsupported ELF class " + std::to_string(cls));
  }
  if (data != ELFDATA2LSB && data != ELFDATA2MSB) {
    return invalid("unsupported ELF data encoding " + std::to_string(data));
  }
  if (static_cast<unsigned char>(id[EI_VERSION]) != EV_CURRENT) {
    return invalid("unsupported ELF version " +
                   std::to_string(static_cast<unsigned char>(id[EI_VERSION])));
  }
  is64_ = cls == ELFCLASS64;
  dec_ = Decoder(data == ELFDATA2MSB);
  info_.elf_class = is64_ ? core::ElfClass::elf64 : core::ElfClass::elf32;
  info_.endian = data == ELFDATA2MSB ? core::ElfEndian::big : core::ElfEndian::little;

  const std::size_t header_size = is64_ ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr);
  if (src_.size() < header_size) return invalid("the ELF header is truncated");
  auto header = src_.read_at(0, header_size);
  if (!header) return header.error();
  const std::string_view h = *header;
  switch (dec_.u16(h, 16)) {
    case ET_REL:
      info_.type = core::ElfType::relocatable;
      break;
    case ET_EXEC:
      info_.type = core::ElfType::executable;
      break;
    case ET_DYN:
      info_.type = core::ElfType::shared;
      break;
    case ET_CORE:
      info_.type = core::ElfType::core_dump;
      break;
    case ET_NONE:
      info_.type = core::ElfType::none;
      break;
    default:
      info_.type = core::ElfType::other;
      break;
  }
  info_.machine = dec_.u16(h, 18);
  if (is64_) {
    phoff_ = dec_.uint(h, 32, 8);
    phentsize_ = dec_.u16(h, 54);
    phnum_ = dec_.u16(h, 56);
  } else {
    phoff_ = dec_.uint(h, 28, 4);
    phentsize_ = dec_.u16(h, 42);
    phnum_ = dec_.u16(h, 44);
  }
  return ok_status();
}

Status Parser::read_program_headers() {
  if (phnum_ == 0) return ok_status();
  if (phnum_ == PN_XNUM) {
    return invalid("more than 65534 program headers (e_phnum PN_XNUM) are not supported");
  }
  if (phnum_ > limits_.max_program_headers) {
    return over_limit("the number of program headers", phnum_, limits_.max_program_headers);
  }
  const std::size_t entry = is64_ ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr);
  if (phentsize_ < entry) {
    return invalid("program header entries of " + std::to_string(phentsize_) +
                   " bytes are smaller than " + std::to_string(entry));
  }
  const std::uint64_t table = std::uint64_t{phnum_} * phentsize_;
  if (!range_fits(phoff_, table, src_.size())) {
    return invalid("the program header table (offset " + std::to_string(phoff_) + ", " +
                   std::to_string(phnum_) + " entries) lies outside the file");
  }
  auto bytes = src_.read_at(phoff_, static_cast<std::size_t>(table));
  if (!bytes) return bytes.error();
  for (std::size_t i = 0; i < phnum_; ++i) {
    const std::string_view p = std::string_view(*bytes).substr(i * phentsize_, entry);
    const std::uint32_t type = dec_.u32(p, 0);
    Load seg;
    if (is64_) {
      seg = {dec_.uint(p, 8, 8), dec_.uint(p, 16, 8), dec_.uint(p, 32, 8)};
    } else {
      seg = {dec_.uint(p, 4, 4), dec_.uint(p, 8, 4), dec_.uint(p, 16, 4)};
    }
    if (type == PT_LOAD) {
      loads_.push_back(seg);
    } else if (type == PT_DYNAMIC) {
      if (dynamic_) return invalid("more than one PT_DYNAMIC program header");
      dynamic_ = seg;
    }
  }
  return ok_status();
}

Status Parser::read_dynamic() {
  const Load& dyn = *dynamic_;
  if (dyn.filesz > limits_.max_dynamic_bytes) {
    return over_limit("the PT_DYNAMIC segment's size", dyn.filesz, limits_.max_dynamic_bytes);
  }
  if (!range_fits(dyn.offset, dyn.filesz, src_.size())) {
    return invalid("the PT_DYNAMIC segment (offset " + std::to_string(dyn.offset) + ", " +
                   std::to_string(dyn.filesz) + " bytes) lies outside the file");
  }
  auto bytes = src_.read_at(dyn.offset, static_cast<std::size_t>(dyn.filesz));
  if (!bytes) return bytes.error();
  const std::size_t width = is64_ ? 8 : 4;
  const std::string_view d = *bytes;
  for (std::size_t at = 0; at + 2 * width <= d.size(); at += 2 * width) {
    // d_tag is signed; the tags we use are small positive numbers in both classes.
    const std::uint64_t raw_tag = dec_.uint(d, at, width);
    const auto tag = is64_ ? static_cast<std::int64_t>(raw_tag)
                           : static_cast<std::int64_t>(static_cast<std::int32_t>(raw_tag));
    const std::uint64_t value = dec_.uint(d, at + width, width);
    switch (tag) {
      case DT_NULL:
        return ok_status();
      case DT_NEEDED:
        tags_.needed.push_back(value);
        break;
      case DT_RPATH:
        tags_.rpath.push_back(value);
        break;
      case DT_RUNPATH:
        tags_.runpath.push_back(value);
        break;
      case DT_SONAME:
      case DT_STRTAB:
      case DT_STRSZ:
      case DT_SYMTAB:
      case DT_SYMENT:
      case DT_HASH:
      case DT_GNU_HASH:
      case DT_VERSYM:
      case DT_VERNEED:
      case DT_VERNEEDNUM:
      case DT_VERDEF:
      case DT_VERDEFNUM:
      case DT_RELA:
      case DT_RELASZ:
      case DT_RELAENT:
      case DT_REL:
      case DT_RELSZ:
      case DT_RELENT:
      case DT_JMPREL:
      case DT_PLTRELSZ:
      case DT_PLTREL:
        if (!tags_.single.emplace(tag, value).second) {
          return invalid("the dynamic section has tag " + hex(static_cast<std::uint64_t>(tag)) +
                         " twice");
        }
        break;
      default:
        break;
    }
  }
  return ok_status();
}

Result<Located> Parser::locate(std::uint64_t address, std::string_view what) const {
  for (const Load& seg : loads_) {
    if (address < seg.vaddr || address - seg.vaddr >= seg.filesz) continue;
    const std::uint64_t delta = address - seg.vaddr;
    if (!range_fits(seg.offset, seg.filesz, src_.size())) {
      return invalid(std::string(what) + " lies in a PT_LOAD segment that extends beyond the file");
    }
    return Located{seg.offset + delta, seg.filesz - delta};
  }
  return invalid(std::string(what) + " (address " + hex(address) +
                 ") is not in the file contents of any PT_LOAD segment");
}

Result<std::string> Parser::read_table(std::uint64_t address, std::uint64_t length,
                                       std::string_view what) {
  auto at = locate(address, what);
  if (!at) return at.error();
  if (length > at->available) {
    return invalid(std::string(what) + " (" + std::to_string(length) +
                   " bytes) runs past the end of its PT_LOAD segment");
  }
  return src_.read_at(at->offset, static_cast<std::size_t>(length));
}

Result<std::uint64_t> Parser::count_with_gnu_hash(std::uint64_t address) {
  auto header = read_table(address, 16, "the GNU hash table");
  if (!header) return header.error();
  const std::uint32_t nbuckets = dec_.u32(*header, 0);
  const std::uint32_t symoffset = dec_.u32(*header, 4);
  const std::uint32_t bloom_words = dec_.u32(*header, 8);
  if (nbuckets > limits_.max_symbols) {
    return over_limit("the GNU hash table's bucket count", nbuckets, limits_.max_symbols);
  }
  if (symoffset > limits_.max_symbols) {
    return over_limit("the GNU hash table's symbol offset", symoffset, limits_.max_symbols);
  }
  const std::uint64_t buckets_at = 16 + std::uint64_t{bloom_words} * (is64_ ? 8U : 4U);
  const std::uint64_t chains_at = buckets_at + std::uint64_t{nbuckets} * 4U;
  auto located = locate(address, "the GNU hash table");
  if (!located) return located.error();
  if (chains_at > located->available) {
    return invalid("the GNU hash table's buckets run past the end of their PT_LOAD segment");
  }
  auto buckets = src_.read_at(located->offset + buckets_at, std::size_t{nbuckets} * 4U);
  if (!buckets) return buckets.error();
  std::uint32_t last = 0;
  for (std::size_t i = 0; i < nbuckets; ++i) last = std::max(last, dec_.u32(*buckets, i * 4));
  if (last == 0) return std::uint64_t{symoffset};
  if (last < symoffset) {
    return invalid("a GNU hash bucket points below the table's symbol offset");
  }
  // Walk the chain of the highest bucket to its end marker (low bit set): the last symbol.
  constexpr std::size_t kChunkWords = 64;
  std::uint64_t index = last;
  while (true) {
    const std::uint64_t rel = chains_at + (index - symoffset) * 4U;
    if (rel >= located->available || located->available - rel < 4) {
      return invalid("the GNU hash chain runs past the end of its PT_LOAD segment");
    }
    const std::uint64_t words =
        std::min<std::uint64_t>(kChunkWords, (located->available - rel) / 4);
    auto chunk = src_.read_at(located->offset + rel, static_cast<std::size_t>(words * 4U));
    if (!chunk) return chunk.error();
    for (std::size_t i = 0; i < words; ++i, ++index) {
      if (index >= limits_.max_symbols) {
        return over_limit("the number of dynamic symbols", index + 1, limits_.max_symbols);
      }
      if ((dec_.u32(*chunk, i * 4) & 1U) != 0) return index + 1;
    }
  }
}

Result<std::uint64_t> Parser::count_with_sysv_hash(std::uint64_t address) {
  // The hash words are 8 bytes on 64-bit s390 (and Alpha), 4 everywhere else.
  const std::size_t word = is64_ && info_.machine == EM_S390 ? 8 : 4;
  auto header = read_table(address, 2 * word, "the hash table");
  if (!header) return header.error();
  const std::uint64_t nchain = dec_.uint(*header, word, word);
  if (nchain > limits_.max_symbols) {
    return over_limit("the number of dynamic symbols", nchain, limits_.max_symbols);
  }
  return nchain;
}

Result<std::uint64_t> Parser::count_symbols() {
  if (const auto gnu = tags_.get(DT_GNU_HASH)) return count_with_gnu_hash(*gnu);
  if (const auto sysv = tags_.get(DT_HASH)) return count_with_sysv_hash(*sysv);
  return invalid("the dynamic symbol table has no DT_GNU_HASH or DT_HASH, so its size is unknown");
}

Status Parser::read_verneed(std::uint64_t address, std::uint64_t count) {
  if (count > limits_.max_version_entries) {
    return over_limit("DT_VERNEEDNUM", count, limits_.max_version_entries);
  }
  auto at = locate(address, "the version needs (DT_VERNEED)");
  if (!at) return at.error();
  const auto read = [&](std::uint64_t rel, std::size_t n) -> Result<std::string> {
    if (rel > at->available || at->available - rel < n) {
      return invalid("the version needs run past the end of their PT_LOAD segment");
    }
    return src_.read_at(at->offset + rel, n);
  };
  std::uint64_t entries = 0;
  std::uint64_t rel = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    auto need = read(rel, sizeof(Elf64_Verneed));
    if (!need) return need.error();
    if (dec_.u16(*need, 0) != 1) {
      return invalid("unsupported version needs revision " + std::to_string(dec_.u16(*need, 0)));
    }
    const std::uint16_t aux_count = dec_.u16(*need, 2);
    entries += 1U + aux_count;
    if (entries > limits_.max_version_entries) {
      return over_limit("the number of version entries", entries, limits_.max_version_entries);
    }
    RawNeed raw;
    raw.file = dec_.u32(*need, 4);
    std::uint64_t aux_rel = rel + dec_.u32(*need, 8);
    for (std::uint16_t k = 0; k < aux_count; ++k) {
      auto aux = read(aux_rel, sizeof(Elf64_Vernaux));
      if (!aux) return aux.error();
      raw.versions.push_back({dec_.u32(*aux, 8), dec_.u16(*aux, 6)});
      const std::uint32_t next = dec_.u32(*aux, 12);
      if (next == 0) break;
      aux_rel += next;
    }
    needs_.push_back(std::move(raw));
    const std::uint32_t next = dec_.u32(*need, 12);
    if (next == 0) break;
    rel += next;
  }
  return ok_status();
}

Status Parser::read_verdef(std::uint64_t address, std::uint64_t count) {
  if (count > limits_.max_version_entries) {
    return over_limit("DT_VERDEFNUM", count, limits_.max_version_entries);
  }
  auto at = locate(address, "the version definitions (DT_VERDEF)");
  if (!at) return at.error();
  const auto read = [&](std::uint64_t rel, std::size_t n) -> Result<std::string> {
    if (rel > at->available || at->available - rel < n) {
      return invalid("the version definitions run past the end of their PT_LOAD segment");
    }
    return src_.read_at(at->offset + rel, n);
  };
  std::uint64_t rel = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    auto def = read(rel, sizeof(Elf64_Verdef));
    if (!def) return def.error();
    if (dec_.u16(*def, 0) != 1) {
      return invalid("unsupported version definitions revision " +
                     std::to_string(dec_.u16(*def, 0)));
    }
    RawDef raw;
    raw.flags = dec_.u16(*def, 2);
    raw.index = dec_.u16(*def, 4);
    if (dec_.u16(*def, 6) > 0) {
      auto aux = read(rel + dec_.u32(*def, 12), sizeof(Elf64_Verdaux));
      if (!aux) return aux.error();
      raw.name = dec_.u32(*aux, 0);
    }
    defs_.push_back(raw);
    const std::uint32_t next = dec_.u32(*def, 16);
    if (next == 0) break;
    rel += next;
  }
  return ok_status();
}

Status Parser::scan_relocations(std::uint64_t address, std::uint64_t size, bool rela,
                                std::string_view what) {
  const std::size_t entry = rela ? (is64_ ? sizeof(Elf64_Rela) : sizeof(Elf32_Rela))
                                 : (is64_ ? sizeof(Elf64_Rel) : sizeof(Elf32_Rel));
  if (const auto ent = tags_.get(rela ? DT_RELAENT : DT_RELENT); ent && *ent != entry) {
    return invalid(std::string(rela ? "DT_RELAENT" : "DT_RELENT") + " is " + std::to_string(*ent) +
                   ", not " + std::to_string(entry));
  }
  auto at = locate(address, what);
  if (!at) return at.error();
  if (size > at->available) {
    return invalid(std::string(what) + " (" + std::to_string(size) +
                   " bytes) runs past the end of its PT_LOAD segment");
  }
  // In chunks: only the highest symbol index is kept, whatever the table's size.
  const std::uint64_t chunk = (std::uint64_t{64} * 1024U / entry) * entry;
  const std::uint64_t usable = size - size % entry;
  for (std::uint64_t done = 0; done < usable; done += chunk) {
    const auto n = static_cast<std::size_t>(std::min(chunk, usable - done));
    auto bytes = src_.read_at(at->offset + done, n);
    if (!bytes) return bytes.error();
    for (std::size_t i = 0; i < n; i += entry) {
      std::uint64_t symbol = 0;
      if (!is64_) {
        symbol = dec_.u32(*bytes, i + 4) >> 8U;
      } else if (info_.machine == EM_MIPS) {
        // MIPS64 splits r_info into a 32-bit symbol followed by type bytes, in file order.
        symbol = dec_.u32(*bytes, i + 8);
      } else {
        symbol = dec_.uint(*bytes, i + 8, 8) >> 32U;
      }
      relocated_symbols_ = std::max(relocated_symbols_, symbol + 1);
    }
  }
  return ok_status();
}

// Symbols past the hash table's reach that relocations use: an object that exports nothing
// (a non-PIE executable) has a GNU hash table that covers no symbol at all.
Status Parser::read_unhashed_symbols() {
  if (relocated_symbols_ <= symbol_count_) return ok_status();
  if (relocated_symbols_ > limits_.max_symbols) {
    return over_limit("the number of dynamic symbols", relocated_symbols_, limits_.max_symbols);
  }
  const std::uint64_t entry = is64_ ? sizeof(Elf64_Sym) : sizeof(Elf32_Sym);
  const std::uint64_t extra = relocated_symbols_ - symbol_count_;
  const auto tail = [&](std::int64_t tag, std::uint64_t width, std::string& table,
                        std::string_view what) -> Status {
    const std::uint64_t base = *tags_.get(tag);
    const std::uint64_t skip = symbol_count_ * width;
    if (base > ~std::uint64_t{0} - skip) return invalid(std::string(what) + " is out of range");
    auto bytes = read_table(base + skip, extra * width, what);
    if (!bytes) return bytes.error();
    table += *bytes;
    return ok_status();
  };
  if (auto s = tail(DT_SYMTAB, entry, symtab_, "the dynamic symbol table"); !s) return s;
  if (tags_.get(DT_VERSYM)) {
    if (auto s = tail(DT_VERSYM, 2, versym_, "the symbol versions (DT_VERSYM)"); !s) return s;
  }
  symbol_count_ = relocated_symbols_;
  return ok_status();
}

Status Parser::read_tables() {
  const bool uses_strings = !tags_.needed.empty() || !tags_.rpath.empty() ||
                            !tags_.runpath.empty() || tags_.get(DT_SONAME) ||
                            tags_.get(DT_SYMTAB) || tags_.get(DT_VERNEED) || tags_.get(DT_VERDEF);
  if (!uses_strings) return ok_status();
  const auto strtab = tags_.get(DT_STRTAB);
  const auto strsz = tags_.get(DT_STRSZ);
  if (!strtab || !strsz) return invalid("the dynamic section has no DT_STRTAB or DT_STRSZ");
  if (*strsz > limits_.max_string_table_bytes) {
    return over_limit("the dynamic string table's size (DT_STRSZ)", *strsz,
                      limits_.max_string_table_bytes);
  }

  const auto symtab = tags_.get(DT_SYMTAB);
  if (symtab) {
    const std::size_t entry = is64_ ? sizeof(Elf64_Sym) : sizeof(Elf32_Sym);
    if (const auto syment = tags_.get(DT_SYMENT); syment && *syment != entry) {
      return invalid("DT_SYMENT is " + std::to_string(*syment) + ", not " + std::to_string(entry));
    }
    auto count = count_symbols();
    if (!count) return count.error();
    symbol_count_ = *count;
  }

  // The tables in file order, so that a forward-only source passes over the member once.
  struct Task {
    std::uint64_t offset = 0;
    std::function<Status()> run;
  };
  std::vector<Task> tasks;
  const auto add = [&](std::uint64_t address, std::string_view what,
                       std::function<Status()> run) -> Status {
    auto at = locate(address, what);
    if (!at) return at.error();
    tasks.push_back({at->offset, std::move(run)});
    return ok_status();
  };
  Status added = add(*strtab, "the dynamic string table (DT_STRTAB)", [&]() -> Status {
    auto bytes = read_table(*strtab, *strsz, "the dynamic string table (DT_STRTAB)");
    if (!bytes) return bytes.error();
    strtab_ = std::move(*bytes);
    return ok_status();
  });
  if (!added) return added;
  if (symtab && symbol_count_ > 0) {
    const std::uint64_t entry = is64_ ? sizeof(Elf64_Sym) : sizeof(Elf32_Sym);
    added = add(*symtab, "the dynamic symbol table (DT_SYMTAB)", [&, entry]() -> Status {
      auto bytes = read_table(*symtab, symbol_count_ * entry, "the dynamic symbol table");
      if (!bytes) return bytes.error();
      symtab_ = std::move(*bytes);
      return ok_status();
    });
    if (!added) return added;
    if (const auto versym = tags_.get(DT_VERSYM)) {
      added = add(*versym, "the symbol versions (DT_VERSYM)", [&, at = *versym]() -> Status {
        auto bytes = read_table(at, symbol_count_ * 2U, "the symbol versions (DT_VERSYM)");
        if (!bytes) return bytes.error();
        versym_ = std::move(*bytes);
        return ok_status();
      });
      if (!added) return added;
    }
  }
  if (symtab) {
    // Relocations name symbols by index: the symbols the loader binds, hashed or not.
    struct Relocations {
      std::int64_t address;
      std::int64_t size;
      bool rela;
      const char* what;
    };
    const auto plt_rela = tags_.get(DT_PLTREL).value_or(DT_RELA) == DT_RELA;
    for (const auto& r :
         {Relocations{DT_RELA, DT_RELASZ, true, "the relocations (DT_RELA)"},
          Relocations{DT_REL, DT_RELSZ, false, "the relocations (DT_REL)"},
          Relocations{DT_JMPREL, DT_PLTRELSZ, plt_rela, "the PLT relocations (DT_JMPREL)"}}) {
      const auto address = tags_.get(r.address);
      if (!address) continue;
      const std::uint64_t size = tags_.get(r.size).value_or(0);
      added = add(*address, r.what, [&, r, at = *address, size] {
        return scan_relocations(at, size, r.rela, r.what);
      });
      if (!added) return added;
    }
  }
  if (const auto verneed = tags_.get(DT_VERNEED)) {
    const auto count = tags_.get(DT_VERNEEDNUM);
    if (!count) return invalid("the dynamic section has DT_VERNEED without DT_VERNEEDNUM");
    added = add(*verneed, "the version needs (DT_VERNEED)",
                [&, at = *verneed, n = *count] { return read_verneed(at, n); });
    if (!added) return added;
  }
  if (const auto verdef = tags_.get(DT_VERDEF)) {
    const auto count = tags_.get(DT_VERDEFNUM);
    if (!count) return invalid("the dynamic section has DT_VERDEF without DT_VERDEFNUM");
    added = add(*verdef, "the version definitions (DT_VERDEF)",
                [&, at = *verdef, n = *count] { return read_verdef(at, n); });
    if (!added) return added;
  }
  std::stable_sort(tasks.begin(), tasks.end(),
                   [](const Task& a, const Task& b) { return a.offset < b.offset; });
  for (const auto& task : tasks) {
    if (auto s = task.run(); !s) return s;
  }
  return read_unhashed_symbols();
}

Result<std::string> Parser::string_at(std::uint64_t offset, std::string_view what) const {
  if (offset >= strtab_.size()) {
    return invalid(std::string(what) + " points outside the dynamic string table (offset " +
                   std::to_string(offset) + " of " + std::to_string(strtab_.size()) + ")");
  }
  const std::size_t end = strtab_.find('\0', static_cast<std::size_t>(offset));
  if (end == std::string::npos) {
    return invalid(std::string(what) + " is not terminated inside the dynamic string table");
  }
  return strtab_.substr(static_cast<std::size_t>(offset), end - static_cast<std::size_t>(offset));
}

std::vector<std::string> split_path_list(const std::string& list) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t colon = list.find(':', start);
    out.push_back(
        list.substr(start, colon == std::string::npos ? std::string::npos : colon - start));
    if (colon == std::string::npos) return out;
    start = colon + 1;
  }
}

core::SymbolBinding binding_of(unsigned bind) {
  switch (bind) {
    case STB_LOCAL:
      return core::SymbolBinding::local;
    case STB_GLOBAL:
      return core::SymbolBinding::global;
    case STB_WEAK:
      return core::SymbolBinding::weak;
    case STB_GNU_UNIQUE:
      return core::SymbolBinding::gnu_unique;
    default:
      return core::SymbolBinding::other;
  }
}

core::SymbolType type_of(unsigned type) {
  switch (type) {
    case STT_NOTYPE:
      return core::SymbolType::notype;
    case STT_OBJECT:
      return core::SymbolType::object;
    case STT_FUNC:
      return core::SymbolType::func;
    case STT_SECTION:
      return core::SymbolType::section;
    case STT_FILE:
      return core::SymbolType::file;
    case STT_COMMON:
      return core::SymbolType::common;
    case STT_TLS:
      return core::SymbolType::tls;
    case STT_GNU_IFUNC:
      return core::SymbolType::gnu_ifunc;
    default:
      return core::SymbolType::other;
  }
}

Status Parser::interpret() {
  for (const auto offset : tags_.needed) {
    auto name = string_at(offset, "a DT_NEEDED entry");
    if (!name) return name.error();
    info_.needed.push_back(std::move(*name));
  }
  if (const auto soname = tags_.get(DT_SONAME)) {
    auto name = string_at(*soname, "DT_SONAME");
    if (!name) return name.error();
    info_.soname = std::move(*name);
  }
  for (const auto offset : tags_.rpath) {
    auto list = string_at(offset, "DT_RPATH");
    if (!list) return list.error();
    for (auto& p : split_path_list(*list)) info_.rpath.push_back(std::move(p));
  }
  for (const auto offset : tags_.runpath) {
    auto list = string_at(offset, "DT_RUNPATH");
    if (!list) return list.error();
    for (auto& p : split_path_list(*list)) info_.runpath.push_back(std::move(p));
  }

  // Version index -> (name, library); index 0 and 1 mean local and global (unversioned).
  struct Version {
    std::string name;
    std::string library;
  };
  std::map<std::uint16_t, Version> versions;
  for (const RawNeed& need : needs_) {
    auto file = string_at(need.file, "a version need's file name");
    if (!file) return file.error();
    core::VersionNeed out{*file, {}};
    for (const auto& aux : need.versions) {
      auto name = string_at(aux.name, "a needed version's name");
      if (!name) return name.error();
      const auto index = static_cast<std::uint16_t>(aux.other & 0x7fffU);
      if (index > 1 && !versions.emplace(index, Version{*name, *file}).second) {
        return invalid("version index " + std::to_string(index) + " is defined twice");
      }
      out.versions.push_back(std::move(*name));
    }
    info_.version_needs.push_back(std::move(out));
  }
  for (const RawDef& def : defs_) {
    if (!def.name) continue;
    auto name = string_at(*def.name, "a version definition's name");
    if (!name) return name.error();
    const auto index = static_cast<std::uint16_t>(def.index & 0x7fffU);
    if ((def.flags & VER_FLG_BASE) != 0) continue;
    if (index > 1 && !versions.emplace(index, Version{*name, {}}).second) {
      return invalid("version index " + std::to_string(index) + " is defined twice");
    }
    info_.version_definitions.push_back(std::move(*name));
  }

  const std::size_t entry = is64_ ? sizeof(Elf64_Sym) : sizeof(Elf32_Sym);
  const std::uint64_t count = symtab_.size() / entry;
  if (count > 1) info_.symbols.reserve(static_cast<std::size_t>(count - 1));
  for (std::size_t i = 1; i < count; ++i) {
    const std::string_view s = std::string_view(symtab_).substr(i * entry, entry);
    const std::uint32_t name_offset = dec_.u32(s, 0);
    const auto info = static_cast<unsigned char>(s[is64_ ? 4 : 12]);
    const auto other = static_cast<unsigned char>(s[is64_ ? 5 : 13]);
    const std::uint16_t shndx = dec_.u16(s, is64_ ? 6 : 14);
    core::ElfSymbol symbol;
    auto name = string_at(name_offset, "symbol " + std::to_string(i) + "'s name");
    if (!name) return name.error();
    symbol.name = std::move(*name);
    symbol.defined = shndx != SHN_UNDEF;
    symbol.binding = binding_of(ELF64_ST_BIND(info));
    symbol.type = type_of(ELF64_ST_TYPE(info));
    symbol.visibility = static_cast<core::SymbolVisibility>(ELF64_ST_VISIBILITY(other));
    if (!versym_.empty()) {
      const std::uint16_t raw = dec_.u16(versym_, i * 2);
      const auto index = static_cast<std::uint16_t>(raw & 0x7fffU);
      if (index > 1) {
        const auto it = versions.find(index);
        if (it == versions.end()) {
          return invalid("symbol " + symbol.name + " has version index " + std::to_string(index) +
                         ", which no version entry defines");
        }
        symbol.version = it->second.name;
        if (!symbol.defined) symbol.version_library = it->second.library;
        symbol.version_hidden = (raw & 0x8000U) != 0;
      }
    }
    info_.symbols.push_back(std::move(symbol));
  }
  return ok_status();
}

Result<core::ElfInfo> Parser::run() {
  if (auto s = read_header(); !s) return s.error();
  if (auto s = read_program_headers(); !s) return s.error();
  if (!dynamic_) return std::move(info_);
  info_.has_dynamic = true;
  if (auto s = read_dynamic(); !s) return s.error();
  if (auto s = read_tables(); !s) return s.error();
  if (auto s = interpret(); !s) return s.error();
  return std::move(info_);
}

}  // namespace

Result<std::string> MemorySource::read_at(std::uint64_t offset, std::size_t length) {
  if (!range_fits(offset, length, bytes_.size())) {
    return invalid("bytes " + std::to_string(offset) + "+" + std::to_string(length) +
                   " lie outside the " + std::to_string(bytes_.size()) + "-byte file");
  }
  return std::string(bytes_.substr(static_cast<std::size_t>(offset), length));
}

Result<std::unique_ptr<ByteSource>> open_file_source(const std::filesystem::path& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return errno_error(errno, "open " + path.string());
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return errno_error(errno, "stat " + path.string());
  if (!S_ISREG(st.st_mode)) return make_error(Errc::io, path.string() + " is not a regular file");
  return make_region_source(std::move(fd), 0, static_cast<std::uint64_t>(st.st_size));
}

Result<core::ElfInfo> read_elf(ByteSource& source, const ElfLimits& limits) {
  Parser parser(source, limits);
  return parser.run();
}

Result<core::ElfInfo> read_elf_file(const std::filesystem::path& path, const ElfLimits& limits) {
  auto source = open_file_source(path);
  if (!source) return source.error();
  return read_elf(**source, limits);
}

}  // namespace wf::archive
