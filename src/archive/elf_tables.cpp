#include <elf.h>

#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "archive/elf_parser.hpp"

namespace wf::archive::elf_detail {

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

}  // namespace wf::archive::elf_detail
