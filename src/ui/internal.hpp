#pragma once
// Helpers shared by the ui module's sources.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wheelforge/core/records.hpp"

namespace wf::ui {

/// The file's version without its local label.
[[nodiscard]] std::string public_version_of(const core::FileRecord& file);
/// (major, minor) of "3.12", "3.9+", "3" (minor -1).
[[nodiscard]] std::pair<int, int> python_sort_key(std::string_view v);
/// Sorts Python versions numerically and removes duplicates.
void sort_pythons(std::vector<std::string>& pythons);

}  // namespace wf::ui
