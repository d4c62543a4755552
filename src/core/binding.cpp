#include "wheelforge/core/binding.hpp"

#include <algorithm>
#include <array>

#include "core/label_scan.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::core {
namespace {

using label_scan::to_int;

// Stored text is tab-separated lines; lists inside a field are comma-separated.
std::string clean(std::string_view text, std::size_t limit = 1000) {
  std::string out;
  out.reserve(std::min(text.size(), limit));
  for (const char c : text.substr(0, limit)) {
    const auto u = static_cast<unsigned char>(c);
    out += (u < 0x20 || u == 0x7f || c == ',') ? '?' : c;
  }
  return out;
}

// The versioned CUDA libraries whose soname carries the CUDA major (libcudart.so.12 is CUDA
// 12.x's runtime); docs/torch-labels.md, "What the binaries say".
constexpr std::array kRuntimeVersioned = {"libcudart.so.", "libnvrtc.so.", "libcublas.so.",
                                          "libcublasLt.so."};
// Libraries that exist only for CUDA: linking one means the binary uses CUDA.
constexpr std::array kCudaOnly = {
    "libcudart.so", "libcuda.so",     "libnvrtc.so",     "libcublas.so",   "libcublasLt.so",
    "libcufft.so",  "libcurand.so",   "libcusparse.so",  "libcusolver.so", "libcudnn.so",
    "libnccl.so",   "libc10_cuda.so", "libtorch_cuda.so"};

std::optional<int> cuda_major_of(std::string_view library) {
  for (const std::string_view prefix : kRuntimeVersioned) {
    if (!library.starts_with(prefix)) continue;
    const std::string_view rest = library.substr(prefix.size());
    const std::string_view major = rest.substr(0, rest.find('.'));
    auto n = to_int(major);
    if (n && *n > 0 && *n < 100) return n;
  }
  return std::nullopt;
}

bool is_cuda_library(std::string_view library) {
  return std::any_of(kCudaOnly.begin(), kCudaOnly.end(), [&](std::string_view prefix) {
    return library == prefix || (library.starts_with(prefix) && library[prefix.size()] == '.');
  });
}

std::string version_suffix(const ElfInfo& elf, std::string_view prefix) {
  const auto highest = highest_needed_version(elf, prefix);
  if (!highest) return {};
  return clean(highest->substr(prefix.size() + 1), 40);
}

}  // namespace

std::string_view binding_name(TorchBinding binding) {
  switch (binding) {
    case TorchBinding::none:
      return "none";
    case TorchBinding::stable_abi:
      return "stable-abi";
    case TorchBinding::series:
      return "series";
  }
  return "none";
}

bool is_torch_cxx_symbol(std::string_view name) {
  // Nested names (N), const member functions (NK), vtables, typeinfo and their names (TVN,
  // TIN, TSN), each followed by a namespace's length and name.
  static constexpr std::array kHeads = {"_ZN", "_ZNK", "_ZTVN", "_ZTIN", "_ZTSN"};
  static constexpr std::array kNamespaces = {"3c10", "2at", "5torch"};
  for (const std::string_view head : kHeads) {
    if (!name.starts_with(head)) continue;
    const std::string_view rest = name.substr(head.size());
    for (const std::string_view ns : kNamespaces) {
      if (rest.starts_with(ns)) return true;
    }
  }
  return false;
}

bool is_torch_stable_symbol(std::string_view name) {
  return name.starts_with("aoti_torch_") || name.starts_with("torch_");
}

BinaryFindings find_binary(const WheelBinary& binary) {
  BinaryFindings out;
  out.path = clean(binary.path);
  out.size = binary.size;
  if (!binary.elf) {
    out.problem = clean(binary.problem.empty() ? "cannot be read as ELF" : binary.problem);
    return out;
  }
  const ElfInfo& elf = *binary.elf;
  out.arch = clean(elf.arch(), 40);
  for (const auto& library : elf.needed) {
    if (library.empty()) continue;  // names nothing the loader could find
    if (out.needed.size() < kMaxNeeded) out.needed.push_back(clean(library, 200));
    const auto major = cuda_major_of(library);
    if (major && !out.cuda_major) {
      out.cuda_major = major;
      out.cuda_library = clean(library, 200);
    } else if (out.cuda_library.empty() && is_cuda_library(library)) {
      out.cuda_library = clean(library, 200);
    }
  }
  out.glibc = version_suffix(elf, "GLIBC");
  out.glibcxx = version_suffix(elf, "GLIBCXX");
  std::string stable;
  for (const auto& sym : elf.symbols) {
    if (sym.defined) {
      if (sym.name.starts_with("PyInit_") && sym.binding != SymbolBinding::local) {
        out.extension_module = true;
      }
      continue;
    }
    if (out.binding != TorchBinding::series && is_torch_cxx_symbol(sym.name)) {
      out.binding = TorchBinding::series;
      out.binding_symbol = clean(sym.name, kMaxSymbolShown);
    } else if (stable.empty() && is_torch_stable_symbol(sym.name)) {
      stable = sym.name;
    }
  }
  if (out.binding == TorchBinding::none && !stable.empty()) {
    out.binding = TorchBinding::stable_abi;
    out.binding_symbol = clean(stable, kMaxSymbolShown);
  }
  return out;
}

TorchBinding WheelFindings::binding() const {
  const BinaryFindings* b = binding_evidence();
  return b != nullptr ? b->binding : TorchBinding::none;
}

const BinaryFindings* WheelFindings::binding_evidence() const {
  const BinaryFindings* stable = nullptr;
  for (const auto& b : binaries) {
    if (b.binding == TorchBinding::series) return &b;
    if (b.binding == TorchBinding::stable_abi && stable == nullptr) stable = &b;
  }
  return stable;
}

const BinaryFindings* WheelFindings::cuda_evidence() const {
  const BinaryFindings* any = nullptr;
  for (const auto& b : binaries) {
    if (b.cuda_major) return &b;
    if (!b.cuda_library.empty() && any == nullptr) any = &b;
  }
  return any;
}

namespace {

std::string highest(const std::vector<BinaryFindings>& binaries,
                    std::string BinaryFindings::*field) {
  std::string best;
  std::vector<std::uint32_t> best_numbers;
  for (const auto& b : binaries) {
    const std::string& v = b.*field;
    if (v.empty()) continue;
    const auto numbers = SymbolVersion::parse("X_" + v).numbers;
    if (!numbers) continue;
    if (best.empty() || std::is_gt(compare_dotted(*numbers, best_numbers))) {
      best = v;
      best_numbers = *numbers;
    }
  }
  return best;
}

}  // namespace

std::string WheelFindings::glibc() const {
  return highest(binaries, &BinaryFindings::glibc);
}

std::string WheelFindings::glibcxx() const {
  return highest(binaries, &BinaryFindings::glibcxx);
}

WheelFindings find_wheel(std::span<const WheelBinary> binaries, const VariantHints& hints,
                         std::span<const std::string> requires_dist) {
  WheelFindings out;
  out.binaries.reserve(binaries.size());
  for (const auto& b : binaries) out.binaries.push_back(find_binary(b));
  if (out.binding() == TorchBinding::stable_abi && !hints.torch) {
    out.torch_from = torch_minimum_from_requirements(requires_dist);
  }
  return out;
}

Status check_label_against_binaries(const VariantHints& hints, std::string_view label,
                                    const WheelFindings& findings) {
  const BinaryFindings* cuda = findings.cuda_evidence();
  if (cuda == nullptr) return ok_status();
  if (label.starts_with('+')) label.remove_prefix(1);
  const std::string shown = "local version label '+" + sanitize_for_log(label, 100) + "'";
  const std::string where = cuda->path + " links " + cuda->cuda_library;
  switch (hints.backend) {
    case Backend::cuda:
      if (cuda->cuda_major && hints.cuda_major && *cuda->cuda_major != *hints.cuda_major) {
        std::string said = std::to_string(*hints.cuda_major);
        if (hints.cuda_minor) said += "." + std::to_string(*hints.cuda_minor);
        return make_error(Errc::invalid, shown + " says CUDA " + said + ", but " + where +
                                             " (CUDA " + std::to_string(*cuda->cuda_major) +
                                             "): the label must name the CUDA the binary links");
      }
      return ok_status();
    case Backend::cpu:
      return make_error(Errc::invalid,
                        shown + " says cpu, but " + where + ": the binary needs CUDA");
    case Backend::rocm:
      return make_error(Errc::invalid,
                        shown + " says ROCm, but " + where + ": the binary needs CUDA");
    case Backend::none:
      return ok_status();
  }
  return ok_status();
}

WheelInspection inspect_contents(std::vector<WheelMember> members,
                                 std::span<const WheelBinary> binaries) {
  WheelInspection out;
  out.members_total = members.size();
  for (const auto& m : members) out.inflated_total += m.size;
  if (members.size() > kMaxMembersShown) members.resize(kMaxMembersShown);
  for (auto& m : members) m.name = clean(m.name);
  out.members = std::move(members);
  for (const auto& b : binaries) {
    InspectedBinary ib;
    ib.findings = find_binary(b);
    if (b.elf) {
      for (const auto& sym : b.elf->symbols) {
        const bool visible = sym.visibility == SymbolVisibility::default_visibility ||
                             sym.visibility == SymbolVisibility::protected_;
        const bool bound = sym.binding == SymbolBinding::global ||
                           sym.binding == SymbolBinding::weak ||
                           sym.binding == SymbolBinding::gnu_unique;
        if (!sym.defined || !visible || !bound || sym.type == SymbolType::section ||
            sym.type == SymbolType::file) {
          continue;
        }
        ++ib.exported_total;
        if (ib.exported.size() >= kMaxExportedShown) continue;
        std::string kind = "other";
        if (sym.type == SymbolType::func || sym.type == SymbolType::gnu_ifunc) kind = "function";
        if (sym.type == SymbolType::object || sym.type == SymbolType::common) kind = "object";
        if (sym.type == SymbolType::tls) kind = "tls";
        ib.exported.push_back({clean(sym.name, kMaxSymbolShown), kind, clean(sym.version, 100)});
      }
    }
    out.binaries.push_back(std::move(ib));
  }
  return out;
}

// ---- stored form ---------------------------------------------------------------------------
//   wf-binaries 1 <tab> torch_from ("" or "2.9")
//   one line per binary: path, size, extension (0/1), arch, needed (comma list), glibc,
//   glibcxx, cuda major ("" or N), cuda library, binding, binding symbol, problem

std::string encode_findings(const WheelFindings& findings) {
  std::string out = "wf-binaries 1\t";
  if (findings.torch_from) out += findings.torch_from->str();
  out += '\n';
  for (const auto& b : findings.binaries) {
    std::string needed;
    for (const auto& n : b.needed) {
      if (!needed.empty()) needed += ',';
      needed += clean(n);
    }
    const std::array<std::string, 12> fields = {
        clean(b.path),
        std::to_string(b.size),
        b.extension_module ? "1" : "0",
        clean(b.arch),
        needed,
        clean(b.glibc),
        clean(b.glibcxx),
        b.cuda_major ? std::to_string(*b.cuda_major) : std::string(),
        clean(b.cuda_library),
        std::string(binding_name(b.binding)),
        clean(b.binding_symbol),
        clean(b.problem)};
    for (std::size_t i = 0; i < fields.size(); ++i) {
      if (i > 0) out += '\t';
      out += fields[i];
    }
    out += '\n';
  }
  return out;
}

std::optional<WheelFindings> decode_findings(std::string_view text) {
  const auto lines = split(text, '\n');
  if (lines.empty()) return std::nullopt;
  const auto head = split(lines[0], '\t');
  if (head.size() != 2 || head[0] != "wf-binaries 1") return std::nullopt;
  WheelFindings out;
  if (!head[1].empty()) {
    const auto series = torch_series_of_version(std::string(head[1]) + ".0");
    if (!series) return std::nullopt;
    out.torch_from = series;
  }
  for (std::size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    const auto f = split(lines[i], '\t');
    if (f.size() != 12) return std::nullopt;
    BinaryFindings b;
    b.path = std::string(f[0]);
    const auto size = parse_u64(f[1]);
    if (!size) return std::nullopt;
    b.size = *size;
    b.extension_module = f[2] == "1";
    b.arch = std::string(f[3]);
    for (const auto n : split(f[4], ',')) {
      if (!n.empty()) b.needed.emplace_back(n);
    }
    b.glibc = std::string(f[5]);
    b.glibcxx = std::string(f[6]);
    if (!f[7].empty()) {
      const auto major = to_int(f[7]);
      if (!major) return std::nullopt;
      b.cuda_major = major;
    }
    b.cuda_library = std::string(f[8]);
    if (f[9] == "series") {
      b.binding = TorchBinding::series;
    } else if (f[9] == "stable-abi") {
      b.binding = TorchBinding::stable_abi;
    }
    b.binding_symbol = std::string(f[10]);
    b.problem = std::string(f[11]);
    out.binaries.push_back(std::move(b));
  }
  return out;
}

}  // namespace wf::core
