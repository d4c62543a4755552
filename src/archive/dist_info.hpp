#pragma once
// The .dist-info directory of a wheel, found from the zip layout and tied to the file name.
// Shared by the wheel reader and the retagger so that both accept exactly the same wheels.

#include <string>
#include <string_view>
#include <vector>

#include "archive/member_checks.hpp"
#include "archive/zip_layout.hpp"

namespace wf::archive {

inline constexpr std::string_view kDistInfoSuffix = ".dist-info";

/// Finds the single top-level `.dist-info` directory among `members` and checks that it is
/// named `{name}-{version}.dist-info` for `expected_name` (compared after name
/// normalization) and `expected_version` (compared ignoring case and `-`/`_`), both as written
/// in the file name, and that it holds METADATA and WHEEL. Adds a problem for each rule
/// broken ("no .dist-info directory", "several .dist-info directories: ...", "... does not
/// match the file name ...", "{dir}/METADATA is missing", "{dir}/WHEEL is missing"). Returns
/// the directory name without a trailing '/', or an empty string when there is no single one.
[[nodiscard]] std::string check_dist_info(const std::vector<ZipMember>& members,
                                          std::string_view expected_name,
                                          std::string_view expected_version,
                                          CappedProblems& problems);

}  // namespace wf::archive
