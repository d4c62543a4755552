// Variant hints and view selectors on arbitrary bytes. The input is split on '\n':
//   line 0: a local version label        line 1: a view path, split on '/'
//   line 2: a normalized project name    line 3: a public version
//   lines 4...: Requires-Dist values
// Checked: the field invariants VariantHints documents, that describe() reads back as the same
// selecting hints, and that an accepted view path is canonical (path() gives back its
// segments, in canonical order) and parses again to the same selector.

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "wheelforge/core/variant.hpp"

namespace {

using wf::core::Backend;
using wf::core::VariantHints;
using wf::core::ViewSelector;

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  while (true) {
    const auto at = s.find(sep);
    out.push_back(s.substr(0, at));
    if (at == std::string_view::npos) return out;
    s.remove_prefix(at + 1);
  }
}

void check_hints(const VariantHints& h, bool round_trip) {
  WF_FUZZ_CHECK(h.cuda_major.has_value() == (h.backend == Backend::cuda));
  WF_FUZZ_CHECK(h.rocm_major.has_value() == (h.backend == Backend::rocm));
  WF_FUZZ_CHECK(!h.cuda_minor || h.cuda_major);
  WF_FUZZ_CHECK(!h.rocm_minor || h.rocm_major);
  WF_FUZZ_CHECK(h.selects() == !h.describe().empty());
  for (const auto& e : h.extra) {
    WF_FUZZ_CHECK(!e.empty());
    for (const char c : e)
      WF_FUZZ_CHECK((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.');
  }
  // describe() spells the selecting hints as a label would: reading it back must give them.
  // (Only for hints read from a label: a torch series taken from a version or a pin may be
  // beyond what a label can spell.)
  if (!round_trip) return;
  const VariantHints back = wf::core::parse_local_label(h.describe());
  WF_FUZZ_CHECK(back.backend == h.backend);
  WF_FUZZ_CHECK(back.cuda_major == h.cuda_major);
  WF_FUZZ_CHECK(back.cuda_minor == h.cuda_minor);
  WF_FUZZ_CHECK(back.rocm_major == h.rocm_major);
  WF_FUZZ_CHECK(back.rocm_minor == h.rocm_minor);
  WF_FUZZ_CHECK(back.torch == h.torch);
  WF_FUZZ_CHECK(back.cxx11_abi == h.cxx11_abi);
  WF_FUZZ_CHECK(back.extra.empty());
}

void check_view(std::string_view path) {
  const auto segments = split(path, '/');
  const auto view = wf::core::parse_view_selector(segments);
  if (!view) {
    WF_FUZZ_CHECK(view.error().code == wf::Errc::not_found);
    return;
  }
  const std::string canonical = view->path();
  WF_FUZZ_CHECK(view->empty() == canonical.empty());
  const auto again = split(canonical, '/');
  const auto reparsed = wf::core::parse_view_selector(again);
  WF_FUZZ_CHECK(reparsed.ok());
  WF_FUZZ_CHECK(*reparsed == *view);
  // Only canonical spellings are accepted: the input segments are path()'s, in some order.
  std::vector<std::string_view> a = segments;
  std::vector<std::string_view> b = canonical.empty() ? std::vector<std::string_view>{} : again;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  WF_FUZZ_CHECK(a == b);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto lines = split(wf::fuzz::as_text(data, size), '\n');
  const std::string_view label = lines[0];
  check_hints(wf::core::parse_local_label(label), true);

  if (lines.size() > 1) check_view(lines[1]);

  const std::string_view project = lines.size() > 2 ? lines[2] : "demo";
  const std::string_view version = lines.size() > 3 ? lines[3] : "1.0";
  std::vector<std::string> requires_dist;
  for (std::size_t i = 4; i < lines.size(); ++i) requires_dist.emplace_back(lines[i]);

  const auto pin = wf::core::torch_pin_from_requirements(requires_dist);
  if (pin) {
    WF_FUZZ_CHECK(pin->series.major >= 0 && pin->series.minor >= 0);
    WF_FUZZ_CHECK(!pin->requirement.empty());
  }
  (void)wf::core::torch_series_of_version(version);
  const auto hints = wf::core::hints_for_distribution(project, version, label, requires_dist);
  if (hints) {
    check_hints(*hints, false);
    if (project != "torch" && pin) WF_FUZZ_CHECK(hints->torch == pin->series);
  } else {
    WF_FUZZ_CHECK(hints.error().code == wf::Errc::invalid);
  }
  return 0;
}
