#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "archive/archive_source.hpp"
#include "archive/dist_info.hpp"
#include "archive/member_checks.hpp"
#include "archive/zip_layout.hpp"
#include "wheelforge/archive/retag.hpp"
#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::archive {
namespace {

constexpr std::size_t kChunk = std::size_t{64} * 1024U;

struct FileDigest {
  std::string name;
  bool executable = false;
  std::string sha256;  ///< hex
};

// The member's name relative to its top-level `.dist-info` directory ("RECORD"), or empty when
// it is not in one.
std::string_view dist_info_member(std::string_view name) {
  const std::size_t slash = name.find('/');
  if (slash == std::string_view::npos) return {};
  const std::string_view top = name.substr(0, slash);
  if (!top.ends_with(kDistInfoSuffix)) return {};
  return name.substr(slash + 1);
}

// WHEEL without its Build lines (a header's continuation lines go with it).
std::string without_build_lines(std::string_view wheel) {
  std::string out;
  bool dropping = false;
  for (std::size_t pos = 0; pos < wheel.size();) {
    const std::size_t nl = wheel.find('\n', pos);
    const std::size_t next = nl == std::string_view::npos ? wheel.size() : nl + 1;
    const std::string_view line = wheel.substr(pos, next - pos);
    const bool continuation = !line.empty() && (line[0] == ' ' || line[0] == '\t');
    if (!continuation) {
      const std::size_t colon = line.find(':');
      dropping = colon != std::string_view::npos && iequals(trim(line.substr(0, colon)), "Build");
    }
    if (!dropping) out += line;
    pos = next;
  }
  return out;
}

}  // namespace

Result<std::string> wheel_content_digest(const std::filesystem::path& wheel, const Limits& limits) {
  auto file = open_archive_file(wheel);
  if (!file) return file.error();
  Limits layout = limits;
  layout.max_inflated_bytes = UINT64_MAX;
  layout.max_compression_ratio = UINT64_MAX;
  CappedProblems problems;
  auto members = scan_zip_layout(file->fd.get(), file->size, layout, problems);
  if (!members) return members.error();
  if (!problems.empty()) return problems.to_error();
  std::sort(members->begin(), members->end(), [](const ZipMember& a, const ZipMember& b) {
    return a.local_header_offset < b.local_header_offset;
  });

  const ArchiveReader reader = new_archive_reader();
  archive_read_support_format_zip_seekable(reader.get());
  FdSource source(file->fd.get(), file->size);
  if (source.open(reader.get(), Seeking::yes) != ARCHIVE_OK) {
    return make_error(Errc::invalid, "not a zip archive (" + archive_error(reader.get()) + ")");
  }
  std::vector<FileDigest> files;
  std::vector<char> buffer(kChunk);
  for (const ZipMember& member : *members) {
    struct archive_entry* entry = nullptr;
    const int status = archive_read_next_header(reader.get(), &entry);
    if (status == ARCHIVE_EOF) {
      return make_error(Errc::invalid, "the zip reader did not find " + quote_name(member.name));
    }
    if (status < ARCHIVE_WARN) {
      return make_error(Errc::invalid,
                        "cannot read the zip archive: " + archive_error(reader.get()));
    }
    const std::string_view in_dist_info = dist_info_member(member.name);
    const bool derived =
        in_dist_info == "RECORD" || in_dist_info == "RECORD.jws" || in_dist_info == "RECORD.p7s";
    if (archive_entry_filetype(entry) != AE_IFREG || derived) {
      if (archive_read_data_skip(reader.get()) < ARCHIVE_WARN) {
        return make_error(Errc::invalid,
                          "cannot read the zip archive: " + archive_error(reader.get()));
      }
      continue;
    }
    FileDigest d;
    d.name = member.name;
    d.executable = (archive_entry_perm(entry) & 0111) != 0;
    if (in_dist_info == "WHEEL") {
      auto data = read_member_data(reader.get(), entry, member.name, limits.max_metadata_bytes);
      if (!data) return data.error();
      d.sha256 = crypto::sha256_hex(without_build_lines(*data));
    } else {
      crypto::Hasher hasher(crypto::Algorithm::sha256);
      std::uint64_t total = 0;
      while (true) {
        const la_ssize_t n = archive_read_data(reader.get(), buffer.data(), buffer.size());
        if (n < 0) {
          return make_error(Errc::invalid, quote_name(member.name) +
                                               " cannot be read: " + archive_error(reader.get()));
        }
        if (n == 0) break;
        total += static_cast<std::uint64_t>(n);
        if (total > member.uncompressed_size) break;
        hasher.update(buffer.data(), static_cast<std::size_t>(n));
      }
      if (total != member.uncompressed_size) {
        return make_error(Errc::invalid,
                          quote_name(member.name) + " does not inflate to its declared size");
      }
      d.sha256 = hasher.finish_hex();
    }
    files.push_back(std::move(d));
  }
  std::sort(files.begin(), files.end(),
            [](const FileDigest& a, const FileDigest& b) { return a.name < b.name; });
  crypto::Hasher all(crypto::Algorithm::sha256);
  for (const auto& f : files) {
    // Names cannot hold NUL or line breaks (the layout scan refuses control characters).
    all.update(f.name);
    all.update(f.executable ? std::string_view("\0x\0", 3) : std::string_view("\0-\0", 3));
    all.update(f.sha256);
    all.update("\n");
  }
  return all.finish_hex();
}

}  // namespace wf::archive
