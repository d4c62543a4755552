#include <algorithm>
#include <compare>
#include <map>
#include <tuple>
#include <utility>

#include "core/label_scan.hpp"
#include "wheelforge/core/variant.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::core {
namespace {

using namespace label_scan;

// ---- selection -------------------------------------------------------------------------------

bool version_eligible(std::optional<int> view_major, std::optional<int> view_minor,
                      std::optional<int> wheel_major, std::optional<int> wheel_minor) {
  if (!view_major) return true;
  if (!wheel_major || *wheel_major != *view_major) return false;
  return !view_minor || !wheel_minor || *wheel_minor <= *view_minor;
}

// The hints with the ABI the wheel effectively has (a Linux torch 2.7+ build without an ABI in
// its label has the C++11 ABI).
VariantHints effective(const Candidate& c) {
  VariantHints h = c.hints;
  if (c.linux_binary) h.cxx11_abi = effective_cxx11_abi(h, "linux_");
  return h;
}

bool eligible(const ViewSelector& view, const Candidate& c) {
  const VariantHints h = effective(c);
  if (!h.selects()) return true;
  if (view.torch && h.torch && *view.torch != *h.torch) return false;
  if (view.torch && !h.torch && c.torch_from && *view.torch < *c.torch_from) return false;
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
  r.abi = abi_rank(view, effective(c));
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
    if (!eligible(view, c)) continue;
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
