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
#include "archive/retag_text.hpp"
#include "archive/zip_layout.hpp"
#include "wheelforge/core/filename.hpp"
#include "wheelforge/core/metadata.hpp"
#include "wheelforge/core/name.hpp"
#include "wheelforge/core/version.hpp"
#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/util/atomic_file.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::archive {
namespace {

namespace fs = std::filesystem;
using namespace retag_text;

constexpr std::size_t kCopyChunk = std::size_t{64} * 1024U;
constexpr mode_t kDefaultFileMode = 0644;
constexpr mode_t kDefaultDirMode = 0755;

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
  // Destroyed in reverse order: the writer before the sink and the file it writes to. The
  // output file is removed on destruction unless committed: a failed retag leaves nothing.
  std::optional<AtomicFile> temp_;
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
  std::vector<char> buffer(kCopyChunk);
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
  auto temp = AtomicFile::create(out_dir, "." + new_filename + ".");
  if (!temp) return temp.error();
  temp_.emplace(std::move(*temp));
  // mkostemp creates 0600; a wheel is an ordinary, world-readable file.
  if (auto s = temp_->set_mode(kDefaultFileMode); !s) return s.error();

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
  sink_.fd = temp_->fd();
  if (archive_write_open(writer_.get(), &sink_, nullptr, &Sink::write, nullptr) != ARCHIVE_OK) {
    return write_error(new_filename);
  }

  if (auto s = copy_members(Pass::payload); !s) return s.error();
  if (auto s = copy_members(Pass::dist_info); !s) return s.error();
  if (auto s = write_record(); !s) return s.error();
  if (archive_write_close(writer_.get()) != ARCHIVE_OK) return write_error(new_filename);

  const fs::path dest = out_dir / new_filename;
  if (auto s = temp_->commit(dest); !s) return s.error();
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
