#pragma once
// Giving a built wheel a local version label (DOMAIN.md §4), for packages whose build cannot
// set the label itself. Part of the archive module, the only one that touches libarchive.

#include <filesystem>
#include <string_view>

#include "wheelforge/archive/reader.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::archive {

/// Writes a copy of `wheel` whose version is `{public version}+{label}` into `out_dir`
/// (created when missing) and returns the new file's path. `new_local_label` may start with
/// '+'; it is normalized (lower case, '-' and '_' as '.') and must then match
/// `[a-z0-9]+(\.[a-z0-9]+)*`. A local label the wheel already has is replaced.
///
/// The copy has: the file name `{name}-{version}(-{build})?-{py}-{abi}-{plat}.whl` with the
/// name PEP 503-normalized and '-' escaped as '_', the version PEP 440-normalized, the build
/// and compressed tags as in the old name; `.dist-info/` and `.data/` directories renamed to
/// `{name}-{version}`; the `Version:` line of METADATA rewritten (every other byte kept); WHEEL
/// unchanged when its `Tag:` lines are the file name's expanded tags, otherwise those lines
/// replaced by them; a RECORD listing every file with its sha256 and size (RECORD itself
/// with neither; RECORD.jws and RECORD.p7s, which the change invalidates, are dropped). Other
/// members keep their bytes, order, modes and times; `.dist-info` members come last, RECORD
/// at the very end; files are deflated. The file appears under its final name only when
/// complete (temp file, fsync, rename): a failure leaves nothing in `out_dir`. A file of the
/// same name there is replaced. Blocks on file I/O.
///
/// Fails with Errc::invalid when the label is invalid, the file name is not a wheel's, the
/// wheel fails read_wheel's checks (layout, names, .dist-info), a member name is not UTF-8 (the
/// copy's names carry the zip UTF-8 flag), METADATA's Name or public Version contradicts the
/// file name, METADATA does not have exactly one Version header, WHEEL is not a version-1 WHEEL
/// file, a member is neither a file nor a directory, two members would get the same name, or
/// member data is damaged; with Errc::io or Errc::storage_full when reading or writing fails.
[[nodiscard]] Result<std::filesystem::path> retag_wheel(const std::filesystem::path& wheel,
                                                        std::string_view new_local_label,
                                                        const std::filesystem::path& out_dir,
                                                        const Limits& limits = {});

}  // namespace wf::archive
