#pragma once
// Project names: PEP 503 normalization and PEP 508 validity.

#include <string>
#include <string_view>

namespace wf::core {

/// PEP 503: lower-case, runs of '-', '_' and '.' collapsed to a single '-'.
[[nodiscard]] std::string normalize_name(std::string_view name);

/// PEP 508 name: ASCII letters and digits, with '.', '_' and '-' inside (not at the ends).
[[nodiscard]] bool is_valid_project_name(std::string_view name);

/// True when `name` is already in PEP 503 normal form (and valid).
[[nodiscard]] bool is_normalized_name(std::string_view name);

}  // namespace wf::core
