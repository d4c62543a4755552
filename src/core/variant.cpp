#include "wheelforge/core/variant.hpp"

#include <algorithm>
#include <iterator>
#include <limits>
#include <map>
#include <tuple>
#include <utility>

#include "core/label_scan.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::core {
namespace {

using namespace label_scan;

// ---- label tokens ----------------------------------------------------------------------------

struct Token {
  Kind kind = Kind::cpu;
  std::size_t end = 0;
  MajorMinor version;  // cuda, rocm
  TorchSeries torch;
  bool abi = false;
};

std::optional<Token> match_cuda(std::string_view s, std::size_t i) {
  std::size_t p = 0;
  if (has_at(s, i, "cuda")) {
    p = i + 4;
  } else if (has_at(s, i, "cu")) {
    p = i + 2;
  } else {
    return std::nullopt;
  }
  std::size_t e = digit_run_end(s, p);
  auto mm = cuda_from_digits(s.substr(p, e - p));
  if (!mm) return std::nullopt;
  // `cu12.8` is a raw spelling of 12.8; only a major-only run can take a dotted minor, and a
  // longer run after the dot is a build number rather than a minor.
  if (!mm->minor && e + 1 < s.size() && s[e] == '.' && is_digit(s[e + 1])) {
    const std::size_t e2 = digit_run_end(s, e + 1);
    if (e2 - (e + 1) <= 2) {
      mm->minor = to_int(s.substr(e + 1, e2 - (e + 1)));
      e = e2;
    }
  }
  Token t;
  t.kind = Kind::cuda;
  t.end = e;
  t.version = *mm;
  return t;
}

std::optional<Token> match_torch(std::string_view s, std::size_t i) {
  const bool pt = has_at(s, i, "pt");
  if (!pt && !has_at(s, i, "torch")) return std::nullopt;
  const std::size_t p = i + (pt ? 2 : 5);
  Token t;
  t.kind = Kind::torch;
  if (auto d = match_dotted(s, p)) {
    t.torch = {d->major, d->minor};
    t.end = d->end;
    return t;
  }
  const std::size_t e = digit_run_end(s, p);
  const std::string_view d = s.substr(p, e - p);
  t.end = e;
  // `pt` spellings never carry a patch (pt211 is 2.11); `torch` ones are major, minor and
  // patch run together (torch280 is 2.8.0), so a 3-digit run ends with the patch.
  if (d.size() == 2 || (pt && d.size() == 3)) {
    t.torch = {d[0] - '0', *to_int(d.substr(1))};
  } else if (!pt && d.size() == 3) {
    t.torch = {d[0] - '0', d[1] - '0'};
  } else if (!pt && d.size() == 4) {
    t.torch = {d[0] - '0', *to_int(d.substr(1, 2))};
  } else {
    return std::nullopt;
  }
  return t;
}

std::optional<Token> match_rocm(std::string_view s, std::size_t i) {
  if (!has_at(s, i, "rocm")) return std::nullopt;
  const std::size_t p = i + 4;
  Token t;
  t.kind = Kind::rocm;
  if (auto d = match_dotted(s, p)) {
    t.version = {d->major, d->minor};
    t.end = d->end;
    return t;
  }
  const std::size_t e = digit_run_end(s, p);
  const std::string_view d = s.substr(p, e - p);
  t.end = e;
  if (d.size() == 1) {
    t.version = {d[0] - '0', std::nullopt};
  } else if (d.size() == 2 || d.size() == 3) {
    t.version = {d[0] - '0', d[1] - '0'};
  } else {
    return std::nullopt;
  }
  return t;
}

std::optional<Token> match_cpu(std::string_view s, std::size_t i) {
  if (!has_at(s, i, "cpu")) return std::nullopt;
  Token t;
  t.kind = Kind::cpu;
  t.end = i + 3;
  return t;
}

std::optional<Token> match_abi(std::string_view s, std::size_t i) {
  if (!has_at(s, i, "cxx11")) return std::nullopt;
  std::size_t p = i + 5;
  if (has_at(s, p, ".abi")) {
    p += 4;
  } else if (has_at(s, p, "abi")) {
    p += 3;
  } else {
    return std::nullopt;
  }
  auto value_at = [&](std::size_t q) -> std::optional<std::pair<bool, std::size_t>> {
    if (has_at(s, q, "true")) return std::pair{true, q + 4};
    if (has_at(s, q, "false")) return std::pair{false, q + 5};
    if (q < s.size() && (s[q] == '0' || s[q] == '1') &&
        (q + 1 == s.size() || !is_digit(s[q + 1]))) {
      return std::pair{s[q] == '1', q + 1};
    }
    return std::nullopt;
  };
  Token t;
  t.kind = Kind::abi;
  if (auto v = value_at(p)) {
    t.abi = v->first;
    t.end = v->second;
    return t;
  }
  // `cxx11abi-TRUE` normalizes to `cxx11abi.true`; a value after a dot must stand alone so that
  // a following build number is not mistaken for it.
  if (p < s.size() && s[p] == '.') {
    if (auto v = value_at(p + 1); v && (v->second == s.size() || s[v->second] == '.')) {
      t.abi = v->first;
      t.end = v->second;
      return t;
    }
  }
  // A bare `cxx11abi` / `cxx11.abi` (`+cpu.cxx11.abi`) means the new ABI (docs/torch-labels.md,
  // "Labels extension projects use").
  t.abi = true;
  t.end = p;
  return t;
}

std::optional<Token> match_token(std::string_view s, std::size_t i) {
  if (auto t = match_abi(s, i)) return t;
  if (auto t = match_cuda(s, i)) return t;
  if (auto t = match_cpu(s, i)) return t;
  if (auto t = match_rocm(s, i)) return t;
  return match_torch(s, i);
}

struct Part {
  std::string_view text;
  std::optional<Token> token;  // nullopt: free text
};

std::vector<Part> split_label(std::string_view s) {
  std::vector<Part> parts;
  std::size_t i = 0;
  while (i < s.size()) {
    if (s[i] == '.') {
      ++i;
      continue;
    }
    if (auto t = match_token(s, i)) {
      parts.push_back({s.substr(i, t->end - i), t});
      i = t->end;
      continue;
    }
    // Free text runs to the next separator, or to a keyword glued after a digit
    // (`sm89torch2.10.0`). Git hashes are hex and dates are digits, so neither contains one.
    std::size_t j = i + 1;
    while (j < s.size() && s[j] != '.' &&
           !(is_digit(s[j - 1]) && is_lower_alpha(s[j]) && match_token(s, j))) {
      ++j;
    }
    parts.push_back({s.substr(i, j - i), std::nullopt});
    i = j;
  }
  return parts;
}

// Merges repeated mentions of one kind; nullopt (with `conflict` set) when they disagree.
template <class T, class Same, class Merge>
std::optional<T> merge_all(const std::vector<T>& values, Same same, Merge merge, bool& conflict) {
  conflict = false;
  if (values.empty()) return std::nullopt;
  T acc = values.front();
  for (std::size_t k = 1; k < values.size(); ++k) {
    if (!same(acc, values[k])) {
      conflict = true;
      return std::nullopt;
    }
    acc = merge(acc, values[k]);
  }
  return acc;
}

// ---- requirements ----------------------------------------------------------------------------

using SeriesBound = std::pair<std::int64_t, std::int64_t>;
constexpr std::int64_t kUnbounded = std::numeric_limits<std::int64_t>::max();

std::string normalize_project(std::string_view name) {
  std::string out;
  bool in_sep = false;
  for (const char c : name) {
    if (c == '-' || c == '_' || c == '.') {
      if (!in_sep) out += '-';
      in_sep = true;
    } else {
      out += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
      in_sep = false;
    }
  }
  return out;
}

bool is_name_char(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '_' ||
         c == '.';
}

// Narrows [lo, hi] (inclusive, in torch series) by one specifier clause. Returns false when
// the clause is ignored: leaving a clause out only widens the allowed set, so a single series
// found without it is still the only one.
bool apply_clause(std::string_view clause, SeriesBound& lo, SeriesBound& hi) {
  static constexpr std::string_view kOps[] = {"===", "~=", "==", "!=", "<=", ">=", "<", ">"};
  std::string_view op;
  for (const auto candidate : kOps) {
    if (clause.starts_with(candidate)) {
      op = candidate;
      break;
    }
  }
  if (op.empty() || op == "!=") return false;
  std::string_view v = trim(clause.substr(op.size()));
  const bool wildcard = v.ends_with(".*");
  if (wildcard) {
    if (op != "==") return false;
    v.remove_suffix(2);
  }
  if (const auto plus = v.find('+'); plus != std::string_view::npos) v = v.substr(0, plus);
  if (v.starts_with('v')) v.remove_prefix(1);
  std::vector<std::int64_t> comps;
  for (const auto piece : split(v, '.')) {
    auto n = to_int(piece);
    if (!n) return false;
    comps.push_back(*n);
  }
  if (comps.empty()) return false;
  const std::int64_t major = comps[0];
  const std::int64_t minor = comps.size() > 1 ? comps[1] : 0;
  const bool beyond_minor_zero =
      std::all_of(comps.begin() + std::min<std::ptrdiff_t>(2, std::ssize(comps)), comps.end(),
                  [](std::int64_t c) { return c == 0; });
  auto narrow = [&](SeriesBound l, SeriesBound h) {
    lo = std::max(lo, l);
    hi = std::min(hi, h);
  };
  if (op == "==" || op == "===") {
    if (wildcard && comps.size() == 1) {
      narrow({major, 0}, {major, kUnbounded});
    } else {
      narrow({major, minor}, {major, minor});
    }
  } else if (op == "~=") {
    if (comps.size() < 2) return false;
    if (comps.size() == 2) {
      narrow({major, minor}, {major, kUnbounded});
    } else {
      narrow({major, minor}, {major, minor});
    }
  } else if (op == ">=" || op == ">") {
    // `>2.8` still admits 2.8.1, so both bound the series from below the same way.
    narrow({major, minor}, {kUnbounded, kUnbounded});
  } else if (op == "<=" || !beyond_minor_zero) {  // `<2.8.5` admits 2.8.0
    narrow({0, 0}, {major, minor});
  } else if (minor > 0) {
    narrow({0, 0}, {major, minor - 1});
  } else if (major > 0) {
    narrow({0, 0}, {major - 1, kUnbounded});
  } else {
    narrow({0, 0}, {-1, -1});
  }
  return true;
}

}  // namespace

// ---- public ----------------------------------------------------------------------------------

std::string TorchSeries::str() const {
  return std::to_string(major) + "." + std::to_string(minor);
}

bool default_cxx11_abi(TorchSeries series) {
  return series >= TorchSeries{2, 7};
}

bool VariantHints::selects() const {
  return backend != Backend::none || torch.has_value() || cxx11_abi.has_value();
}

std::string VariantHints::backend_label() const {
  switch (backend) {
    case Backend::cuda:
      return "cu" + std::to_string(cuda_major.value_or(0)) +
             (cuda_minor ? std::to_string(*cuda_minor) : std::string());
    case Backend::rocm:
      return "rocm" + std::to_string(rocm_major.value_or(0)) +
             (rocm_minor ? "." + std::to_string(*rocm_minor) : std::string());
    case Backend::cpu:
      return "cpu";
    case Backend::none:
      break;
  }
  return "";
}

std::string VariantHints::describe() const {
  std::vector<std::string> parts;
  switch (backend) {
    case Backend::cuda:
      parts.push_back(cuda_tag(cuda_major.value_or(0), cuda_minor));
      break;
    case Backend::rocm:
      parts.push_back(rocm_tag(rocm_major.value_or(0), rocm_minor));
      break;
    case Backend::cpu:
      parts.emplace_back("cpu");
      break;
    case Backend::none:
      break;
  }
  if (torch) parts.push_back(torch_tag(*torch));
  if (cxx11_abi) parts.push_back(abi_tag(*cxx11_abi));
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) out += ' ';
    out += p;
  }
  return out;
}

VariantHints parse_local_label(std::string_view label) {
  // One canonical alphabet: label normalization lower-cases and turns '-'/'_' into '.'; the
  // same mapping for every other byte keeps the scanner total on garbage.
  std::string s;
  s.reserve(label.size());
  for (const char c : label) {
    if (c >= 'A' && c <= 'Z') {
      s += static_cast<char>(c - 'A' + 'a');
    } else if (is_digit(c) || is_lower_alpha(c)) {
      s += c;
    } else {
      s += '.';
    }
  }
  const std::vector<Part> parts = split_label(s);

  std::vector<MajorMinor> cudas;
  std::vector<MajorMinor> rocms;
  std::vector<TorchSeries> torches;
  std::vector<bool> abis;
  std::size_t cpus = 0;
  for (const auto& p : parts) {
    if (!p.token) continue;
    switch (p.token->kind) {
      case Kind::cuda:
        cudas.push_back(p.token->version);
        break;
      case Kind::rocm:
        rocms.push_back(p.token->version);
        break;
      case Kind::cpu:
        ++cpus;
        break;
      case Kind::torch:
        torches.push_back(p.token->torch);
        break;
      case Kind::abi:
        abis.push_back(p.token->abi);
        break;
    }
  }

  // `cuda11` next to `cu118` agrees (11 and 11.8); the more precise one is kept.
  auto same_version = [](const MajorMinor& a, const MajorMinor& b) {
    return a.major == b.major && (!a.minor || !b.minor || a.minor == b.minor);
  };
  auto merge_version = [](const MajorMinor& a, const MajorMinor& b) { return a.minor ? a : b; };
  auto same = [](const auto& a, const auto& b) { return a == b; };
  auto keep = [](const auto& a, const auto&) { return a; };

  VariantHints h;
  bool cuda_conflict = false;
  bool rocm_conflict = false;
  bool torch_conflict = false;
  bool abi_conflict = false;
  const auto cuda = merge_all(cudas, same_version, merge_version, cuda_conflict);
  const auto rocm = merge_all(rocms, same_version, merge_version, rocm_conflict);
  const int backend_kinds = (cudas.empty() ? 0 : 1) + (rocms.empty() ? 0 : 1) + (cpus ? 1 : 0);
  const bool backend_conflict = cuda_conflict || rocm_conflict || backend_kinds > 1;
  if (!backend_conflict) {
    if (cuda) {
      h.backend = Backend::cuda;
      h.cuda_major = cuda->major;
      h.cuda_minor = cuda->minor;
    } else if (rocm) {
      h.backend = Backend::rocm;
      h.rocm_major = rocm->major;
      h.rocm_minor = rocm->minor;
    } else if (cpus) {
      h.backend = Backend::cpu;
    }
  }
  h.torch = merge_all(torches, same, keep, torch_conflict);
  if (const auto abi = merge_all(abis, same, keep, abi_conflict)) h.cxx11_abi = *abi;

  for (const auto& p : parts) {
    bool dropped = !p.token;
    if (p.token) {
      switch (p.token->kind) {
        case Kind::cuda:
        case Kind::rocm:
        case Kind::cpu:
          dropped = backend_conflict;
          break;
        case Kind::torch:
          dropped = torch_conflict;
          break;
        case Kind::abi:
          dropped = abi_conflict;
          break;
      }
    }
    if (dropped) h.extra.emplace_back(p.text);
  }
  return h;
}

std::optional<TorchSeries> torch_series_of_version(std::string_view version) {
  const std::size_t e1 = digit_run_end(version, 0);
  if (e1 == 0 || e1 >= version.size() || version[e1] != '.') return std::nullopt;
  const std::size_t e2 = digit_run_end(version, e1 + 1);
  const auto major = to_int(version.substr(0, e1));
  const auto minor = to_int(version.substr(e1 + 1, e2 - (e1 + 1)));
  if (!major || !minor) return std::nullopt;
  return TorchSeries{*major, *minor};
}

namespace {

// The torch series [lo, hi] that unconditional torch requirements admit; `used` gets the
// requirements that narrowed it, joined with ", " (empty: none did).
void torch_bounds(std::span<const std::string> requires_dist, SeriesBound& lo, SeriesBound& hi,
                  std::string& used) {
  lo = {0, 0};
  hi = {kUnbounded, kUnbounded};
  for (const auto& line : requires_dist) {
    std::string_view r = trim(line);
    if (const auto semi = r.find(';'); semi != std::string_view::npos) {
      // A marker makes the requirement conditional; we cannot know whether it applies.
      if (!trim(r.substr(semi + 1)).empty()) continue;
      r = trim(r.substr(0, semi));
    }
    std::size_t n = 0;
    while (n < r.size() && is_name_char(r[n])) ++n;
    if (normalize_project(r.substr(0, n)) != "torch") continue;
    std::string_view spec = trim(r.substr(n));
    if (spec.starts_with('[')) {
      const auto close = spec.find(']');
      if (close == std::string_view::npos) continue;
      spec = trim(spec.substr(close + 1));
    }
    if (spec.starts_with('@')) continue;
    if (spec.starts_with('(')) {
      if (!spec.ends_with(')')) continue;
      spec = trim(spec.substr(1, spec.size() - 2));
    }
    bool constrained = false;
    for (const auto clause : split(spec, ',')) {
      if (apply_clause(trim(clause), lo, hi)) constrained = true;
    }
    if (constrained) {
      if (!used.empty()) used += ", ";
      used += r;
    }
  }
}

}  // namespace

std::optional<TorchPin> torch_pin_from_requirements(std::span<const std::string> requires_dist) {
  SeriesBound lo;
  SeriesBound hi;
  std::string used;
  torch_bounds(requires_dist, lo, hi, used);
  if (used.empty() || lo != hi || hi.second == kUnbounded) return std::nullopt;
  return TorchPin{TorchSeries{static_cast<int>(lo.first), static_cast<int>(lo.second)},
                  std::move(used)};
}

std::optional<TorchSeries> torch_minimum_from_requirements(
    std::span<const std::string> requires_dist) {
  SeriesBound lo;
  SeriesBound hi;
  std::string used;
  torch_bounds(requires_dist, lo, hi, used);
  if (used.empty() || lo == SeriesBound{0, 0} || lo > hi) return std::nullopt;
  return TorchSeries{static_cast<int>(lo.first), static_cast<int>(lo.second)};
}

std::optional<bool> effective_cxx11_abi(const VariantHints& hints, std::string_view platform_tag) {
  if (hints.cxx11_abi || !hints.torch) return hints.cxx11_abi;
  const bool linux_binary =
      platform_tag.starts_with("linux_") || platform_tag.starts_with("manylinux");
  if (linux_binary && default_cxx11_abi(*hints.torch)) return true;
  return std::nullopt;
}

Result<VariantHints> hints_for_distribution(std::string_view normalized_project,
                                            std::string_view public_version,
                                            std::string_view local_label,
                                            std::span<const std::string> requires_dist) {
  VariantHints h = parse_local_label(local_label);
  if (local_label.starts_with('+')) local_label.remove_prefix(1);
  const std::string shown_label = "'+" + sanitize_for_log(local_label, 100) + "'";
  if (normalized_project == "torch") {
    const auto own = torch_series_of_version(public_version);
    if (!own) return h;
    if (h.torch && *h.torch != *own) {
      return make_error(Errc::invalid, "local version label " + shown_label + " says torch " +
                                           h.torch->str() + " but the torch version " +
                                           sanitize_for_log(public_version, 100) + " is torch " +
                                           own->str());
    }
    h.torch = own;
    return h;
  }
  const auto pin = torch_pin_from_requirements(requires_dist);
  if (!pin) return h;
  if (h.torch && *h.torch != pin->series) {
    return make_error(Errc::invalid, "local version label " + shown_label + " says torch " +
                                         h.torch->str() + " but Requires-Dist pins " +
                                         sanitize_for_log(pin->requirement, 200) + " (torch " +
                                         pin->series.str() + ")");
  }
  h.torch = pin->series;
  return h;
}

}  // namespace wf::core
