#pragma once
// Core metadata (METADATA in wheels, PKG-INFO in sdists): RFC 822-style headers, read as
// docs/packaging.md, "Core metadata" says.

#include <optional>
#include <string>
#include <string_view>
#include <utility>
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

/// What a project page shows of a file's core metadata (docs/packaging.md, "Core metadata":
/// "Description"). Every field is optional; text is as written (not escaped).
struct ProjectInfo {
  std::string summary;                     ///< "Summary"
  std::string description;                 ///< the message body, else the "Description" field
  std::string description_content_type;    ///< "Description-Content-Type", as written
  std::string license;                     ///< "License"
  std::string license_expression;          ///< "License-Expression" (metadata 2.4)
  std::string author;                      ///< "Author"
  std::string author_email;                ///< "Author-email"
  std::string maintainer;                  ///< "Maintainer"
  std::string maintainer_email;            ///< "Maintainer-email"
  std::string home_page;                   ///< "Home-page" (deprecated, still common)
  std::string requires_python;             ///< "Requires-Python"
  std::string keywords;                    ///< "Keywords"
  std::vector<std::string> requires_dist;  ///< every "Requires-Dist", in order
  std::vector<std::string> classifiers;    ///< every "Classifier", in order
  std::vector<std::pair<std::string, std::string>> project_urls;  ///< "Project-URL": label, URL
};

/// How a description is to be shown, from its Description-Content-Type (type and subtype
/// compared case-insensitively, parameters ignored). An absent type means reStructuredText, as
/// the core metadata specification says.
enum class DescriptionFormat { markdown, rst, plain };
[[nodiscard]] DescriptionFormat description_format(std::string_view content_type);

/// Reads the fields a project page shows. Never fails: bytes that are not UTF-8 give an empty
/// ProjectInfo (ingest refuses such metadata, so a stored file never has them). The
/// Description field's continuation lines lose their indentation of up to 8 spaces and the
/// '|' that setuptools writes before each (docs/packaging.md, "Core metadata").
[[nodiscard]] ProjectInfo parse_project_info(std::string_view bytes);

/// Parses a WHEEL file: requires "Wheel-Version" with major version 1.
/// Returns the Tag values listed (may be empty).
[[nodiscard]] Result<std::vector<std::string>> parse_wheel_file(std::string_view bytes);

}  // namespace wf::core
