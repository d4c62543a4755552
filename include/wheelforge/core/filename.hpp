#pragma once
// Distribution file names: wheels (with build tags, local versions and compressed tag sets)
// and sdists (`{name}-{version}.tar.gz`, legacy names tolerated): docs/packaging.md, "Wheel file
// names", "Build tags" and "Source distribution file names".

#include <cstdint>
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
  /// A PEP 825 variant wheel's label, after the platform tag ("cu128", "x8664v3_openblas");
  /// absent for other wheels (docs/variants.md, "File names").
  std::optional<std::string> variant_label;
  /// Expanded sets, split on '.'.
  [[nodiscard]] std::vector<std::string> python_tags() const;
  [[nodiscard]] std::vector<std::string> abi_tags() const;
  [[nodiscard]] std::vector<std::string> platform_tags() const;
};

struct DistFilename {
  DistKind kind = DistKind::wheel;
  std::string filename;         ///< the file name exactly as given
  std::string name;             ///< the name part as spelled in the file name
  std::string normalized_name;  ///< docs/packaging.md, "Project names"
  std::string version_text;     ///< the version part as spelled in the file name
  Version version;              ///< parsed
  WheelTags tags;               ///< wheels only (empty for sdists)
};

/// A PEP 825 variant label: not empty, only `0-9`, `a-z`, `_` and `.` (docs/variants.md).
[[nodiscard]] bool is_valid_variant_label(std::string_view label);

/// Parses and validates a client-supplied file name. Rejects path separators, "..",
/// control characters, names longer than kMaxFilenameLength, unknown extensions, wrong
/// part counts, invalid project names, versions and tags. All problems are reported together.
[[nodiscard]] Result<DistFilename> parse_dist_filename(std::string_view filename);

/// The identity of a distribution file for the rule "one file per name": two file names with
/// the same key are the same file, whatever their spelling. Compared after normalization:
/// - the project name normalized (case, and the '_' escape of '-' and '.' in file names);
/// - the version by equality (Version::canonical_str(): "1.0" is "1.0.0");
/// - wheels: the build tag by its number and rest ("01" sorts as 1), and the three
///   compressed tag sets as sets of lower-case tags ("py2.py3" is "py3.py2"), and the variant
///   label (a variant wheel is another file than the non-variant wheel of the same tags);
/// - sdists: name and version only, so that a release has at most one sdist, whatever its
///   archive format.
/// (docs/packaging.md: "Project names", "Versions", "Wheel file names", "Build tags", "Source
/// distribution file names".)
/// The key reads like a file name ("demo_pkg-1-py3-none-any.whl", "demo_pkg-1.tar.gz") but is
/// for comparison only. Pure.
[[nodiscard]] std::string canonical_file_key(const DistFilename& name);

/// canonical_file_key() of a file name; a name that does not parse is its own key.
[[nodiscard]] std::string canonical_file_key(std::string_view filename);

/// canonical_file_key() without the build tag: the key that every build of one wheel shares
/// (same project, version with its label, python, ABI and platform tags), so that a rebuild can
/// find the build numbers its file name has had. For an sdist, canonical_file_key().
[[nodiscard]] std::string rebuild_key(const DistFilename& name);

/// The number of a build tag: its leading digits ("1" -> 1, "02" -> 2, "3abc" -> 3);
/// 0 without a build tag, or for digits beyond 18 (no build counts that far).
[[nodiscard]] std::uint64_t build_number(const WheelTags& tags);

}  // namespace wf::core
