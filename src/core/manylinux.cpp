#include "wheelforge/core/manylinux.hpp"

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <set>

namespace wf::core {
namespace {

std::string_view file_name_of(std::string_view path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

bool contains(std::span<const std::string_view> list, std::string_view item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

// A binary the assessment judges: readable, and loaded by the dynamic loader.
bool judged(const WheelBinary& b) {
  return b.elf && (b.elf->type == ElfType::shared || b.elf->type == ElfType::executable);
}

// One requirement that rules out the policies below some index, with what to say about it
// (`what`, the assessment's `deciding`) and, for PolicyRequirement, with the symbols it is
// needed for (`detail`).
struct Floor {
  std::size_t index = 0;  // lowest policy (index into the arch's list) that allows it
  std::string what;
  std::string detail;
};

// The imported symbols of `elf` bound to `version` of `library`: "pthread_create", or
// "pthread_create, pthread_join and 3 more"; empty when none names it (a version can be needed
// for its ABI alone).
std::string symbols_needing(const ElfInfo& elf, std::string_view library,
                            std::string_view version) {
  constexpr std::size_t kShown = 3;
  std::vector<std::string_view> names;
  std::size_t count = 0;
  for (const auto& sym : elf.symbols) {
    if (sym.defined || sym.version != version || sym.version_library != library) continue;
    if (++count <= kShown) names.push_back(sym.name);
  }
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == names.size() && count <= kShown ? " and " : ", ");
    out += names[i];
  }
  if (count > kShown) out += " and " + std::to_string(count - kShown) + " more";
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// ManylinuxPolicy

std::string ManylinuxPolicy::tag() const {
  return std::string(name) + "_" + std::string(arch);
}

std::vector<std::string> ManylinuxPolicy::platform_tags() const {
  std::vector<std::string> tags{tag()};
  if (!alias.empty()) tags.push_back(std::string(alias) + "_" + std::string(arch));
  return tags;
}

bool ManylinuxPolicy::allows_version(std::string_view version) const {
  const SymbolVersion v = SymbolVersion::parse(version);
  for (const auto& ceiling : ceilings) {
    if (ceiling.prefix != v.prefix) continue;
    if (contains(ceiling.named, v.suffix)) return true;
    if (!v.numbers || ceiling.highest.empty()) return false;
    const auto highest = SymbolVersion::parse("X_" + std::string(ceiling.highest)).numbers;
    return highest && std::is_lteq(compare_dotted(*v.numbers, *highest));
  }
  return true;
}

bool ManylinuxPolicy::allows_library(std::string_view library) const {
  return contains(libraries, library);
}

std::vector<const ManylinuxPolicy*> manylinux_policies_for(std::string_view arch) {
  std::vector<const ManylinuxPolicy*> out;
  for (const auto& policy : manylinux_policies()) {
    if (policy.arch == arch) out.push_back(&policy);
  }
  std::sort(out.begin(), out.end(), [](const ManylinuxPolicy* a, const ManylinuxPolicy* b) {
    return a->glibc_minor < b->glibc_minor;
  });
  return out;
}

bool is_dynamic_loader(std::string_view library) {
  return library.starts_with("ld-linux") || library == "ld64.so.1" || library == "ld64.so.2";
}

// ---------------------------------------------------------------------------------------------
// Provided libraries

bool glob_match(std::string_view pattern, std::string_view text) {
  // Iterative matching with one backtrack point: linear in practice, never exponential.
  std::size_t p = 0;
  std::size_t t = 0;
  std::size_t star = std::string_view::npos;
  std::size_t star_text = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      star_text = t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++star_text;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool ProvidedLibraries::provides(std::string_view library) const {
  for (const auto& name : names) {
    if (name == library) return true;
  }
  for (const auto& pattern : patterns) {
    if (glob_match(pattern, library)) return true;
  }
  return false;
}

ProvidedLibraries wheel_libraries(std::span<const WheelBinary> binaries) {
  ProvidedLibraries out;
  std::set<std::string> seen;
  const auto add = [&](std::string_view name) {
    if (!name.empty() && seen.emplace(name).second) out.names.emplace_back(name);
  };
  for (const auto& b : binaries) {
    if (!b.elf) continue;
    if (b.elf->soname) add(*b.elf->soname);
    add(file_name_of(b.path));
  }
  return out;
}

ProvidedLibraries torch_extension_provided(std::span<const WheelBinary> binaries) {
  ProvidedLibraries out = wheel_libraries(binaries);
  for (const auto& lib : torch_cuda_libraries()) out.patterns.emplace_back(lib.pattern);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Assessment

std::vector<std::string> ManylinuxAssessment::platform_tags() const {
  if (outcome != ManylinuxOutcome::tagged || policy == nullptr) return {};
  return policy->platform_tags();
}

std::string ManylinuxAssessment::summary() const {
  switch (outcome) {
    case ManylinuxOutcome::no_binaries:
      return "no ELF binaries";
    case ManylinuxOutcome::tagged: {
      std::string out = policy->tag();
      out += glibc_floor.empty() ? " (needs no GLIBC version" : " (glibc floor " + glibc_floor;
      if (!deciding.empty()) out += "; set by " + deciding;
      return out + ")";
    }
    case ManylinuxOutcome::refused:
      break;
  }
  std::vector<std::string> reasons;
  for (const auto& u : unsatisfied) {
    std::string who;
    for (const auto& path : u.needed_by) who += (who.empty() ? "" : ", ") + path;
    reasons.push_back(who + " need" + (u.needed_by.size() == 1 ? "s " : " ") + u.library +
                      ", which neither the wheel, torch, CUDA nor any manylinux policy provides");
  }
  for (const auto& v : too_new) {
    reasons.push_back(v.version + " (" + v.library + ", needed by " + v.needed_by +
                      ") is allowed by no manylinux policy for " + arch);
  }
  reasons.insert(reasons.end(), problems.begin(), problems.end());
  std::string out = "not manylinux: ";
  for (std::size_t i = 0; i < reasons.size(); ++i) out += (i == 0 ? "" : "; ") + reasons[i];
  return out;
}

ManylinuxAssessment assess_manylinux(std::span<const WheelBinary> binaries,
                                     const ProvidedLibraries& provided) {
  ManylinuxAssessment out;

  // 1. Which binaries count, and their architecture.
  std::vector<const WheelBinary*> judged_binaries;
  std::map<std::string, std::vector<std::string>> arches;  // arch -> binaries
  std::vector<std::string> arch_order;
  for (const auto& b : binaries) {
    if (!b.elf) {
      out.problems.push_back("cannot read " + b.path + ": " + b.problem);
      continue;
    }
    if (!judged(b)) continue;
    judged_binaries.push_back(&b);
    const std::string arch = b.elf->arch();
    auto& paths = arches[arch];
    if (paths.empty()) arch_order.push_back(arch);
    paths.push_back(b.path);
  }
  if (judged_binaries.empty() && out.problems.empty()) return out;
  out.outcome = ManylinuxOutcome::refused;
  if (arch_order.size() > 1) {
    std::string list;
    for (const auto& arch : arch_order) {
      list += (list.empty() ? "" : ", ") + arch + " (" + arches[arch].front() + ")";
    }
    out.problems.push_back("binaries of several architectures: " + list);
    return out;
  }
  if (arch_order.empty()) return out;
  out.arch = arch_order.front();
  const auto policies = manylinux_policies_for(out.arch);
  if (policies.empty()) {
    out.problems.push_back("wheelforge knows no manylinux policy for " + out.arch);
    return out;
  }

  // 2. Every requirement as the lowest policy that allows it; policies only grow, so the
  // answer is the highest of these.
  std::vector<Floor> floors;
  std::vector<std::uint32_t> glibc;
  const auto lowest_allowing = [&](auto&& allows) -> std::optional<std::size_t> {
    for (std::size_t i = 0; i < policies.size(); ++i) {
      if (allows(*policies[i])) return i;
    }
    return std::nullopt;
  };
  for (const WheelBinary* b : judged_binaries) {
    const ElfInfo& elf = *b->elf;
    for (const auto& library : elf.needed) {
      if (is_dynamic_loader(library) || provided.provides(library)) continue;
      const auto at =
          lowest_allowing([&](const ManylinuxPolicy& p) { return p.allows_library(library); });
      if (at) {
        floors.push_back(
            {*at, library + " needed by " + b->path, library + " needed by " + b->path});
        continue;
      }
      auto it = std::find_if(out.unsatisfied.begin(), out.unsatisfied.end(),
                             [&](const UnsatisfiedLibrary& u) { return u.library == library; });
      if (it == out.unsatisfied.end()) {
        out.unsatisfied.push_back({library, {}});
        it = std::prev(out.unsatisfied.end());
      }
      if (std::find(it->needed_by.begin(), it->needed_by.end(), b->path) == it->needed_by.end()) {
        it->needed_by.push_back(b->path);
      }
    }
    for (const auto& need : elf.version_needs) {
      for (const auto& version : need.versions) {
        const SymbolVersion v = SymbolVersion::parse(version);
        if (v.prefix == "GLIBC" && v.numbers && std::is_gt(compare_dotted(*v.numbers, glibc))) {
          glibc = *v.numbers;
        }
        const auto at =
            lowest_allowing([&](const ManylinuxPolicy& p) { return p.allows_version(version); });
        if (at) {
          const std::string symbols = symbols_needing(elf, need.library, version);
          floors.push_back({*at, version + " (" + need.library + ") needed by " + b->path,
                            version + " (" + need.library +
                                (symbols.empty() ? "" : ": " + symbols) + ") needed by " +
                                b->path});
        } else if (std::none_of(
                       out.too_new.begin(), out.too_new.end(),
                       [&](const VersionRequirement& r) { return r.version == version; })) {
          out.too_new.push_back({version, need.library, b->path});
        }
      }
    }
    std::set<std::string_view> undefined;
    for (const auto& s : elf.symbols) {
      if (!s.defined) undefined.insert(s.name);
    }
    // A blacklisted symbol rules out the policies that list it for a library the binary needs.
    std::optional<std::size_t> blocked_below;
    std::string blocked_what;
    for (std::size_t i = 0; i < policies.size(); ++i) {
      for (const auto& entry : policies[i]->blacklist) {
        if (std::find(elf.needed.begin(), elf.needed.end(), entry.library) == elf.needed.end()) {
          continue;
        }
        for (const auto& symbol : entry.symbols) {
          if (undefined.count(symbol) != 0) {
            blocked_below = i + 1;
            blocked_what =
                std::string(symbol) + " (" + std::string(entry.library) + ") used by " + b->path;
          }
        }
      }
    }
    if (blocked_below) {
      if (*blocked_below < policies.size()) {
        floors.push_back({*blocked_below, blocked_what, blocked_what});
      } else {
        out.problems.push_back(blocked_what + " is forbidden by every manylinux policy");
      }
    }
  }
  out.glibc_floor = dotted_str(glibc);

  if (!out.unsatisfied.empty() || !out.too_new.empty() || !out.problems.empty()) return out;
  std::size_t index = 0;
  for (const auto& floor : floors) {
    if (floor.index > index) {
      index = floor.index;
      out.deciding = floor.what;
    }
    if (floor.index > 0) out.requirements.push_back({policies[floor.index], floor.detail});
  }
  out.outcome = ManylinuxOutcome::tagged;
  out.policy = policies[index];
  return out;
}

std::string ManylinuxCeiling::name() const {
  return "manylinux_2_" + std::to_string(glibc_minor);
}

Result<ManylinuxCeiling> parse_manylinux_ceiling(std::string_view text) {
  const auto invalid = [&](const std::string& why) {
    return make_error(Errc::invalid, "'" + std::string(text) + "' " + why);
  };
  constexpr std::string_view kForms =
      "is not a manylinux ceiling: expected \"2_28\", \"manylinux_2_28\" or \"manylinux2014\"";
  std::optional<std::uint32_t> minor;
  if (text == "manylinux2014") {
    minor = 17;
  } else if (text == "manylinux2010" || text == "manylinux1") {
    minor = text == "manylinux1" ? 5 : 12;
  } else {
    std::string_view rest = text;
    if (rest.starts_with("manylinux_")) rest.remove_prefix(std::string_view("manylinux_").size());
    const std::size_t sep = rest.find('_');
    const auto number = [](std::string_view digits) -> std::optional<std::uint32_t> {
      if (digits.empty() || digits.size() > 4) return std::nullopt;
      std::uint32_t n = 0;
      for (const char c : digits) {
        if (c < '0' || c > '9') return std::nullopt;
        n = n * 10 + static_cast<std::uint32_t>(c - '0');
      }
      return n;
    };
    if (sep == std::string_view::npos) return invalid(std::string(kForms));
    const auto major = number(rest.substr(0, sep));
    minor = number(rest.substr(sep + 1));
    if (!major || !minor) return invalid(std::string(kForms));
    if (*major != 2) return invalid("names glibc " + std::to_string(*major) + ", not glibc 2");
  }
  if (*minor < 17) {
    return invalid(
        "is below manylinux_2_17, the lowest tag wheelforge gives a wheel with binaries");
  }
  return ManylinuxCeiling{*minor};
}

std::optional<ManylinuxCeiling> ceiling_of_platform_tags(std::span<const std::string> tags) {
  const auto glibc = glibc_of_platform_tags(tags);
  if (!glibc) return std::nullopt;
  const auto numbers = SymbolVersion::parse("GLIBC_" + *glibc).numbers;
  if (!numbers || numbers->size() < 2 || (*numbers)[0] != 2) return std::nullopt;
  return ManylinuxCeiling{std::max<std::uint32_t>((*numbers)[1], 17)};
}

std::vector<std::string> above_ceiling(const ManylinuxAssessment& assessment,
                                       const ManylinuxCeiling& ceiling) {
  std::vector<std::string> out;
  if (assessment.outcome != ManylinuxOutcome::tagged || assessment.policy == nullptr ||
      assessment.policy->glibc_minor <= ceiling.glibc_minor) {
    return out;
  }
  for (const auto& r : assessment.requirements) {
    if (r.lowest->glibc_minor > ceiling.glibc_minor) out.push_back(r.what);
  }
  return out;
}

std::optional<std::string> glibc_of_platform_tag(std::string_view tag) {
  // Legacy aliases: manylinux1 is 2_5, manylinux2010 2_12, manylinux2014 2_17
  // (docs/packaging.md, "Platform tags").
  constexpr std::pair<std::string_view, std::string_view> kLegacy[] = {
      {"manylinux1_", "2.5"}, {"manylinux2010_", "2.12"}, {"manylinux2014_", "2.17"}};
  for (const auto& [prefix, glibc] : kLegacy) {
    if (tag.starts_with(prefix) && tag.size() > prefix.size()) return std::string(glibc);
  }
  // manylinux_X_Y_ARCH
  constexpr std::string_view kPerennial = "manylinux_";
  if (!tag.starts_with(kPerennial)) return std::nullopt;
  std::string_view rest = tag.substr(kPerennial.size());
  std::uint32_t parts[2] = {0, 0};
  for (auto& part : parts) {
    std::size_t n = 0;
    while (n < rest.size() && rest[n] >= '0' && rest[n] <= '9') ++n;
    if (n == 0 || n > 4 || n >= rest.size() || rest[n] != '_') return std::nullopt;
    for (std::size_t i = 0; i < n; ++i) {
      part = part * 10 + static_cast<std::uint32_t>(rest[i] - '0');
    }
    rest.remove_prefix(n + 1);
  }
  if (rest.empty()) return std::nullopt;
  return std::to_string(parts[0]) + "." + std::to_string(parts[1]);
}

std::optional<std::string> glibc_of_platform_tags(std::span<const std::string> tags) {
  std::optional<std::string> lowest;
  std::vector<std::uint32_t> lowest_numbers;
  for (const auto& tag : tags) {
    auto glibc = glibc_of_platform_tag(tag);
    if (!glibc) continue;
    const auto numbers =
        SymbolVersion::parse("GLIBC_" + *glibc).numbers.value_or(std::vector<std::uint32_t>{});
    if (!lowest || std::is_lt(compare_dotted(numbers, lowest_numbers))) {
      lowest = std::move(glibc);
      lowest_numbers = numbers;
    }
  }
  return lowest;
}

}  // namespace wf::core
