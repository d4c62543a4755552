#include "wheelforge/core/variant.hpp"

#include <algorithm>
#include <iterator>
#include <limits>
#include <map>
#include <tuple>
#include <utility>

#include "wheelforge/util/strings.hpp"

namespace wf::core {
namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_lower_alpha(char c) {
  return c >= 'a' && c <= 'z';
}

// Digit runs in labels are short; anything longer than 9 digits would not fit an int and is
// never a version component, so it is simply "not a number".
std::optional<int> to_int(std::string_view digits) {
  if (digits.empty() || digits.size() > 9) return std::nullopt;
  int v = 0;
  for (const char c : digits) {
    if (!is_digit(c)) return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

std::size_t digit_run_end(std::string_view s, std::size_t i) {
  while (i < s.size() && is_digit(s[i])) ++i;
  return i;
}

bool has_at(std::string_view s, std::size_t i, std::string_view word) {
  return i <= s.size() && s.substr(i).starts_with(word);
}

struct MajorMinor {
  int major = 0;
  std::optional<int> minor;
};

// CUDA majors 10-19 are written with two digits and 1-9 with one (cu92, cu102, cu118, cu128),
// so the first digit tells where the major ends (docs/torch-labels.md, "CUDA in labels").
std::optional<MajorMinor> cuda_from_digits(std::string_view d) {
  if (d.empty() || d.size() > 4 || d[0] == '0') return std::nullopt;
  const std::size_t major_len = d[0] == '1' ? 2 : 1;
  if (d.size() < major_len || d.size() - major_len > 2) return std::nullopt;
  MajorMinor mm{*to_int(d.substr(0, major_len)), std::nullopt};
  if (d.size() > major_len) mm.minor = to_int(d.substr(major_len));
  return mm;
}

std::string cuda_tag(int major, std::optional<int> minor) {
  std::string out = "cu" + std::to_string(major);
  if (minor) out += std::to_string(*minor);
  return out;
}

std::string rocm_tag(int major, std::optional<int> minor) {
  std::string out = "rocm" + std::to_string(major);
  if (minor) out += "." + std::to_string(*minor);
  return out;
}

std::string torch_tag(TorchSeries t) {
  return "torch" + t.str();
}
std::string abi_tag(bool abi) {
  return abi ? "cxx11abi1" : "cxx11abi0";
}

// ---- label tokens ----------------------------------------------------------------------------

enum class Kind { cuda, cpu, rocm, torch, abi };

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

// A dotted version `X.Y[.Z]` at p: X and Y of at most two digits, a patch of at most three.
// Returns (major, minor, end) or nullopt when p does not start one.
struct Dotted {
  int major = 0;
  int minor = 0;
  std::size_t end = 0;
};
std::optional<Dotted> match_dotted(std::string_view s, std::size_t p) {
  const std::size_t e1 = digit_run_end(s, p);
  if (e1 == p || e1 - p > 2 || e1 + 1 >= s.size() || s[e1] != '.' || !is_digit(s[e1 + 1])) {
    return std::nullopt;
  }
  const std::size_t e2 = digit_run_end(s, e1 + 1);
  if (e2 - (e1 + 1) > 2) return std::nullopt;
  Dotted d{*to_int(s.substr(p, e1 - p)), *to_int(s.substr(e1 + 1, e2 - (e1 + 1))), e2};
  if (e2 + 1 < s.size() && s[e2] == '.' && is_digit(s[e2 + 1])) {
    const std::size_t e3 = digit_run_end(s, e2 + 1);
    if (e3 - (e2 + 1) <= 3) d.end = e3;
  }
  return d;
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

// ---- selection -------------------------------------------------------------------------------

bool version_eligible(std::optional<int> view_major, std::optional<int> view_minor,
                      std::optional<int> wheel_major, std::optional<int> wheel_minor) {
  if (!view_major) return true;
  if (!wheel_major || *wheel_major != *view_major) return false;
  return !view_minor || !wheel_minor || *wheel_minor <= *view_minor;
}

bool eligible(const ViewSelector& view, const VariantHints& h) {
  if (!h.selects()) return true;
  if (view.torch && h.torch && *view.torch != *h.torch) return false;
  if (view.cxx11_abi && h.cxx11_abi && *view.cxx11_abi != *h.cxx11_abi) return false;
  if (h.backend == Backend::none) return true;
  switch (view.backend) {
    case Backend::none:
      return true;
    case Backend::cpu:
      return h.backend == Backend::cpu;
    case Backend::cuda:
      return h.backend == Backend::cuda &&
             version_eligible(view.cuda_major, view.cuda_minor, h.cuda_major, h.cuda_minor);
    case Backend::rocm:
      return h.backend == Backend::rocm &&
             version_eligible(view.rocm_major, view.rocm_minor, h.rocm_major, h.rocm_minor);
  }
  return false;
}

struct Rank {
  int not_yanked = 0;
  int torch_known = 0;
  TorchSeries torch_key;
  int abi = 0;
  int backend_class = 0;
  std::int64_t backend_detail = 0;
  // NOLINTNEXTLINE(modernize-use-nullptr): clang-tidy 14 misreads a defaulted <=>
  friend auto operator<=>(const Rank&, const Rank&) = default;
};

// Assumes eligibility: same major, minor not above the view's.
std::pair<int, std::int64_t> versioned_backend_rank(std::optional<int> view_minor,
                                                    std::optional<int> wheel_minor) {
  if (view_minor) {
    if (!wheel_minor) return {1, 0};
    if (*wheel_minor == *view_minor) return {3, 0};
    return {2, *wheel_minor};
  }
  if (!wheel_minor) return {3, 0};
  return {2, -static_cast<std::int64_t>(*wheel_minor)};
}

std::int64_t newest_first(std::optional<int> major, std::optional<int> minor) {
  return static_cast<std::int64_t>(major.value_or(0)) * 1000 + minor.value_or(-1);
}

std::pair<int, std::int64_t> backend_rank(const ViewSelector& view, const VariantHints& h) {
  if (view.backend == Backend::none) {
    switch (h.backend) {
      case Backend::cuda:
        return {3, newest_first(h.cuda_major, h.cuda_minor)};
      case Backend::rocm:
        return {2, newest_first(h.rocm_major, h.rocm_minor)};
      case Backend::none:
        return {1, 0};
      case Backend::cpu:
        return {0, 0};
    }
  }
  if (h.backend == Backend::none) return {0, 0};
  switch (view.backend) {
    case Backend::cuda:
      return versioned_backend_rank(view.cuda_minor, h.cuda_minor);
    case Backend::rocm:
      return versioned_backend_rank(view.rocm_minor, h.rocm_minor);
    case Backend::cpu:
    case Backend::none:
      break;
  }
  return {1, 0};
}

int abi_rank(const ViewSelector& view, const VariantHints& h) {
  if (view.cxx11_abi) return h.cxx11_abi ? 1 : 0;
  const auto series = view.torch ? view.torch : h.torch;
  if (!series || !h.cxx11_abi) return 1;
  return *h.cxx11_abi == default_cxx11_abi(*series) ? 2 : 0;
}

Rank rank_of(const ViewSelector& view, const Candidate& c) {
  Rank r;
  r.not_yanked = c.yanked ? 0 : 1;
  r.torch_known = c.hints.torch ? 1 : 0;
  if (!view.torch && c.hints.torch) r.torch_key = *c.hints.torch;
  r.abi = abi_rank(view, c.hints);
  std::tie(r.backend_class, r.backend_detail) = backend_rank(view, c.hints);
  return r;
}

// A build tag sorts as (number, rest); no build tag sorts first (docs/packaging.md, "Build
// tags").
std::strong_ordering compare_build_tags(std::string_view a, std::string_view b) {
  if (a.empty() || b.empty()) return !a.empty() <=> !b.empty();
  auto split_tag = [](std::string_view t) {
    std::size_t n = 0;
    while (n < t.size() && is_digit(t[n])) ++n;
    std::string_view num = t.substr(0, n);
    while (num.size() > 1 && num.front() == '0') num.remove_prefix(1);
    return std::pair{num, t.substr(n)};
  };
  const auto [an, ar] = split_tag(a);
  const auto [bn, br] = split_tag(b);
  if (const auto c = an.size() <=> bn.size(); std::is_neq(c)) return c;
  if (const auto c = an <=> bn; std::is_neq(c)) return c;
  return ar <=> br;
}

bool better(const ViewSelector& view, const Candidate& a, const Candidate& b) {
  if (const auto c = rank_of(view, a) <=> rank_of(view, b); std::is_neq(c)) return std::is_gt(c);
  if (const auto c = compare_build_tags(a.build_tag, b.build_tag); std::is_neq(c)) {
    return std::is_gt(c);
  }
  if (a.upload_time != b.upload_time) return a.upload_time > b.upload_time;
  return a.filename > b.filename;
}

// ---- view segments ---------------------------------------------------------------------------

constexpr std::string_view kValidForms =
    "valid view segments, in any order and each kind at most once: cuXY or cuXYZ (cu12, cu126, "
    "cu128, cu130), cpu, rocmX.Y (rocm6.4), torchX.Y (torch2.8), cxx11abi0 or cxx11abi1; cpu, "
    "cuXY and rocmX.Y exclude each other";

// Parses one segment into `out` (only the fields of its kind); false when not canonical.
bool parse_segment(std::string_view seg, ViewSelector& out, Kind& kind) {
  if (seg == "cpu") {
    kind = Kind::cpu;
    out.backend = Backend::cpu;
    return true;
  }
  if (seg == "cxx11abi0" || seg == "cxx11abi1") {
    kind = Kind::abi;
    out.cxx11_abi = seg.back() == '1';
    return true;
  }
  if (seg.starts_with("cu")) {
    const std::string_view digits = seg.substr(2);
    if (digit_run_end(digits, 0) != digits.size()) return false;
    const auto mm = cuda_from_digits(digits);
    if (!mm || cuda_tag(mm->major, mm->minor) != seg) return false;
    kind = Kind::cuda;
    out.backend = Backend::cuda;
    out.cuda_major = mm->major;
    out.cuda_minor = mm->minor;
    return true;
  }
  const bool rocm = seg.starts_with("rocm");
  if (rocm || seg.starts_with("torch")) {
    const std::string_view rest = seg.substr(rocm ? 4 : 5);
    const auto d = match_dotted(rest, 0);
    if (!d || d->end != rest.size()) return false;
    if (rocm) {
      if (rocm_tag(d->major, d->minor) != seg) return false;
      kind = Kind::rocm;
      out.backend = Backend::rocm;
      out.rocm_major = d->major;
      out.rocm_minor = d->minor;
    } else {
      const TorchSeries t{d->major, d->minor};
      if (torch_tag(t) != seg) return false;
      kind = Kind::torch;
      out.torch = t;
    }
    return true;
  }
  return false;
}

// The canonical spelling a tolerant reading of a bad segment points at, if it is a view.
std::optional<std::string> suggest_segment(std::string_view seg) {
  const VariantHints h = parse_local_label(seg);
  if (!h.selects() || !h.extra.empty()) return std::nullopt;
  if (h.backend == Backend::rocm && !h.rocm_minor) return std::nullopt;
  std::string s = h.describe();
  std::replace(s.begin(), s.end(), ' ', '/');
  if (s == seg) return std::nullopt;
  return s;
}

std::string_view kind_word(Kind k) {
  switch (k) {
    case Kind::cuda:
    case Kind::cpu:
    case Kind::rocm:
      return "a backend (cpu, cuXY or rocmX.Y)";
    case Kind::torch:
      return "a torch series";
    case Kind::abi:
      return "a C++ ABI";
  }
  return "";
}

bool is_backend(Kind k) {
  return k == Kind::cuda || k == Kind::cpu || k == Kind::rocm;
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

std::optional<TorchPin> torch_pin_from_requirements(std::span<const std::string> requires_dist) {
  SeriesBound lo{0, 0};
  SeriesBound hi{kUnbounded, kUnbounded};
  std::string used;
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
  if (used.empty() || lo != hi || hi.second == kUnbounded) return std::nullopt;
  return TorchPin{TorchSeries{static_cast<int>(lo.first), static_cast<int>(lo.second)},
                  std::move(used)};
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

std::string ViewSelector::path() const {
  VariantHints h;
  h.backend = backend;
  h.cuda_major = cuda_major;
  h.cuda_minor = cuda_minor;
  h.rocm_major = rocm_major;
  h.rocm_minor = rocm_minor;
  h.torch = torch;
  h.cxx11_abi = cxx11_abi;
  std::string out = h.describe();
  std::replace(out.begin(), out.end(), ' ', '/');
  return out;
}

bool ViewSelector::empty() const {
  return backend == Backend::none && !torch && !cxx11_abi;
}

Result<ViewSelector> parse_view_selector(std::span<const std::string_view> segments) {
  // Enough to show what went wrong without echoing an arbitrarily long request back.
  constexpr std::size_t kMaxReported = 8;
  Problems problems;
  std::size_t unreported = 0;
  auto report = [&](std::string problem) {
    if (problems.list().size() < kMaxReported) {
      problems.add(std::move(problem));
    } else {
      ++unreported;
    }
  };
  ViewSelector out;
  std::optional<std::string_view> seen_backend;
  std::optional<std::string_view> seen_torch;
  std::optional<std::string_view> seen_abi;
  for (const auto seg : segments) {
    const std::string shown = "'" + sanitize_for_log(seg, 64) + "'";
    ViewSelector one;
    Kind kind = Kind::cpu;
    if (seg.empty()) {
      report("empty view segment");
      continue;
    }
    if (!parse_segment(seg, one, kind)) {
      std::string problem = shown + " is not a view segment";
      if (const auto hint = suggest_segment(seg)) problem += " (did you mean '" + *hint + "'?)";
      report(std::move(problem));
      continue;
    }
    auto& seen = is_backend(kind) ? seen_backend : kind == Kind::torch ? seen_torch : seen_abi;
    if (seen) {
      report(shown + " and '" + sanitize_for_log(*seen, 64) + "' both name " +
             std::string(kind_word(kind)));
      continue;
    }
    seen = seg;
    if (is_backend(kind)) {
      out.backend = one.backend;
      out.cuda_major = one.cuda_major;
      out.cuda_minor = one.cuda_minor;
      out.rocm_major = one.rocm_major;
      out.rocm_minor = one.rocm_minor;
    } else if (kind == Kind::torch) {
      out.torch = one.torch;
    } else {
      out.cxx11_abi = one.cxx11_abi;
    }
  }
  if (problems.empty()) return out;
  if (unreported) problems.add("and " + std::to_string(unreported) + " more");
  problems.add(std::string(kValidForms));
  return problems.to_error(Errc::not_found);
}

std::vector<std::size_t> select_for_view(const ViewSelector& view,
                                         std::span<const Candidate> candidates) {
  std::map<std::string_view, std::size_t> best;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const Candidate& c = candidates[i];
    if (!eligible(view, c.hints)) continue;
    const auto [it, inserted] = best.try_emplace(c.group_key, i);
    if (!inserted && better(view, c, candidates[it->second])) it->second = i;
  }
  std::vector<std::size_t> out;
  out.reserve(best.size());
  for (const auto& [key, index] : best) out.push_back(index);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace wf::core
