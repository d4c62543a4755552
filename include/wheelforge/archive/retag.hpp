#pragma once
// Rewriting a built wheel's name and tags (docs/packaging.md, "Inside a wheel"): its local
// version label, for packages whose build cannot set the label itself; its build tag, for
// rebuilds of a file name that is already published; its platform tags, for a `linux_x86_64`
// wheel whose binaries qualify for a manylinux tag (core/manylinux.hpp). Part of the archive
// module, the only one that touches libarchive.

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/archive/reader.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::archive {

/// What rewrite_wheel changes; every field left empty keeps what the wheel has.
struct WheelChanges {
  /// The new local version label (`cu128torch2.8`, may start with '+'), replacing any the wheel
  /// has. Normalized (lower case, '-' and '_' as '.'); must then match
  /// `[a-z0-9]+(\.[a-z0-9]+)*`.
  std::optional<std::string> local_label;
  /// The new build tag (`1`, `2`, ...; a digit, then letters, digits, '_' and '.'):
  /// goes into the file name and into WHEEL's `Build:` line, replacing any the wheel has.
  std::optional<std::string> build_tag;
  /// The new platform tags, replacing the whole platform tag set (`{"manylinux_2_28_x86_64"}`,
  /// or `{"manylinux_2_17_x86_64", "manylinux2014_x86_64"}`): in this order in the file name
  /// (joined by '.') and in WHEEL's `Tag:` lines. Each is letters, digits and '_' (platform
  /// tags are lower case: `linux_x86_64`, `manylinux_2_28_aarch64`; docs/packaging.md,
  /// "Platform tags"); no duplicates.
  std::optional<std::vector<std::string>> platform_tags;
};

/// Writes a copy of `wheel` with `changes` applied into `out_dir` (created when missing), in one
/// pass, and returns the new file's path.
///
/// The copy has: the file name `{name}-{version}(-{build})?-{py}-{abi}-{plat}.whl` with the name
/// normalized and '-' escaped as '_', the version normalized (with the new label,
/// if any), the build tag and platform tags new or as in the old name, the python and ABI tags
/// as in the old name; `.dist-info/` and `.data/` directories renamed to `{name}-{version}`;
/// the `Version:` line of METADATA rewritten when the label changes (every other byte kept,
/// METADATA untouched otherwise); WHEEL unchanged when its `Tag:` lines are the new file name's
/// expanded tags and its `Build:` line agrees, otherwise those lines replaced (Tag lines where
/// the first one was, `Build:` in place or added after the last line); a RECORD listing every
/// file with its sha256 and size (RECORD itself with neither; RECORD.jws and RECORD.p7s, which
/// the change invalidates, are dropped). Other members keep their bytes, order, modes and times;
/// `.dist-info` members come last, RECORD at the very end; files are deflated. The file appears
/// under its final name only when complete (temp file, fsync, rename): a failure leaves nothing
/// in `out_dir`. A file of the same name there is replaced. The new file name must parse as a
/// wheel's (core::parse_dist_filename). Blocks on file I/O.
///
/// Fails with Errc::invalid when the label, build tag or a platform tag is invalid, the new file
/// name is not valid, the file name is not a wheel's, the wheel fails read_wheel's checks
/// (layout, names, .dist-info), a member name is not UTF-8 (the copy's names carry the zip
/// UTF-8 flag), METADATA's Name or public Version contradicts the file name, METADATA does not
/// have exactly one Version header (when the label changes), WHEEL is not a version-1 WHEEL
/// file, a member is neither a file nor a directory, two members would get the same name, or
/// member data is damaged; with Errc::io or Errc::storage_full when reading or writing fails.
[[nodiscard]] Result<std::filesystem::path> rewrite_wheel(const std::filesystem::path& wheel,
                                                          const WheelChanges& changes,
                                                          const std::filesystem::path& out_dir,
                                                          const Limits& limits = {});

/// A digest of what a wheel installs, equal for two wheels exactly when they hold the same files
/// with the same bytes, whatever their build tags, zip metadata and compression: the sha256 (as
/// lower-case hex) over every regular file member, in name order, of its name, whether it is
/// executable (pip keeps that bit: docs/clients.md, "pip") and the sha256 of its bytes. Left out,
/// because they follow from the rest or from the build tag alone: `{dist-info}/RECORD` (and
/// RECORD.jws, RECORD.p7s, which sign it), and the `Build:` lines of `{dist-info}/WHEEL` (the rest
/// of WHEEL counts). Directories, times and modes other than the executable bit do not count. A
/// rebuild whose digest equals the published file's has nothing new to publish.
///
/// Checks the zip layout as read_wheel does (no declared-size limits: the file is the runner's
/// own build or already in the index) and streams every member once, holding no member in
/// memory (WHEEL up to `limits.max_metadata_bytes`). Fails with Errc::invalid when the layout
/// is bad or a member's data is damaged or does not inflate to its declared size; with
/// Errc::io when the file cannot be read. Blocks on file I/O.
[[nodiscard]] Result<std::string> wheel_content_digest(const std::filesystem::path& wheel,
                                                       const Limits& limits = {});

/// rewrite_wheel with only a new local label (see WheelChanges::local_label).
[[nodiscard]] Result<std::filesystem::path> retag_wheel(const std::filesystem::path& wheel,
                                                        std::string_view new_local_label,
                                                        const std::filesystem::path& out_dir,
                                                        const Limits& limits = {});

}  // namespace wf::archive
