#pragma once
// Project names: normalization and validity (docs/packaging.md, "Project names").

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace wf::core {

/// The normalized name: lower-case, runs of '-', '_' and '.' collapsed to a single '-'.
[[nodiscard]] std::string normalize_name(std::string_view name);

/// A valid name: ASCII letters and digits, with '.', '_' and '-' inside (not at the ends).
[[nodiscard]] bool is_valid_project_name(std::string_view name);

/// True when `name` is already in normal form (and valid).
[[nodiscard]] bool is_normalized_name(std::string_view name);

/// The edit distance between two strings (insertions, deletions, substitutions of one byte and
/// swaps of two neighbouring bytes count one each: the optimal string alignment distance), or
/// `limit + 1` as soon as it is known to exceed `limit`.
[[nodiscard]] std::size_t edit_distance(std::string_view a, std::string_view b, std::size_t limit);

/// The names of `candidates` (normalized names) closest to `name` (normalized first), for a
/// "did you mean" hint: at most `max` of them, each within an edit distance of a third of the
/// longer name (at least 1, at most 3), or holding `name` (or held by it) as a '-'-separated
/// part; nearest first, then by name.
[[nodiscard]] std::vector<std::string> similar_names(std::string_view name,
                                                     std::span<const std::string> candidates,
                                                     std::size_t max = 3);

}  // namespace wf::core
