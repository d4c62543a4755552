#include "wheelforge/core/torch_env.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <numeric>
#include <tuple>

#include "core/label_scan.hpp"
#include "wheelforge/core/version.hpp"

namespace wf::core {
namespace {

// PyTorch's wheels on PyPI for Linux x86_64, per series: the CUDA that `pip install torch`
// brings there. docs/pypi-torch-cuda.md names the source of every row; 2.14 is left out on
// purpose (the sources disagree), see there.
constexpr std::array<PypiDefaultCuda, 14> kPypiDefaultCuda{{
    {{2, 0}, {11, 7}},
    {{2, 1}, {12, 1}},
    {{2, 2}, {12, 1}},
    {{2, 3}, {12, 1}},
    {{2, 4}, {12, 1}},
    {{2, 5}, {12, 4}},
    {{2, 6}, {12, 4}},
    {{2, 7}, {12, 6}},
    {{2, 8}, {12, 8}},
    {{2, 9}, {12, 8}},
    {{2, 10}, {12, 8}},
    {{2, 11}, {13, 0}},
    {{2, 12}, {13, 0}},
    {{2, 13}, {13, 0}},
}};

// A view can name CUDA majors 1-19 (cu92 ... cu130); see cuda_from_digits in variant.cpp.
constexpr int kMaxCudaMajor = 19;
constexpr int kMaxMinor = 99;
constexpr std::size_t kMaxShown = 64;

using label_scan::is_digit;

// At most two digits, so it always fits.
int digits_value(std::string_view digits) {
  int v = 0;
  for (const char c : digits) v = v * 10 + (c - '0');
  return v;
}

std::string shown_value(std::string_view value) {
  std::string out;
  for (const char c : value.substr(0, kMaxShown)) {
    out += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  if (value.size() > kMaxShown) out += "...";
  return out;
}

bool means_none(std::string_view v) {
  return v.empty() || v == "None" || v == "none" || v == "null";
}

// Reads "M", "M.N" or "M.N.anything" where M and N are short digit runs; the rest after the
// second dot (CUDA patch, HIP build number and hash) is ignored.
std::optional<BackendValue> leading_major_minor(std::string_view v, bool rest_allowed) {
  std::size_t i = 0;
  while (i < v.size() && is_digit(v[i])) ++i;
  if (i == 0 || i > 2) return std::nullopt;
  BackendValue out;
  out.major = digits_value(v.substr(0, i));
  if (i == v.size()) return out;
  if (v[i] != '.') return std::nullopt;
  const std::size_t start = ++i;
  while (i < v.size() && is_digit(v[i])) ++i;
  if (i == start || i - start > 2) return std::nullopt;
  out.minor = digits_value(v.substr(start, i - start));
  if (i == v.size()) return out;
  if (!rest_allowed || v[i] != '.' || i + 1 == v.size()) return std::nullopt;
  return out;
}

std::string cuda_forms() {
  return "expected torch.version.cuda, e.g. 12.8 or 13.0 (or cu128), or None for a build "
         "without CUDA";
}

std::string hip_forms() {
  return "expected torch.version.hip, e.g. 6.4.43482-0f2d60242 or 6.4 (or rocm6.4), or None "
         "for a build without ROCm";
}

std::string cuda_str(int major, std::optional<int> minor) {
  return std::to_string(major) + (minor ? "." + std::to_string(*minor) : std::string());
}

std::string label_backend_words(const VariantHints& h) {
  switch (h.backend) {
    case Backend::cuda:
      return "CUDA " + cuda_str(*h.cuda_major, h.cuda_minor);
    case Backend::rocm:
      return "ROCm " + cuda_str(*h.rocm_major, h.rocm_minor);
    case Backend::cpu:
      return "a CPU build";
    case Backend::none:
      break;
  }
  return "no backend";
}

// True when the explicit value and the label name the same version: equal majors, and equal
// minors where both have one.
bool same_version(const BackendValue& v, std::optional<int> major, std::optional<int> minor) {
  return major && v.major == *major && (!v.minor || !minor || *v.minor == *minor);
}

}  // namespace

std::span<const PypiDefaultCuda> pypi_default_cuda_table() {
  return kPypiDefaultCuda;
}

std::optional<CudaVersion> pypi_default_cuda(TorchSeries series) {
  for (const auto& row : kPypiDefaultCuda) {
    if (row.series == series) return row.cuda;
  }
  return std::nullopt;
}

Result<BackendValue> parse_cuda_value(std::string_view value) {
  if (means_none(value)) return BackendValue{true, 0, std::nullopt};
  std::optional<BackendValue> v;
  if (value.starts_with("cu")) {
    const VariantHints h = parse_local_label(value);
    if (h.backend == Backend::cuda && h.extra.empty() && !h.torch && !h.cxx11_abi) {
      v = BackendValue{false, *h.cuda_major, h.cuda_minor};
    }
  } else {
    v = leading_major_minor(value, true);
  }
  if (!v) return make_error(Errc::invalid, "cuda: '" + shown_value(value) + "': " + cuda_forms());
  if (v->major < 1 || v->major > kMaxCudaMajor || v->minor.value_or(0) > kMaxMinor) {
    return make_error(Errc::invalid, "cuda: '" + shown_value(value) +
                                         "': no view names this CUDA version (majors 1 to " +
                                         std::to_string(kMaxCudaMajor) + ")");
  }
  return *v;
}

Result<BackendValue> parse_hip_value(std::string_view value) {
  if (means_none(value)) return BackendValue{true, 0, std::nullopt};
  std::string_view v = value;
  if (v.starts_with("rocm")) v.remove_prefix(4);
  // torch.version.hip is "major.minor.build-hash"; the build number and hash are dropped.
  const std::size_t dash = v.find('-');
  const bool bad_dash =
      dash != std::string_view::npos && (value.starts_with("rocm") || dash + 1 == v.size());
  if (dash != std::string_view::npos) v = v.substr(0, dash);
  auto parsed = leading_major_minor(v, true);
  if (bad_dash || !parsed || parsed->major < 1) {
    return make_error(Errc::invalid, "hip: '" + shown_value(value) + "': " + hip_forms());
  }
  return *parsed;
}

std::string_view backend_source_name(BackendSource source) {
  switch (source) {
    case BackendSource::cuda:
      return "cuda";
    case BackendSource::hip:
      return "hip";
    case BackendSource::label:
      return "label";
    case BackendSource::none_given:
      return "none";
    case BackendSource::pypi_default:
      return "pypi-default";
    case BackendSource::unknown:
      break;
  }
  return "unknown";
}

Result<TorchResolution> resolve_torch(const TorchQuery& query) {
  if (query.version.empty()) {
    return make_error(Errc::invalid,
                      "missing torch=<version>: pass torch.__version__, e.g. torch=2.8.0%2Bcu128");
  }
  auto version = Version::parse(query.version);
  if (!version) return make_error(Errc::invalid, "torch: " + version.error().message);
  const auto series = torch_series_of_version(version->public_str());
  if (!series) {
    return make_error(Errc::invalid, "torch: no major.minor in '" + version->str() + "'");
  }
  TorchResolution r;
  r.selector.torch = *series;

  std::optional<BackendValue> cuda;
  std::optional<BackendValue> hip;
  if (query.cuda) {
    auto v = parse_cuda_value(*query.cuda);
    if (!v) return v.error();
    cuda = *v;
  }
  if (query.hip) {
    auto v = parse_hip_value(*query.hip);
    if (!v) return v.error();
    hip = *v;
  }
  if (query.abi) {
    const std::string_view abi = *query.abi;
    if (abi == "1" || abi == "true" || abi == "True") {
      r.selector.cxx11_abi = true;
    } else if (abi == "0" || abi == "false" || abi == "False") {
      r.selector.cxx11_abi = false;
    } else {
      return make_error(Errc::invalid, "abi: '" + shown_value(abi) +
                                           "': expected 1 or 0 "
                                           "(int(torch._C._GLIBCXX_USE_CXX11_ABI))");
    }
  }

  const bool cuda_named = cuda && !cuda->none;
  const bool hip_named = hip && !hip->none;
  if (cuda_named && hip_named) {
    return make_error(Errc::invalid, "cuda=" + shown_value(*query.cuda) +
                                         " and hip=" + shown_value(*query.hip) +
                                         " name two backends: a torch build has one of them");
  }
  const VariantHints label = parse_local_label(version->local_str());
  // PyTorch's own cxx11-ABI variants say so in the label (2.6.0+cpu.cxx11.abi:
  // docs/torch-labels.md, "The C++ ABI").
  if (!query.abi && label.cxx11_abi) r.selector.cxx11_abi = label.cxx11_abi;
  const std::string label_text = "the torch version " + version->str();

  // An explicit value must agree with what the label says: the same backend and version, or
  // (for cuda=None / hip=None) not that backend.
  auto contradiction = [&](std::string_view param, std::string_view value) {
    return make_error(Errc::invalid, std::string(param) + "=" + shown_value(value) +
                                         " contradicts " + label_text + " (" +
                                         label_backend_words(label) +
                                         "): pass both values from the same Python");
  };
  if (label.backend != Backend::none) {
    if (cuda) {
      const bool label_cuda = label.backend == Backend::cuda;
      if (cuda->none ? label_cuda
                     : !label_cuda || !same_version(*cuda, label.cuda_major, label.cuda_minor)) {
        return contradiction("cuda", *query.cuda);
      }
    }
    if (hip) {
      const bool label_rocm = label.backend == Backend::rocm;
      if (hip->none ? label_rocm
                    : !label_rocm || !same_version(*hip, label.rocm_major, label.rocm_minor)) {
        return contradiction("hip", *query.hip);
      }
    }
  }

  if (cuda_named) {
    r.selector.backend = Backend::cuda;
    r.selector.cuda_major = cuda->major;
    // The label can be more precise than a major-only value (12 with +cu128).
    r.selector.cuda_minor = cuda->minor ? cuda->minor : label.cuda_minor;
    r.source = BackendSource::cuda;
  } else if (hip_named) {
    r.selector.backend = Backend::rocm;
    r.selector.rocm_major = hip->major;
    r.selector.rocm_minor = hip->minor ? hip->minor : label.rocm_minor;
    r.source = BackendSource::hip;
  } else if (label.backend != Backend::none) {
    r.selector.backend = label.backend;
    r.selector.cuda_major = label.cuda_major;
    r.selector.cuda_minor = label.cuda_minor;
    r.selector.rocm_major = label.rocm_major;
    r.selector.rocm_minor = label.rocm_minor;
    r.source = BackendSource::label;
  } else if (cuda && cuda->none) {
    r.selector.backend = Backend::cpu;
    r.source = BackendSource::none_given;
    r.notes.emplace_back("cuda=None: a torch build without CUDA, so the CPU view");
  } else if (const auto d = pypi_default_cuda(*series)) {
    r.selector.backend = Backend::cuda;
    r.selector.cuda_major = d->major;
    r.selector.cuda_minor = d->minor;
    r.source = BackendSource::pypi_default;
    r.notes.push_back("no cuda= given and " + label_text + " names no CUDA: assumed CUDA " +
                      d->str() + ", the CUDA of PyTorch " + series->str() +
                      "'s wheels on PyPI (Linux x86_64); pass cuda=<torch.version.cuda> if "
                      "this torch came from elsewhere");
  } else {
    r.source = BackendSource::unknown;
    r.notes.push_back("no cuda= given, " + label_text + " names no CUDA, and torch " +
                      series->str() +
                      " is not in wheelforge's table of the CUDA of PyTorch's PyPI wheels: the "
                      "view selects by torch series only (newest CUDA first); pass "
                      "cuda=<torch.version.cuda> to be sure");
  }
  return r;
}

std::vector<std::size_t> nearest_cells(const ViewSelector& wanted,
                                       std::span<const ViewSelector> cells) {
  using Key = std::tuple<int, int, int, int, int, int, int, int>;
  auto series_number = [](const std::optional<TorchSeries>& t) {
    return t ? t->major * 1000 + t->minor : -1;
  };
  auto key_of = [&](const ViewSelector& c) -> Key {
    const bool same_torch = !wanted.torch || !c.torch || *wanted.torch == *c.torch;
    int backend_class = 0;
    int minor_distance = 0;
    if (wanted.backend != c.backend) {
      backend_class = wanted.backend == Backend::none || c.backend == Backend::none ? 1 : 3;
    } else if (c.backend == Backend::cuda || c.backend == Backend::rocm) {
      const bool cuda = c.backend == Backend::cuda;
      const auto wm = cuda ? wanted.cuda_major : wanted.rocm_major;
      const auto cm = cuda ? c.cuda_major : c.rocm_major;
      const auto wn = cuda ? wanted.cuda_minor : wanted.rocm_minor;
      const auto cn = cuda ? c.cuda_minor : c.rocm_minor;
      if (wm != cm) {
        backend_class = 2;
      } else if (wn && cn) {
        minor_distance = std::abs(*wn - *cn);
      }
    }
    const int torch_distance = wanted.torch && c.torch
                                   ? std::abs(series_number(wanted.torch) - series_number(c.torch))
                                   : 0;
    const bool abi_differs = wanted.cxx11_abi && c.cxx11_abi && *wanted.cxx11_abi != *c.cxx11_abi;
    const int newer_backend = c.backend == Backend::cuda
                                  ? c.cuda_major.value_or(0) * 100 + c.cuda_minor.value_or(0)
                                  : (c.backend == Backend::rocm
                                         ? c.rocm_major.value_or(0) * 100 + c.rocm_minor.value_or(0)
                                         : 0);
    return {
        same_torch ? 0 : 1,  backend_class,           minor_distance, torch_distance,
        abi_differs ? 1 : 0, -series_number(c.torch), -newer_backend, static_cast<int>(c.backend)};
  };
  std::vector<std::size_t> order(cells.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::vector<Key> keys;
  keys.reserve(cells.size());
  for (const auto& c : cells) keys.push_back(key_of(c));
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (keys[a] != keys[b]) return keys[a] < keys[b];
    return cells[a].path() < cells[b].path();
  });
  return order;
}

}  // namespace wf::core
