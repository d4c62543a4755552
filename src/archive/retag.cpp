#include "wheelforge/archive/retag.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "archive/archive_source.hpp"
#include "archive/dist_info.hpp"
#include "archive/member_checks.hpp"
#include "archive/zip_layout.hpp"
#include "wheelforge/core/filename.hpp"
#include "wheelforge/core/metadata.hpp"
#include "wheelforge/core/name.hpp"
#include "wheelforge/core/version.hpp"
#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::archive {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kChunk = std::size_t{64} * 1024U;
constexpr mode_t kDefaultFileMode = 0644;
constexpr mode_t kDefaultDirMode = 0755;

Error invalid(std::string message) {
  return make_error(Errc::invalid, std::move(message));
}

// Local label normalization (docs/packaging.md, "Local version labels"); the result is what the
// new version string carries.
std::optional<std::string> normalize_label(std::string_view label) {
  if (label.starts_with('+')) label.remove_prefix(1);
  std::string out;
  out.reserve(label.size());
  for (const char c : label) {
    if (c >= 'A' && c <= 'Z') {
      out += static_cast<char>(c - 'A' + 'a');
    } else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
      out += c;
    } else if (c == '.' || c == '-' || c == '_') {
      if (out.empty() || out.back() == '.') return std::nullopt;
      out += '.';
    } else {
      return std::nullopt;
    }
  }
  if (out.empty() || out.back() == '.') return std::nullopt;
  return out;
}

// Strict UTF-8 (no overlong forms, surrogates or code points above U+10FFFF: docs/formats.md,
// "UTF-8"). The copy's names carry the zip UTF-8 flag, so a name that is not UTF-8 would be
// misread.
bool is_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto lead = static_cast<unsigned char>(s[i]);
    std::size_t extra = 0;
    std::uint32_t cp = 0;
    if (lead < 0x80U) {
      ++i;
      continue;
    }
    if ((lead & 0xE0U) == 0xC0U) {
      extra = 1;
      cp = lead & 0x1FU;
    } else if ((lead & 0xF0U) == 0xE0U) {
      extra = 2;
      cp = lead & 0x0FU;
    } else if ((lead & 0xF8U) == 0xF0U) {
      extra = 3;
      cp = lead & 0x07U;
    } else {
      return false;
    }
    if (s.size() - i <= extra) return false;
    for (std::size_t k = 1; k <= extra; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0U) != 0x80U) return false;
      cp = (cp << 6U) | (b & 0x3FU);
    }
    constexpr std::uint32_t kMinForLength[] = {0, 0x80U, 0x800U, 0x10000U};
    if (cp < kMinForLength[extra] || cp > 0x10FFFFU || (cp >= 0xD800U && cp <= 0xDFFFU)) {
      return false;
    }
    i += extra + 1;
  }
  return true;
}

// One header line of an RFC 822-style block (docs/formats.md, "RFC 822-style header blocks"):
// [start, end) without the line break, `next` after it.
struct Line {
  std::size_t start = 0;
  std::size_t end = 0;
  std::size_t next = 0;
};

Line line_at(std::string_view text, std::size_t pos) {
  const std::size_t nl = text.find('\n', pos);
  Line line{pos, nl == std::string_view::npos ? text.size() : nl,
            nl == std::string_view::npos ? text.size() : nl + 1};
  if (line.end > line.start && text[line.end - 1] == '\r') --line.end;
  return line;
}

bool is_blank(char c) {
  return c == ' ' || c == '\t';
}

// The field name of a header line, or empty for a continuation or malformed line.
std::string_view field_name(std::string_view line) {
  if (line.empty() || is_blank(line[0])) return {};
  const std::size_t colon = line.find(':');
  return colon == std::string_view::npos ? std::string_view{} : line.substr(0, colon);
}

// Replaces the value of the single Version header (with any continuation lines) and keeps
// every other byte, so that METADATA differs from the original only where the version is.
Result<std::string> rewrite_metadata_version(std::string_view metadata,
                                             std::string_view new_version,
                                             std::string_view member) {
  std::vector<std::pair<std::size_t, std::size_t>> values;
  std::size_t pos = 0;
  while (pos < metadata.size()) {
    Line line = line_at(metadata, pos);
    const std::string_view text = metadata.substr(line.start, line.end - line.start);
    if (text.empty()) break;  // the description follows
    if (iequals(field_name(text), "Version")) {
      std::size_t value_start = line.start + text.find(':') + 1;
      while (value_start < line.end && is_blank(metadata[value_start])) ++value_start;
      std::size_t value_end = line.end;
      while (line.next < metadata.size() && is_blank(metadata[line.next])) {
        line = line_at(metadata, line.next);
        value_end = line.end;
      }
      values.emplace_back(value_start, value_end);
    }
    pos = line.next;
  }
  if (values.size() != 1) {
    return invalid(std::string(member) + " has " + std::to_string(values.size()) +
                   " Version headers, expected 1");
  }
  std::string out(metadata.substr(0, values[0].first));
  out += new_version;
  out += metadata.substr(values[0].second);
  return out;
}

// Keeps WHEEL byte for byte when its Tag lines already are the file name's tags; otherwise
// writes those tags where the first Tag line was, because installers trust the file name.
std::string rewrite_wheel_tags(std::string_view wheel, const std::vector<std::string>& tags) {
  std::set<std::string> have;
  std::size_t pos = 0;
  std::string eol = "\n";
  bool first_line = true;
  while (pos < wheel.size()) {
    const Line line = line_at(wheel, pos);
    if (first_line && line.next > line.end + 1) eol = "\r\n";
    first_line = false;
    const std::string_view text = wheel.substr(line.start, line.end - line.start);
    if (iequals(field_name(text), "Tag")) have.emplace(trim(text.substr(text.find(':') + 1)));
    pos = line.next;
  }
  if (have == std::set<std::string>(tags.begin(), tags.end())) return std::string(wheel);

  std::string out;
  bool tags_written = false;
  const auto write_tags = [&] {
    for (const auto& tag : tags) out.append("Tag: ").append(tag).append(eol);
    tags_written = true;
  };
  pos = 0;
  while (pos < wheel.size()) {
    const Line line = line_at(wheel, pos);
    const std::string_view text = wheel.substr(line.start, line.end - line.start);
    if (iequals(field_name(text), "Tag")) {
      if (!tags_written) write_tags();
    } else if (text.empty() && !tags_written) {
      write_tags();
      out += wheel.substr(line.start, line.next - line.start);
    } else {
      out += wheel.substr(line.start, line.next - line.start);
      if (line.next == line.end) out += eol;  // a last line without a line break
    }
    pos = line.next;
  }
  if (!tags_written) write_tags();
  return out;
}

// Gives WHEEL the build number `build`: the first `Build:` line's value replaced (later ones
// dropped), or a `Build:` line added after the last Tag line (bdist_wheel's place for it).
std::string rewrite_wheel_build(std::string_view wheel, std::string_view build) {
  std::string eol = "\n";
  std::size_t after_tags = std::string_view::npos;  // where a new Build line goes
  bool has_build = false;
  for (std::size_t pos = 0; pos < wheel.size();) {
    const Line line = line_at(wheel, pos);
    if (pos == 0 && line.next > line.end + 1) eol = "\r\n";
    const std::string_view name = field_name(wheel.substr(line.start, line.end - line.start));
    if (iequals(name, "Build")) has_build = true;
    if (iequals(name, "Tag")) after_tags = line.next;
    pos = line.next;
  }
  const std::string build_line = "Build: " + std::string(build);
  std::string out;
  bool written = false;
  for (std::size_t pos = 0; pos < wheel.size();) {
    const Line line = line_at(wheel, pos);
    const std::string_view text = wheel.substr(line.start, line.end - line.start);
    if (iequals(field_name(text), "Build")) {
      if (!written) out += build_line + eol;
      written = true;
    } else if (!has_build && !written && text.empty()) {
      // No Tag line: before the blank line that ends the headers.
      out += build_line + eol;
      written = true;
      out += wheel.substr(line.start, line.next - line.start);
    } else {
      out += wheel.substr(line.start, line.next - line.start);
      if (line.next == line.end) out += eol;  // a last line without a line break
    }
    pos = line.next;
    if (!has_build && !written && pos == after_tags) {
      out += build_line + eol;
      written = true;
    }
  }
  if (!written) out += build_line + eol;
  return out;
}

// RECORD is CSV: a path with a comma, quote or line break is quoted, quotes doubled.
std::string csv_field(std::string_view s) {
  if (s.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// A build tag starts with a digit; the rest is what a file name part may hold
// (docs/packaging.md, "Build tags").
bool valid_build_tag(std::string_view tag) {
  if (tag.empty() || tag.front() < '0' || tag.front() > '9') return false;
  return std::all_of(tag.begin(), tag.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.';
  });
}

void check_platform_tags(const std::vector<std::string>& tags, Problems& problems) {
  if (tags.empty()) problems.add("the platform tag set is empty");
  std::set<std::string_view> seen;
  for (const auto& tag : tags) {
    const bool ok = !tag.empty() && std::all_of(tag.begin(), tag.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    });
    if (!ok) {
      problems.add("platform tag " + quote_name(tag) + " is not valid (letters, digits and '_')");
    } else if (!seen.insert(tag).second) {
      problems.add("platform tag " + quote_name(tag) + " is given twice");
    }
  }
}

std::string escaped_name(std::string_view name) {
  std::string out = core::normalize_name(name);
  std::replace(out.begin(), out.end(), '-', '_');
  return out;
}

std::vector<std::string> expanded_tags(const core::WheelTags& tags) {
  std::vector<std::string> out;
  for (const auto& py : tags.python_tags()) {
    for (const auto& abi : tags.abi_tags()) {
      for (const auto& plat : tags.platform_tags()) {
        std::string tag = py;
        tag.append("-").append(abi).append("-").append(plat);
        out.push_back(std::move(tag));
      }
    }
  }
  return out;
}

// Freeing a writer abandoned on an error path still flushes it (archive_write_fail would leak
// its compressor); the flush goes to the temp file, which is removed afterwards.
struct ArchiveWriteDeleter {
  void operator()(struct ::archive* a) const { archive_write_free(a); }
};
using ArchiveWriter = std::unique_ptr<struct ::archive, ArchiveWriteDeleter>;

struct EntryDeleter {
  void operator()(struct archive_entry* e) const { archive_entry_free(e); }
};
using Entry = std::unique_ptr<struct archive_entry, EntryDeleter>;

// Where libarchive's output goes, with the first write error kept so that ENOSPC becomes
// Errc::storage_full rather than a libarchive message.
struct Sink {
  int fd = -1;
  std::optional<Error> error;

  static la_ssize_t write(struct ::archive*, void* data, const void* buffer, std::size_t size) {
    auto* self = static_cast<Sink*>(data);
    auto status = write_all(self->fd, buffer, size);
    if (!status) {
      self->error = status.error();
      return -1;
    }
    return static_cast<la_ssize_t>(size);
  }
};

// The output file until commit(); removed on destruction unless committed, so that a failed
// retag leaves nothing behind.
class TempFile {
 public:
  TempFile() = default;
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (!path_.empty()) ::unlink(path_.c_str());
  }

  Status create(const fs::path& dir, const std::string& final_name) {
    std::string tmpl = (dir / ("." + final_name + ".XXXXXX")).string();
    fd_.reset(::mkostemp(tmpl.data(), O_CLOEXEC));
    if (!fd_.valid()) return errno_error(errno, "create a temporary file in " + dir.string());
    path_ = tmpl;
    // mkostemp creates 0600; a wheel is an ordinary, world-readable file.
    if (::fchmod(fd_.get(), kDefaultFileMode) != 0) return errno_error(errno, "chmod " + path_);
    return ok_status();
  }

  [[nodiscard]] int fd() const { return fd_.get(); }

  Status commit(const fs::path& dest) {
    if (::fsync(fd_.get()) != 0) return errno_error(errno, "fsync " + path_);
    fd_.reset();
    if (::rename(path_.c_str(), dest.c_str()) != 0) {
      return errno_error(errno, "rename to " + dest.string());
    }
    path_.clear();
    return fsync_dir(dest.parent_path());
  }

 private:
  UniqueFd fd_;
  std::string path_;
};

struct RecordLine {
  std::string path;
  std::string hash;  ///< urlsafe base64 of the sha256, no padding
  std::uint64_t size = 0;
};

class Retagger {
 public:
  Retagger(const fs::path& wheel, const Limits& limits) : wheel_(wheel), limits_(limits) {}

  Result<fs::path> run(const WheelChanges& changes, const fs::path& out_dir);

 private:
  enum class Pass { payload, dist_info };

  // Called for each member in file order; sets `consumed` when it has read the member's data.
  using MemberVisitor = std::function<Status(struct ::archive*, struct archive_entry*,
                                             const ZipMember&, bool& consumed)>;

  Status visit_members(const MemberVisitor& visit);
  Status check_contents();
  Status copy_members(Pass pass);
  Status copy_member(struct ::archive* reader, struct archive_entry* in, const ZipMember& member,
                     const std::string& new_name);
  Status write_entry_header(struct archive_entry* in, const std::string& name, mode_t type,
                            std::uint64_t size);
  Status write_bytes(const void* data, std::size_t size, std::string_view what);
  Status write_whole(struct archive_entry* in, const std::string& name, std::string_view data);
  Status finish_entry(std::string_view what);
  Status write_record();
  [[nodiscard]] std::string rename(const std::string& name) const;
  [[nodiscard]] bool in_dist_info(const std::string& name) const;
  [[nodiscard]] Error write_error(std::string_view what) const;

  const fs::path& wheel_;
  const Limits& limits_;
  OpenFile file_;
  // Members in file order, the order in which libarchive visits them.
  std::vector<ZipMember> members_;
  core::DistFilename filename_;
  std::string old_dist_info_;  // "{old stem}.dist-info"
  std::string old_data_;       // "{old stem}.data"
  std::string new_stem_;
  std::string new_version_;
  std::vector<std::string> tags_;
  std::optional<std::string> new_build_;  // the Build line WHEEL gets; nullopt: WHEEL's is kept
  bool version_changes_ = false;          // METADATA's Version is rewritten
  time_t metadata_mtime_ = 0;  // RECORD gets it too, so that the output depends on the input only
  // Destroyed in reverse order: the writer before the sink and the file it writes to.
  TempFile temp_;
  Sink sink_;
  ArchiveWriter writer_;
  std::vector<RecordLine> record_;
  std::set<std::string> written_names_;
};

std::string Retagger::rename(const std::string& name) const {
  const std::string_view top = top_component(name);
  if (top == old_dist_info_) {
    return new_stem_ + std::string(kDistInfoSuffix) + name.substr(top.size());
  }
  if (top == old_data_) return new_stem_ + ".data" + name.substr(top.size());
  return name;
}

bool Retagger::in_dist_info(const std::string& name) const {
  return top_component(name) == old_dist_info_;
}

Error Retagger::write_error(std::string_view what) const {
  if (sink_.error) return *sink_.error;
  return make_error(Errc::internal,
                    "cannot write " + std::string(what) + ": " + archive_error(writer_.get()));
}

Status Retagger::write_entry_header(struct archive_entry* in, const std::string& name, mode_t type,
                                    std::uint64_t size) {
  if (!written_names_.insert(name).second) {
    return invalid("two members would be named " + quote_name(name));
  }
  const Entry out(archive_entry_new());
  if (!out) throw std::bad_alloc();
  archive_entry_set_pathname_utf8(out.get(), name.c_str());
  archive_entry_set_filetype(out.get(), static_cast<unsigned>(type));
  // Members written by tools that record no Unix mode read back as 0; give them the usual one.
  const mode_t perm = archive_entry_perm(in) & 07777;
  archive_entry_set_perm(
      out.get(), perm != 0 ? perm : (type == AE_IFDIR ? kDefaultDirMode : kDefaultFileMode));
  if (archive_entry_mtime_is_set(in) != 0) {
    archive_entry_set_mtime(out.get(), archive_entry_mtime(in), 0);
  }
  archive_entry_set_size(out.get(), static_cast<la_int64_t>(size));
  const int status = archive_write_header(writer_.get(), out.get());
  if (status != ARCHIVE_OK) return write_error(name);
  return ok_status();
}

Status Retagger::write_bytes(const void* data, std::size_t size, std::string_view what) {
  if (size == 0) return ok_status();
  const la_ssize_t n = archive_write_data(writer_.get(), data, size);
  if (n < 0 || static_cast<std::size_t>(n) != size) return write_error(what);
  return ok_status();
}

Status Retagger::finish_entry(std::string_view what) {
  if (archive_write_finish_entry(writer_.get()) != ARCHIVE_OK) return write_error(what);
  return ok_status();
}

Status Retagger::write_whole(struct archive_entry* in, const std::string& name,
                             std::string_view data) {
  if (auto s = write_entry_header(in, name, AE_IFREG, data.size()); !s) return s;
  if (auto s = write_bytes(data.data(), data.size(), name); !s) return s;
  if (auto s = finish_entry(name); !s) return s;
  record_.push_back({name, base64url_nopad_encode(crypto::sha256_raw(data)), data.size()});
  return ok_status();
}

Status Retagger::copy_member(struct ::archive* reader, struct archive_entry* in,
                             const ZipMember& member, const std::string& new_name) {
  const auto type = archive_entry_filetype(in);
  if (type == AE_IFDIR) {
    if (auto s = write_entry_header(in, new_name, AE_IFDIR, 0); !s) return s;
    return finish_entry(new_name);
  }
  if (type != AE_IFREG) {
    return invalid(quote_name(member.name) + " is neither a file nor a directory");
  }

  const std::string metadata_name = old_dist_info_ + "/METADATA";
  const std::string wheel_name = old_dist_info_ + "/WHEEL";
  if (member.name == metadata_name || member.name == wheel_name) {
    auto data = read_member_data(reader, in, member.name, limits_.max_metadata_bytes);
    if (!data) return data.error();
    if (member.name == wheel_name) {
      std::string wheel = rewrite_wheel_tags(*data, tags_);
      if (new_build_) wheel = rewrite_wheel_build(wheel, *new_build_);
      return write_whole(in, new_name, wheel);
    }
    if (!version_changes_) return write_whole(in, new_name, *data);
    auto rewritten = rewrite_metadata_version(*data, new_version_, member.name);
    if (!rewritten) return rewritten.error();
    return write_whole(in, new_name, *rewritten);
  }

  // Streamed: the payload of a CUDA wheel can be hundreds of megabytes. The size comes from our
  // own layout scan, checked against the local header; libarchive checks the CRC.
  if (auto s = write_entry_header(in, new_name, AE_IFREG, member.uncompressed_size); !s) return s;
  crypto::Hasher hasher(crypto::Algorithm::sha256);
  std::vector<char> buffer(kChunk);
  std::uint64_t total = 0;
  while (true) {
    const la_ssize_t n = archive_read_data(reader, buffer.data(), buffer.size());
    if (n < 0) {
      return invalid(quote_name(member.name) + " cannot be read: " + archive_error(reader));
    }
    if (n == 0) break;
    const auto count = static_cast<std::size_t>(n);
    total += count;
    if (total > member.uncompressed_size) break;
    hasher.update(buffer.data(), count);
    if (auto s = write_bytes(buffer.data(), count, new_name); !s) return s;
  }
  if (total != member.uncompressed_size) {
    return invalid(quote_name(member.name) + " does not inflate to its declared size");
  }
  if (auto s = finish_entry(new_name); !s) return s;
  record_.push_back({new_name, base64url_nopad_encode(hasher.finish()), total});
  return ok_status();
}

Status Retagger::visit_members(const MemberVisitor& visit) {
  const ArchiveReader reader = new_archive_reader();
  archive_read_support_format_zip_seekable(reader.get());
  FdSource source(file_.fd.get(), file_.size);
  if (source.open(reader.get(), Seeking::yes) != ARCHIVE_OK) {
    return invalid("not a zip archive (" + archive_error(reader.get()) + ")");
  }
  for (const ZipMember& member : members_) {
    struct archive_entry* entry = nullptr;
    const int status = archive_read_next_header(reader.get(), &entry);
    if (status == ARCHIVE_EOF) {
      return invalid("the zip reader did not find " + quote_name(member.name));
    }
    // Warnings repeat what the layout scan has checked, or say that a non-ASCII name cannot be
    // converted to the C locale; names come from our own scan, so neither matters here.
    if (status < ARCHIVE_WARN) {
      return invalid("cannot read the zip archive: " + archive_error(reader.get()));
    }
    // libarchive visits members in file order, as members_ is sorted, but cannot always spell a
    // non-ASCII name; where it can, the name must be the one we expect, so that a reader that
    // skipped a member is caught.
    const char* seen = archive_entry_pathname(entry);
    if (seen != nullptr && member.name != seen) {
      return invalid("the zip reader found " + quote_name(seen) + " where " +
                     quote_name(member.name) + " should be");
    }
    bool consumed = false;
    if (auto s = visit(reader.get(), entry, member, consumed); !s) return s;
    if (!consumed && archive_read_data_skip(reader.get()) < ARCHIVE_WARN) {
      return invalid("cannot read the zip archive: " + archive_error(reader.get()));
    }
  }
  return ok_status();
}

Status Retagger::copy_members(Pass pass) {
  const std::string record_name = old_dist_info_ + "/RECORD";
  return visit_members([&](struct ::archive* reader, struct archive_entry* entry,
                           const ZipMember& member, bool& consumed) -> Status {
    const bool wanted = in_dist_info(member.name) == (pass == Pass::dist_info) &&
                        member.name != record_name && member.name != record_name + ".jws" &&
                        member.name != record_name + ".p7s";
    if (!wanted) return ok_status();
    consumed = true;
    return copy_member(reader, entry, member, rename(member.name));
  });
}

Status Retagger::write_record() {
  const std::string name = new_stem_ + std::string(kDistInfoSuffix) + "/RECORD";
  std::string record;
  for (const auto& line : record_) {
    record +=
        csv_field(line.path) + ",sha256=" + line.hash + "," + std::to_string(line.size) + "\n";
  }
  record += csv_field(name) + ",,\n";

  if (!written_names_.insert(name).second) {
    return invalid("two members would be named " + quote_name(name));
  }
  const Entry out(archive_entry_new());
  if (!out) throw std::bad_alloc();
  archive_entry_set_pathname_utf8(out.get(), name.c_str());
  archive_entry_set_filetype(out.get(), AE_IFREG);
  archive_entry_set_perm(out.get(), kDefaultFileMode);
  archive_entry_set_mtime(out.get(), metadata_mtime_, 0);
  archive_entry_set_size(out.get(), static_cast<la_int64_t>(record.size()));
  if (archive_write_header(writer_.get(), out.get()) != ARCHIVE_OK) return write_error(name);
  if (auto s = write_bytes(record.data(), record.size(), name); !s) return s;
  return finish_entry(name);
}

Status Retagger::check_contents() {
  // METADATA and WHEEL are read once before anything is written, so that a wheel whose
  // metadata contradicts its file name fails without producing output.
  std::string metadata;
  std::string wheel;
  const std::string metadata_name = old_dist_info_ + "/METADATA";
  const std::string wheel_name = old_dist_info_ + "/WHEEL";
  auto scanned = visit_members([&](struct ::archive* reader, struct archive_entry* entry,
                                   const ZipMember& member, bool& consumed) -> Status {
    std::string* target = member.name == metadata_name ? &metadata
                          : member.name == wheel_name  ? &wheel
                                                       : nullptr;
    if (target == nullptr) return ok_status();
    if (archive_entry_filetype(entry) != AE_IFREG) {
      return invalid(quote_name(member.name) + " is not a regular file");
    }
    if (target == &metadata) metadata_mtime_ = archive_entry_mtime(entry);
    consumed = true;
    auto data = read_member_data(reader, entry, member.name, limits_.max_metadata_bytes);
    if (!data) return data.error();
    *target = std::move(*data);
    return ok_status();
  });
  if (!scanned) return scanned;

  Problems problems;
  const auto parsed = core::parse_core_metadata(metadata);
  if (!parsed) {
    problems.add(old_dist_info_ + "/METADATA: " + parsed.error().message);
  } else {
    if (core::normalize_name(parsed->name) != filename_.normalized_name) {
      problems.add("METADATA names the project " + quote_name(parsed->name) +
                   " but the file name " + quote_name(filename_.name));
    }
    const auto version = core::Version::parse(parsed->version);
    if (!version) {
      problems.add("METADATA Version " + quote_name(parsed->version) + " is not a valid version");
    } else if (version->public_str() != filename_.version.public_str()) {
      problems.add("METADATA Version " + quote_name(parsed->version) +
                   " contradicts the file name's " + quote_name(filename_.version_text));
    }
    if (version_changes_) {
      if (auto rewritten = rewrite_metadata_version(metadata, new_version_, "METADATA");
          !rewritten) {
        problems.add(rewritten.error().message);
      }
    }
  }
  if (const auto tags = core::parse_wheel_file(wheel); !tags) {
    problems.add(old_dist_info_ + "/WHEEL: " + tags.error().message);
  }
  if (!problems.empty()) return problems.to_error();
  return ok_status();
}

Result<fs::path> Retagger::run(const WheelChanges& changes, const fs::path& out_dir_arg) {
  const fs::path out_dir = out_dir_arg.empty() ? fs::path(".") : out_dir_arg;
  Problems problems;
  std::optional<std::string> label;
  if (changes.local_label) {
    label = normalize_label(*changes.local_label);
    if (!label) {
      problems.add("local version label " + quote_name(*changes.local_label) +
                   " is not letters and digits separated by '.', '-' or '_'");
    }
  }
  if (changes.build_tag && !valid_build_tag(*changes.build_tag)) {
    problems.add("build tag " + quote_name(*changes.build_tag) +
                 " is not valid (a digit first, then letters, digits, '_' and '.')");
  }
  if (changes.platform_tags) check_platform_tags(*changes.platform_tags, problems);
  auto parsed_name = core::parse_dist_filename(wheel_.filename().string());
  if (!parsed_name) {
    problems.add(parsed_name.error().message);
  } else if (parsed_name->kind != core::DistKind::wheel) {
    problems.add(quote_name(wheel_.filename().string()) + " is not a wheel");
  }
  if (!problems.empty()) return problems.to_error();
  filename_ = std::move(*parsed_name);

  version_changes_ = label.has_value();
  auto version = core::Version::parse(label ? filename_.version.public_str() + "+" + *label
                                            : filename_.version_text);
  if (!version) return version.error();
  new_version_ = version->str();
  new_stem_ = escaped_name(filename_.name) + "-" + new_version_;
  core::WheelTags tags = filename_.tags;
  if (changes.build_tag) tags.build_tag = *changes.build_tag;
  if (changes.platform_tags) {
    tags.platform_tag.clear();
    for (const auto& tag : *changes.platform_tags) {
      tags.platform_tag += (tags.platform_tag.empty() ? "" : ".") + tag;
    }
  }
  new_build_ = changes.build_tag;
  tags_ = expanded_tags(tags);
  std::string new_filename = new_stem_;
  if (tags.build_tag) new_filename += "-" + *tags.build_tag;
  new_filename += "-" + tags.python_tag + "-" + tags.abi_tag + "-" + tags.platform_tag + ".whl";
  if (auto checked = core::parse_dist_filename(new_filename); !checked) {
    return invalid("the new file name " + quote_name(new_filename) +
                   " is not valid: " + checked.error().message);
  }

  auto file = open_archive_file(wheel_);
  if (!file) return file.error();
  file_ = std::move(*file);

  // The same layout and .dist-info checks as read_wheel, so that retagging accepts exactly the
  // wheels the index accepts.
  CappedProblems layout_problems;
  auto members = scan_zip_layout(file_.fd.get(), file_.size, limits_, layout_problems);
  if (!members) return members.error();
  old_dist_info_ =
      check_dist_info(*members, filename_.name, filename_.version_text, layout_problems);
  for (const ZipMember& member : *members) {
    if (!is_utf8(member.name)) {
      layout_problems.add("member name " + quote_name(member.name) + " is not UTF-8");
    }
  }
  if (!layout_problems.empty()) return layout_problems.to_error();
  old_data_ = old_dist_info_.substr(0, old_dist_info_.size() - kDistInfoSuffix.size()) + ".data";
  members_ = std::move(*members);
  std::sort(members_.begin(), members_.end(), [](const ZipMember& a, const ZipMember& b) {
    return a.local_header_offset < b.local_header_offset;
  });
  if (auto s = check_contents(); !s) return s.error();

  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return errno_error(ec.value(), "create " + out_dir.string());
  if (auto s = temp_.create(out_dir, new_filename); !s) return s.error();

  writer_.reset(archive_write_new());
  if (!writer_) throw std::bad_alloc();
  archive_write_set_format_zip(writer_.get());
  // Names are written as UTF-8 with the zip UTF-8 flag, which Python's zipfile needs to read
  // non-ASCII names correctly; no padding after the central directory.
  if (archive_write_set_options(writer_.get(), "zip:compression=deflate,zip:hdrcharset=UTF-8") !=
          ARCHIVE_OK ||
      archive_write_set_bytes_in_last_block(writer_.get(), 1) != ARCHIVE_OK) {
    return make_error(Errc::internal,
                      "cannot configure the zip writer: " + archive_error(writer_.get()));
  }
  sink_.fd = temp_.fd();
  if (archive_write_open(writer_.get(), &sink_, nullptr, &Sink::write, nullptr) != ARCHIVE_OK) {
    return write_error(new_filename);
  }

  if (auto s = copy_members(Pass::payload); !s) return s.error();
  if (auto s = copy_members(Pass::dist_info); !s) return s.error();
  if (auto s = write_record(); !s) return s.error();
  if (archive_write_close(writer_.get()) != ARCHIVE_OK) return write_error(new_filename);

  const fs::path dest = out_dir / new_filename;
  if (auto s = temp_.commit(dest); !s) return s.error();
  return dest;
}

}  // namespace

Result<fs::path> rewrite_wheel(const fs::path& wheel, const WheelChanges& changes,
                               const fs::path& out_dir, const Limits& limits) {
  Retagger retagger(wheel, limits);
  return retagger.run(changes, out_dir);
}

Result<fs::path> retag_wheel(const fs::path& wheel, std::string_view new_local_label,
                             const fs::path& out_dir, const Limits& limits) {
  WheelChanges changes;
  changes.local_label = std::string(new_local_label);
  return rewrite_wheel(wheel, changes, out_dir, limits);
}

}  // namespace wf::archive
