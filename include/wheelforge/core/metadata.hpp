#pragma once
// Core metadata (METADATA in wheels, PKG-INFO in sdists): RFC 822-style headers, read as
// docs/packaging.md, "Core metadata" says.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/util/result.hpp"

namespace wf::core {

struct CoreMetadata {
  std::string metadata_version;                ///< "Metadata-Version", required
  std::string name;                            ///< "Name", required
  std::string version;                         ///< "Version", required
  std::optional<std::string> requires_python;  ///< "Requires-Python"
  std::optional<std::string> summary;          ///< "Summary"
  std::vector<std::string> requires_dist;      ///< every "Requires-Dist" value, in order
};

/// Parses the header block (up to the first empty line; the rest is the description).
/// Handles CRLF, continuation lines and repeated fields. Fails with Errc::invalid naming
/// each missing required field, or when the bytes are not UTF-8.
[[nodiscard]] Result<CoreMetadata> parse_core_metadata(std::string_view bytes);

/// Parses a WHEEL file: requires "Wheel-Version" with major version 1.
/// Returns the Tag values listed (may be empty).
[[nodiscard]] Result<std::vector<std::string>> parse_wheel_file(std::string_view bytes);

}  // namespace wf::core
