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

#include "archive/elf_parser.hpp"
#include "archive/member_source.hpp"
#include "wheelforge/archive/elf.hpp"
#include "wheelforge/util/fs.hpp"

namespace wf::archive {
namespace elf_detail {

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

}  // namespace elf_detail

using elf_detail::Parser;

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
