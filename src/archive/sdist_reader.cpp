#include <archive.h>
#include <archive_entry.h>

#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "archive/archive_source.hpp"
#include "archive/member_checks.hpp"
#include "archive/zip_layout.hpp"
#include "wheelforge/archive/reader.hpp"

namespace wf::archive {
namespace {

constexpr std::string_view kNotGzipTar = "not a gzip-compressed tar archive";

std::string_view without_trailing_slash(std::string_view name) {
  while (!name.empty() && name.back() == '/') name.remove_suffix(1);
  return name;
}

// Resolves a symlink target lexically from the directory holding the link; false when any
// step leaves the top directory. Every link is checked, so chains cannot escape either.
bool symlink_stays_inside(std::string_view link_name, std::string_view target) {
  if (target.empty() || target.front() == '/') return false;
  std::vector<std::string_view> stack;
  std::string_view dir = without_trailing_slash(link_name);
  const std::size_t last_slash = dir.rfind('/');
  // A link at the top level is the top directory itself, pointing elsewhere.
  if (last_slash == std::string_view::npos) return false;
  dir = dir.substr(0, last_slash);
  while (true) {
    const std::size_t slash = dir.find('/');
    stack.push_back(dir.substr(0, slash));
    if (slash == std::string_view::npos) break;
    dir.remove_prefix(slash + 1);
  }
  while (true) {
    const std::size_t slash = target.find('/');
    const std::string_view component = target.substr(0, slash);
    if (component == "..") {
      // The top directory is the floor: popping it leaves the sdist.
      if (stack.size() <= 1) return false;
      stack.pop_back();
    } else if (!component.empty() && component != ".") {
      stack.push_back(component);
    }
    if (slash == std::string_view::npos) break;
    target.remove_prefix(slash + 1);
  }
  return true;
}

// What a member is when it is none of the types an sdist may hold (files, directories, links),
// or nullptr. Installers that unpack an sdist would create these on the build host: a device
// node or FIFO to read from, or a sparse file that claims far more disk than it carries.
const char* refused_type(struct archive_entry* entry) {
  if (archive_entry_sparse_count(entry) > 0) return "a sparse file";
  switch (archive_entry_filetype(entry)) {
    case AE_IFCHR:
      return "a character device";
    case AE_IFBLK:
      return "a block device";
    case AE_IFIFO:
      return "a FIFO";
    case AE_IFSOCK:
      return "a socket";
    default:
      return nullptr;
  }
}

// The rules every sdist member must follow, checked as the stream passes.
class SdistChecker {
 public:
  // Checks one member's name and links. Returns whether the member is {top}/PKG-INFO.
  bool check(struct archive_entry* entry) {
    const char* raw_name = archive_entry_pathname(entry);
    if (raw_name == nullptr) {
      problems_.add("a member has a name that cannot be read");
      return false;
    }
    const std::string_view name(raw_name);
    if (!check_member_name(name, problems_)) return false;
    if (const char* type = refused_type(entry)) {
      problems_.add("member " + quote_name(name) + " is " + type +
                    " (an sdist holds files, directories and links only)");
    }
    const std::string_view key = without_trailing_slash(name);
    if (!names_.insert(std::string(key)).second)
      problems_.add("duplicate member name " + quote_name(key));

    const std::string_view component = top_component(name);
    if (!top_) {
      top_ = std::string(component);
    } else if (component != *top_) {
      problems_.add("member " + quote_name(name) + " is outside the top directory " +
                    quote_name(*top_));
      return false;
    }

    if (const char* target = archive_entry_symlink(entry); target != nullptr) {
      if (!symlink_stays_inside(name, target)) {
        problems_.add("link " + quote_name(name) + " points outside the top directory (" +
                      quote_name(target) + ")");
      }
      return false;
    }
    if (const char* target = archive_entry_hardlink(entry); target != nullptr) {
      CappedProblems ignored;
      const std::string_view target_name(target);
      if (!check_member_name(target_name, ignored) || top_component(target_name) != *top_) {
        problems_.add("link " + quote_name(name) + " points outside the top directory (" +
                      quote_name(target_name) + ")");
      }
      return false;
    }
    return key == *top_ + "/PKG-INFO" && archive_entry_filetype(entry) == AE_IFREG;
  }

  CappedProblems& problems() { return problems_; }

 private:
  CappedProblems problems_;
  std::optional<std::string> top_;
  std::unordered_set<std::string> names_;
};

}  // namespace

Result<std::string> read_sdist_pkg_info(const std::filesystem::path& path, const Limits& limits) {
  auto file = open_archive_file(path);
  if (!file) return file.error();

  const ArchiveReader reader = new_archive_reader();
  archive_read_support_filter_gzip(reader.get());
  archive_read_support_format_tar(reader.get());
  FdSource source(file->fd.get(), file->size);
  if (source.open(reader.get(), Seeking::no) != ARCHIVE_OK) {
    // Without a filter chain the gzip stream itself is damaged (truncated, bad header), which is
    // worth saying; otherwise the data simply is no gzip'd tar.
    if (archive_filter_count(reader.get()) == 0) {
      return make_error(Errc::invalid,
                        std::string(kNotGzipTar) + " (" + archive_error(reader.get()) + ")");
    }
    return make_error(Errc::invalid, std::string(kNotGzipTar));
  }
  // libarchive picks its filters while opening; without gzip it would happily read a plain tar.
  if (archive_filter_code(reader.get(), 0) != ARCHIVE_FILTER_GZIP) {
    return make_error(Errc::invalid, std::string(kNotGzipTar));
  }

  SdistChecker checker;
  auto zip_end = find_zip_end_record(file->fd.get(), file->size);
  if (!zip_end) return zip_end.error();
  if (*zip_end) {
    checker.problems().add(
        "the sdist is also a zip archive (a zip end-of-central-directory record at offset " +
        std::to_string(**zip_end) + "): zip and tar readers would see different files");
  }
  std::optional<std::string> pkg_info;
  std::uint64_t members = 0;
  std::uint64_t declared_bytes = 0;
  while (true) {
    struct archive_entry* entry = nullptr;
    const int status = archive_read_next_header(reader.get(), &entry);
    if (status == ARCHIVE_EOF) break;
    // A warning is a name that does not convert to the C locale; the name is still checked.
    if (status < ARCHIVE_WARN) {
      if (members == 0) return make_error(Errc::invalid, std::string(kNotGzipTar));
      return make_error(Errc::invalid, "cannot read the sdist: " + archive_error(reader.get()));
    }
    if (++members > limits.max_members) {
      return make_error(Errc::invalid, too_many_members(std::nullopt, limits));
    }
    // Skipping a member still inflates it, so a gzip bomb is stopped by the sizes the tar
    // headers declare, before the work is done.
    if (archive_entry_size_is_set(entry) != 0 && archive_entry_size(entry) > 0) {
      const auto size = static_cast<std::uint64_t>(archive_entry_size(entry));
      declared_bytes = size > UINT64_MAX - declared_bytes ? UINT64_MAX : declared_bytes + size;
      if (auto problem = inflated_size_problem("the sdist", declared_bytes, file->size, limits,
                                               Total::running)) {
        return make_error(Errc::invalid, std::move(*problem));
      }
    }
    if (checker.check(entry) && !pkg_info) {
      auto data = read_member_data(reader.get(), entry, archive_entry_pathname(entry),
                                   limits.max_metadata_bytes);
      if (!data) return data.error();
      pkg_info = std::move(*data);
      continue;
    }
    if (archive_read_data_skip(reader.get()) < ARCHIVE_WARN) {
      return make_error(Errc::invalid, "cannot read the sdist: " + archive_error(reader.get()));
    }
  }

  if (!pkg_info) checker.problems().add("no PKG-INFO in the top directory");
  if (!checker.problems().empty()) return checker.problems().to_error();
  return std::move(*pkg_info);
}

}  // namespace wf::archive
