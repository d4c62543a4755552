#pragma once
// JSON of the build runner's admin API: requests in, builds and jobs out. Pure functions.

#include <span>
#include <string>
#include <string_view>

#include "wheelforge/catalog/jobs.hpp"
#include "wheelforge/core/build.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::render {

/// Parses {"recipe": "...", "version": "...", "matrix": {"python": [...], "torch": [...],
/// "cuda": [...]}, "force": false, "yank_superseded": false, "cache": true} (yank_superseded
/// absent: the recipe's; "cache": false builds without the compile cache). Errc::invalid naming
/// every problem (not JSON, mistyped or unknown fields, and what core::check_build_request finds in
/// the values).
[[nodiscard]] Result<core::BuildRequest> parse_build_request(std::string_view json);

[[nodiscard]] std::string render_job(const catalog::JobRecord& job);
[[nodiscard]] std::string render_build(const catalog::BuildRecord& build,
                                       std::span<const catalog::JobRecord> jobs);
[[nodiscard]] std::string render_builds(std::span<const catalog::BuildRecord> builds);

}  // namespace wf::render
