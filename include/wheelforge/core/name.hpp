#pragma once
// Project names: normalization and validity (docs/packaging.md, "Project names").

#include <string>
#include <string_view>

namespace wf::core {

/// The normalized name: lower-case, runs of '-', '_' and '.' collapsed to a single '-'.
[[nodiscard]] std::string normalize_name(std::string_view name);

/// A valid name: ASCII letters and digits, with '.', '_' and '-' inside (not at the ends).
[[nodiscard]] bool is_valid_project_name(std::string_view name);

/// True when `name` is already in normal form (and valid).
[[nodiscard]] bool is_normalized_name(std::string_view name);

}  // namespace wf::core
