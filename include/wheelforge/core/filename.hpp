#pragma once
// Distribution file names: PEP 427 wheels (with build tags, local versions and compressed
// tag sets) and sdists (PEP 625 `{name}-{version}.tar.gz`, legacy names tolerated).

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/core/version.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::core {

enum class DistKind { wheel, sdist };

/// Longest file name accepted from a client.
inline constexpr std::size_t kMaxFilenameLength = 255;

struct WheelTags {
  std::optional<std::string> build_tag;  ///< e.g. "1" or "2abc"; starts with a digit
  std::string python_tag;                ///< compressed set as in the file name, "cp310.cp311"
  std::string abi_tag;
  std::string platform_tag;
  /// Expanded sets, split on '.'.
  [[nodiscard]] std::vector<std::string> python_tags() const;
  [[nodiscard]] std::vector<std::string> abi_tags() const;
  [[nodiscard]] std::vector<std::string> platform_tags() const;
};

struct DistFilename {
  DistKind kind = DistKind::wheel;
  std::string filename;         ///< the file name exactly as given
  std::string name;             ///< the name part as spelled in the file name
  std::string normalized_name;  ///< PEP 503
  std::string version_text;     ///< the version part as spelled in the file name
  Version version;              ///< parsed
  WheelTags tags;               ///< wheels only (empty for sdists)
};

/// Parses and validates a client-supplied file name. Rejects path separators, "..",
/// control characters, names longer than kMaxFilenameLength, unknown extensions, wrong
/// part counts, invalid project names, versions and tags. All problems are reported together.
[[nodiscard]] Result<DistFilename> parse_dist_filename(std::string_view filename);

}  // namespace wf::core
