#pragma once
// The text of a retagged wheel (retag.cpp): the new local label, METADATA's Version, WHEEL's
// Tag and Build lines, RECORD's CSV fields, and the checks of build and platform tags. Pure;
// private to the archive module.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/core/filename.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::archive::retag_text {

/// Local label normalization (docs/packaging.md, "Local version labels"); the result is what the
/// new version string carries.
[[nodiscard]] std::optional<std::string> normalize_label(std::string_view label);

/// Strict UTF-8 (no overlong forms, surrogates or code points above U+10FFFF: docs/formats.md,
/// "UTF-8"). The copy's names carry the zip UTF-8 flag, so a name that is not UTF-8 would be
/// misread.
[[nodiscard]] bool is_utf8(std::string_view s);

/// Replaces the value of the single Version header (with any continuation lines) and keeps
/// every other byte, so that METADATA differs from the original only where the version is.
[[nodiscard]] Result<std::string> rewrite_metadata_version(std::string_view metadata,
                                                           std::string_view new_version,
                                                           std::string_view member);

/// Keeps WHEEL byte for byte when its Tag lines already are the file name's tags; otherwise
/// writes those tags where the first Tag line was, because installers trust the file name.
[[nodiscard]] std::string rewrite_wheel_tags(std::string_view wheel,
                                             const std::vector<std::string>& tags);

/// Gives WHEEL the build number `build`: the first `Build:` line's value replaced (later ones
/// dropped), or a `Build:` line added after the last Tag line (bdist_wheel's place for it).
[[nodiscard]] std::string rewrite_wheel_build(std::string_view wheel, std::string_view build);

/// RECORD is CSV: a path with a comma, quote or line break is quoted, quotes doubled.
[[nodiscard]] std::string csv_field(std::string_view s);

/// A build tag starts with a digit; the rest is what a file name part may hold
/// (docs/packaging.md, "Build tags").
[[nodiscard]] bool valid_build_tag(std::string_view tag);

/// Adds a problem for each platform tag that is not letters, digits and '_', or given twice,
/// and one for an empty set.
void check_platform_tags(const std::vector<std::string>& tags, Problems& problems);

/// The project name as the wheel's .dist-info directory spells it (normalized, '-' as '_').
[[nodiscard]] std::string escaped_name(std::string_view name);

/// Every python-abi-platform combination of a file name's compressed tag set.
[[nodiscard]] std::vector<std::string> expanded_tags(const core::WheelTags& tags);

}  // namespace wf::archive::retag_text
