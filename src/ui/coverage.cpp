#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "ui/internal.hpp"
#include "wheelforge/core/version.hpp"
#include "wheelforge/ui/pages.hpp"

namespace wf::ui {
namespace {

// Sorts backends as the table shows them: CPU, then CUDA, then ROCm, each by version with a
// major-only label (cu12) before its minors.
using BackendKey = std::tuple<int, int, int>;

BackendKey backend_key(const core::VariantHints& h) {
  switch (h.backend) {
    case core::Backend::cpu:
      return {1, 0, 0};
    case core::Backend::cuda:
      return {2, h.cuda_major.value_or(0), h.cuda_minor.value_or(-1)};
    case core::Backend::rocm:
      return {3, h.rocm_major.value_or(0), h.rocm_minor.value_or(-1)};
    case core::Backend::none:
      break;
  }
  return {0, 0, 0};
}

}  // namespace

std::string public_version_of(const core::FileRecord& file) {
  auto v = core::Version::parse(file.version);
  return v ? v->public_str() : file.version;
}

std::pair<int, int> python_sort_key(std::string_view v) {
  int major = 0;
  int minor = -1;
  std::size_t i = 0;
  while (i < v.size() && v[i] >= '0' && v[i] <= '9') major = major * 10 + (v[i++] - '0');
  if (i < v.size() && v[i] == '.') {
    minor = 0;
    ++i;
    while (i < v.size() && v[i] >= '0' && v[i] <= '9') minor = minor * 10 + (v[i++] - '0');
  }
  return {major, minor};
}

void sort_pythons(std::vector<std::string>& pythons) {
  std::sort(pythons.begin(), pythons.end(), [](const std::string& a, const std::string& b) {
    const auto ka = python_sort_key(a);
    const auto kb = python_sort_key(b);
    return ka != kb ? ka < kb : a < b;
  });
  pythons.erase(std::unique(pythons.begin(), pythons.end()), pythons.end());
}

std::vector<std::string> python_versions_of(const core::FileRecord& file) {
  std::vector<std::string> out;
  const bool abi3 = file.tags.abi_tag == "abi3";
  for (const auto& tag : file.tags.python_tags()) {
    const std::string_view t = tag;
    const bool known =
        t.size() >= 3 && (t.starts_with("cp") || t.starts_with("py")) &&
        std::all_of(t.begin() + 2, t.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!known) {
      out.push_back(tag);
      continue;
    }
    const std::string_view digits = t.substr(2);
    std::string v(digits.substr(0, 1));
    if (digits.size() > 1) v += "." + std::string(digits.substr(1));
    if (abi3 && digits.size() > 1) v += "+";
    out.push_back(std::move(v));
  }
  sort_pythons(out);
  return out;
}

Coverage coverage_of(std::span<const core::FileRecord* const> files,
                     std::string_view public_version) {
  Coverage c;
  std::set<std::optional<core::TorchSeries>> torch;
  std::map<BackendKey, std::string> backends;
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> cells;
  // A stable-ABI build without a series of its own spans every row from its minimum on.
  const auto span_of = [](const core::FileRecord& f) -> std::optional<core::TorchSeries> {
    if (f.hints.torch || !f.binaries) return std::nullopt;
    return f.binaries->torch_from;
  };
  std::vector<const core::FileRecord*> wheels;
  for (const core::FileRecord* f : files) {
    if (f->kind != core::DistKind::wheel || public_version_of(*f) != public_version) continue;
    if (!f->hints.selects()) {
      c.generic.push_back(f->filename);
      continue;
    }
    wheels.push_back(f);
    const auto from = span_of(*f);
    torch.insert(from ? from : f->hints.torch);
  }
  for (const core::FileRecord* f : wheels) {
    const std::string backend = f->hints.backend_label();
    backends.emplace(backend_key(f->hints), backend);
    std::vector<std::string> rows;
    const auto from = span_of(*f);
    if (from) {
      for (const auto& t : torch) {
        if (t && !(*t < *from)) rows.push_back(t->str());
      }
    } else {
      rows.push_back(f->hints.torch ? f->hints.torch->str() : std::string());
    }
    for (const auto& row : rows) {
      auto& cell = cells[{row, backend}];
      for (auto& py : python_versions_of(*f)) {
        // A series-bound build of the same Python may share a spanned cell.
        if (!from || std::find(cell.begin(), cell.end(), py) == cell.end()) {
          cell.push_back(std::move(py));
        }
      }
    }
  }
  for (const auto& t : torch) c.torch.push_back(t ? t->str() : std::string());
  for (const auto& [key, label] : backends) c.backends.push_back(label);
  c.cells.resize(c.torch.size());
  for (std::size_t r = 0; r < c.torch.size(); ++r) {
    c.cells[r].resize(c.backends.size());
    for (std::size_t col = 0; col < c.backends.size(); ++col) {
      const auto it = cells.find({c.torch[r], c.backends[col]});
      if (it == cells.end()) continue;
      c.cells[r][col].pythons = it->second;
      sort_pythons(c.cells[r][col].pythons);
    }
  }
  return c;
}

}  // namespace wf::ui
