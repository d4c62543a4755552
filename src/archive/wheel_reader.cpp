#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>

#include "archive/archive_source.hpp"
#include "archive/dist_info.hpp"
#include "archive/member_checks.hpp"
#include "archive/member_source.hpp"
#include "archive/zip_layout.hpp"
#include "wheelforge/archive/reader.hpp"

namespace wf::archive {
namespace {

// read_wheel over `file`, whose bytes `feed` (FdSource or ByteSourceFeed, over the same bytes)
// gives libarchive. A failed read of `file` is returned as it is (`failure`), not as a
// damaged archive.
template <typename Feed>
Result<WheelContents> read_wheel_from(ByteSource& file, Feed& feed,
                                      const std::optional<Error>& failure,
                                      std::string_view expected_name,
                                      std::string_view expected_version, const Limits& limits) {
  // Layout and names first, from our own reading of the zip structure, so that nothing is
  // decompressed from an archive that zip readers could disagree about.
  CappedProblems problems;
  auto members = scan_zip_layout(file, limits, problems);
  if (!members) return members.error();
  const std::string dir = check_dist_info(*members, expected_name, expected_version, problems);
  if (!problems.empty()) return problems.to_error();

  // libarchive in seekable mode starts from the central directory and visits members in file
  // order; skipping a member is a seek, so reaching METADATA near the end of a multi-gigabyte
  // wheel costs one local-header read per member, not a pass over the data.
  const ArchiveReader reader = new_archive_reader();
  archive_read_support_format_zip_seekable(reader.get());
  const auto archive_failure = [&](std::string message) {
    if (failure) return *failure;
    return make_error(Errc::invalid, std::move(message) + archive_error(reader.get()));
  };
  if (feed.open(reader.get(), Seeking::yes) != ARCHIVE_OK) {
    if (failure) return *failure;
    return make_error(Errc::invalid, "not a zip archive (" + archive_error(reader.get()) + ")");
  }

  WheelContents contents;
  contents.dist_info_dir = dir;
  const std::string metadata_name = dir + "/METADATA";
  const std::string wheel_name = dir + "/WHEEL";
  // A variant wheel's metadata (docs/variants.md, "variant.json"), read when the central
  // directory lists it.
  const std::string variant_name = dir + "/variant.json";
  const bool want_variant = std::any_of(members->begin(), members->end(),
                                        [&](const ZipMember& m) { return m.name == variant_name; });
  bool have_metadata = false;
  bool have_wheel = false;
  bool have_variant = !want_variant;
  std::string variant_json;
  while (!have_metadata || !have_wheel || !have_variant) {
    struct archive_entry* entry = nullptr;
    const int status = archive_read_next_header(reader.get(), &entry);
    if (status == ARCHIVE_EOF) break;
    // Warnings repeat what the layout scan has already checked against the raw headers, or
    // concern converting a non-ASCII name to the C locale; neither affects the two members
    // we read, whose names are ASCII.
    if (status < ARCHIVE_WARN) return archive_failure("cannot read the zip archive: ");
    const char* raw_name = archive_entry_pathname(entry);
    if (raw_name == nullptr) continue;
    const std::string_view name(raw_name);
    std::string* target = nullptr;
    bool* seen = nullptr;
    if (name == metadata_name) {
      target = &contents.metadata;
      seen = &have_metadata;
    } else if (name == wheel_name) {
      target = &contents.wheel;
      seen = &have_wheel;
    } else if (want_variant && name == variant_name) {
      target = &variant_json;
      seen = &have_variant;
    } else {
      if (archive_read_data_skip(reader.get()) < ARCHIVE_WARN) {
        return archive_failure("cannot read the zip archive: ");
      }
      continue;
    }
    if (archive_entry_filetype(entry) != AE_IFREG) {
      return make_error(Errc::invalid, std::string(name) + " is not a regular file");
    }
    auto data = read_member_data(reader.get(), entry, name, limits.max_metadata_bytes);
    if (!data) return failure ? *failure : data.error();
    *target = std::move(*data);
    *seen = true;
  }
  if (!have_metadata || !have_wheel) {
    return make_error(Errc::invalid, "the zip reader did not find " +
                                         (have_metadata ? wheel_name : metadata_name));
  }
  if (want_variant) {
    if (!have_variant)
      return make_error(Errc::invalid, "the zip reader did not find " + variant_name);
    contents.variant_json = std::move(variant_json);
  }
  return contents;
}

}  // namespace

Result<WheelContents> read_wheel(const std::filesystem::path& path, std::string_view expected_name,
                                 std::string_view expected_version, const Limits& limits) {
  auto file = open_archive_file(path);
  if (!file) return file.error();
  auto layout = make_region_source(file->fd.get(), 0, file->size);
  FdSource feed(file->fd.get(), file->size);
  const std::optional<Error> no_failure;
  return read_wheel_from(*layout, feed, no_failure, expected_name, expected_version, limits);
}

Result<WheelContents> read_wheel(ByteSource& file, std::string_view expected_name,
                                 std::string_view expected_version, const Limits& limits) {
  ByteSourceFeed feed(file);
  return read_wheel_from(file, feed, feed.failure(), expected_name, expected_version, limits);
}

}  // namespace wf::archive
