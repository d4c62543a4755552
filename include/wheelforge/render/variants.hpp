#pragma once
// PEP 825 variant metadata as JSON (docs/variants.md): reading a wheel's
// `*.dist-info/variant.json` at ingest, and writing a release's index-level
// `{name}-{version}-variants.json`. Pure functions: no I/O, safe on any thread.

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "wheelforge/core/wheel_variant.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::render {

/// The `$schema` URLs wheelforge reads: https://variants-schema.wheelnext.dev/v0.0.3.json (the
/// version PyTorch's published variant wheels use) and v0.1.N.json (docs/variants.md,
/// "Schema versions"). Other versions are unknown, and PEP 825 has tools treat them as
/// unsupported.
[[nodiscard]] bool is_known_variant_schema(std::string_view url);

/// Reads a variant wheel's variant.json and returns what it says about `label`, the label of
/// the wheel's file name (its properties, the other labels it defines, `$schema`,
/// `default-priorities` and `providers` in canonical form). Fails with Errc::invalid naming
/// every problem found: not JSON, not an object, an unknown or missing `$schema`, a missing
/// or malformed `default-priorities` (its `namespace` list is required), a malformed
/// `providers`, a missing or empty `variants`, labels, namespaces, feature names or values
/// that break PEP 825's character rules, a namespace used but not listed in
/// `default-priorities.namespace`, `null` with properties or another label without any, and
/// a file that does not define `label`.
[[nodiscard]] Result<core::WheelVariant> parse_variant_json(std::string_view bytes,
                                                            std::string_view label);

/// The index-level `{name}-{version}-variants.json` of a release from its variant wheels'
/// stored variants (all of one `$schema`, `default-priorities` and `providers`, as ingest
/// ensures; the first one's are written): `$schema`, `default-priorities`, `providers` where
/// the wheels have them, and under `variants` each label once with its properties. The output
/// depends only on the set of labels and their definitions, not on the order of `variants`.
[[nodiscard]] std::string render_variants_json(std::span<const core::WheelVariant> variants);

}  // namespace wf::render
