// A variant wheel's variant.json (PEP 825) on arbitrary bytes. The input's first line is the
// label of the file name, the rest the JSON. Checked: parsing never crashes and refuses with a
// printable message; what it accepts has valid names and sorted values, survives its stored
// form (core::encode_variant), and the release document rendered from it reads back as a
// variant.json of the same label with the same definition.

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "wheelforge/core/filename.hpp"
#include "wheelforge/core/wheel_variant.hpp"
#include "wheelforge/render/variants.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input = wf::fuzz::as_text(data, size);
  const auto nl = input.find('\n');
  const std::string_view label = nl == std::string_view::npos ? input : input.substr(0, nl);
  const std::string_view json = nl == std::string_view::npos ? "" : input.substr(nl + 1);
  auto v = wf::render::parse_variant_json(json, label);
  if (!v) {
    for (const char c : v.error().message) {
      WF_FUZZ_CHECK(static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x7F);
    }
    return 0;
  }
  WF_FUZZ_CHECK(wf::core::is_valid_variant_label(v->label));
  WF_FUZZ_CHECK(wf::render::is_known_variant_schema(v->schema));
  WF_FUZZ_CHECK((v->label == wf::core::kNullVariantLabel) == v->properties.empty());
  for (const auto& [ns, features] : v->properties) {
    WF_FUZZ_CHECK(wf::core::is_valid_variant_key(ns));
    for (const auto& [feature, values] : features) {
      WF_FUZZ_CHECK(wf::core::is_valid_variant_key(feature));
      WF_FUZZ_CHECK(!values.empty());
      WF_FUZZ_CHECK(std::is_sorted(values.begin(), values.end()));
      WF_FUZZ_CHECK(std::adjacent_find(values.begin(), values.end()) == values.end());
      for (const auto& value : values) WF_FUZZ_CHECK(wf::core::is_valid_variant_value(value));
    }
  }
  wf::core::WheelVariant stored = *v;
  stored.others.clear();
  const auto back = wf::core::decode_variant(wf::core::encode_variant(stored));
  WF_FUZZ_CHECK(back.has_value());
  WF_FUZZ_CHECK(*back == stored);

  const std::vector<wf::core::WheelVariant> release = {stored};
  const std::string doc = wf::render::render_variants_json(release);
  auto again = wf::render::parse_variant_json(doc, stored.label);
  WF_FUZZ_CHECK(again.ok());
  WF_FUZZ_CHECK(again->others.empty());
  again->others.clear();
  WF_FUZZ_CHECK(*again == stored);
  return 0;
}
