#include "wheelforge/core/elf.hpp"

#include <elf.h>

#include <algorithm>

namespace wf::core {

std::string ElfInfo::arch() const {
  return machine_name(machine, elf_class, endian);
}

std::string machine_name(std::uint16_t machine, ElfClass elf_class, ElfEndian endian) {
  const bool is64 = elf_class == ElfClass::elf64;
  const bool little = endian == ElfEndian::little;
  switch (machine) {
    case EM_X86_64:
      return is64 ? "x86_64" : "x32";
    case EM_386:
      return "i686";
    case EM_AARCH64:
      return little ? "aarch64" : "aarch64_be";
    case EM_ARM:
      return "armv7l";
    case EM_PPC64:
      return little ? "ppc64le" : "ppc64";
    case EM_PPC:
      return little ? "ppcle" : "ppc";
    case EM_S390:
      return is64 ? "s390x" : "s390";
    case EM_RISCV:
      return is64 ? "riscv64" : "riscv32";
    case EM_LOONGARCH:
      return is64 ? "loongarch64" : "loongarch32";
    case EM_MIPS:
      if (is64) return little ? "mips64el" : "mips64";
      return little ? "mipsel" : "mips";
    default:
      return "machine-" + std::to_string(machine);
  }
}

SymbolVersion SymbolVersion::parse(std::string_view name) {
  SymbolVersion out;
  const std::size_t underscore = name.find('_');
  out.prefix = std::string(name.substr(0, underscore));
  if (underscore == std::string_view::npos) return out;
  out.suffix = std::string(name.substr(underscore + 1));

  std::vector<std::uint32_t> numbers;
  std::uint64_t current = 0;
  std::size_t digits = 0;
  for (const char c : out.suffix) {
    if (c >= '0' && c <= '9') {
      // Nine digits always fit; longer runs are not versions anyone writes.
      if (++digits > 9) return out;
      current = current * 10U + static_cast<std::uint64_t>(c - '0');
    } else if (c == '.' && digits > 0) {
      numbers.push_back(static_cast<std::uint32_t>(current));
      current = 0;
      digits = 0;
    } else {
      return out;
    }
  }
  if (digits == 0) return out;
  numbers.push_back(static_cast<std::uint32_t>(current));
  out.numbers = std::move(numbers);
  return out;
}

std::strong_ordering compare_dotted(std::span<const std::uint32_t> a,
                                    std::span<const std::uint32_t> b) {
  const std::size_t n = std::max(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t x = i < a.size() ? a[i] : 0;
    const std::uint32_t y = i < b.size() ? b[i] : 0;
    if (x != y) return x <=> y;
  }
  return std::strong_ordering::equal;
}

std::string dotted_str(std::span<const std::uint32_t> numbers) {
  std::string out;
  for (std::size_t i = 0; i < numbers.size(); ++i) {
    if (i > 0) out += '.';
    out += std::to_string(numbers[i]);
  }
  return out;
}

std::optional<std::string> highest_needed_version(const ElfInfo& info, std::string_view prefix) {
  std::optional<std::string> best;
  std::vector<std::uint32_t> best_numbers;
  for (const auto& need : info.version_needs) {
    for (const auto& name : need.versions) {
      const SymbolVersion v = SymbolVersion::parse(name);
      if (v.prefix != prefix || !v.numbers) continue;
      if (!best || std::is_gt(compare_dotted(*v.numbers, best_numbers))) {
        best = name;
        best_numbers = *v.numbers;
      }
    }
  }
  return best;
}

std::optional<std::vector<std::uint32_t>> glibc_floor(const ElfInfo& info) {
  const auto highest = highest_needed_version(info, "GLIBC");
  if (!highest) return std::nullopt;
  return SymbolVersion::parse(*highest).numbers;
}

}  // namespace wf::core
