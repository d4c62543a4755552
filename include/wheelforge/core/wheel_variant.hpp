#pragma once
// PEP 825 variant wheels (docs/variants.md): the variant label of a wheel's file name, the
// properties its `*.dist-info/variant.json` maps it to, their stored form, and what they say
// about the CUDA a wheel was built for. Plain data and pure functions; the JSON itself is read
// and written by the render module (render/variants.hpp).

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/core/binding.hpp"
#include "wheelforge/core/filename.hpp"
#include "wheelforge/core/variant.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::core {

/// {namespace: {feature: [values]}}, values sorted and without repeats: a wheel is compatible
/// when at least one value of every feature is (PEP 825, "Variant properties"), so the order of
/// the values carries nothing.
using VariantProperties = std::map<std::string, std::map<std::string, std::vector<std::string>>>;

/// The label that always means zero properties (PEP 825, "Variant label").
inline constexpr std::string_view kNullVariantLabel = "null";

/// `^[a-z0-9_]+$`: a namespace or a feature name.
[[nodiscard]] bool is_valid_variant_key(std::string_view s);
/// `^[a-z0-9_.]+$`: a feature value.
[[nodiscard]] bool is_valid_variant_value(std::string_view s);

/// "nvidia :: cuda_version_lower_bound :: 12.8, x86_64 :: level :: v3" (PEP 825's 3-tuple form,
/// sorted); "no properties" when empty.
[[nodiscard]] std::string describe_properties(const VariantProperties& properties);

/// What a variant wheel's variant.json says about it, as wheelforge keeps it.
struct WheelVariant {
  std::string label;             ///< the file name's variant label
  std::string schema;            ///< the `$schema` URL, one of the versions wheelforge reads
  VariantProperties properties;  ///< what `variants[label]` maps the label to
  std::string priorities;        ///< `default-priorities`, as compact JSON with sorted keys
  std::string providers;         ///< `providers` likewise; empty when the file has none
  /// The other labels the file defines besides its own (a file may carry the whole table).
  std::map<std::string, VariantProperties> others;
  friend bool operator==(const WheelVariant&, const WheelVariant&) = default;
};

/// The stored form (one line each for label, schema, priorities and providers, then one line
/// per property of the label, `ns :: feature :: value`; the other labels are not kept: they
/// are checked at ingest only). decode_variant reads it back; nullopt for text it did not write.
[[nodiscard]] std::string encode_variant(const WheelVariant& variant);
[[nodiscard]] std::optional<WheelVariant> decode_variant(std::string_view text);

/// The CUDA a variant's properties say it was built for: `nvidia :: cuda_version_lower_bound`
/// (`12.8` → 12.8, `12` → 12; the lowest of several values); nullopt without one
/// (docs/variants.md, "Variants in the torch/CUDA views").
struct VariantCuda {
  int major = 0;
  std::optional<int> minor;
  std::string property;  ///< "nvidia :: cuda_version_lower_bound :: 12.8", for messages
};
[[nodiscard]] std::optional<VariantCuda> variant_cuda(const VariantProperties& properties);

/// The hints of a variant wheel: `hints` (from its local label and requirements) with the CUDA
/// its properties give where the label names no backend. Fails with Errc::invalid naming the
/// property and the label when they disagree (another CUDA major or minor, or a cpu/ROCm label).
[[nodiscard]] Result<VariantHints> hints_with_variant(VariantHints hints,
                                                      std::string_view local_label,
                                                      const WheelVariant& variant);

/// Refuses a variant whose CUDA property names another major than the CUDA runtime a binary
/// of the wheel links (`cuda_version_lower_bound :: 12.8` with `libcudart.so.13`), naming both.
[[nodiscard]] Status check_variant_against_binaries(const WheelVariant& variant,
                                                    const WheelFindings& findings);

/// Why `incoming` cannot join a release whose variant wheels include `existing` (file
/// `existing_file`), or nullopt when it can: the same label with other properties (either
/// file's own label or another label the incoming file defines), another schema, other default
/// priorities or other providers. The message names the label and both definitions.
[[nodiscard]] std::optional<std::string> variant_conflict(const WheelVariant& incoming,
                                                          const WheelVariant& existing,
                                                          std::string_view existing_file);

}  // namespace wf::core
