#include "files.hpp"

#include <algorithm>
#include <cerrno>

namespace wf::build {

namespace fs = std::filesystem;

Error fs_error(std::string_view what, const fs::path& path, const std::error_code& ec) {
  const bool full = ec == std::errc::no_space_on_device ||
                    (ec.category() == std::generic_category() && ec.value() == EDQUOT) ||
                    (ec.category() == std::system_category() && ec.value() == EDQUOT);
  return make_error(full ? Errc::storage_full : Errc::io,
                    std::string(what) + " " + path.string() + ": " + ec.message());
}

Status make_directories(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fs_error("cannot create directory", dir, ec);
  // create_directories reports success when the path exists as something else.
  if (!fs::is_directory(dir, ec)) {
    return fs_error("cannot create directory", dir,
                    ec ? ec : std::make_error_code(std::errc::not_a_directory));
  }
  return ok_status();
}

Status remove_tree(const fs::path& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) return fs_error("cannot remove", path, ec);
  return ok_status();
}

Status fresh_directory(const fs::path& dir) {
  if (auto st = remove_tree(dir); !st) return st;
  return make_directories(dir);
}

Result<std::vector<fs::directory_entry>> list_directory(const fs::path& dir) {
  std::vector<fs::directory_entry> entries;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) entries.push_back(*it);
  if (ec) return fs_error("cannot list", dir, ec);
  return entries;
}

Status clear_directory_except(const fs::path& dir, std::initializer_list<std::string_view> keep) {
  auto entries = list_directory(dir);
  if (!entries) return entries.error();
  for (const auto& entry : *entries) {
    const std::string name = entry.path().filename().string();
    if (std::find(keep.begin(), keep.end(), name) != keep.end()) continue;
    if (auto st = remove_tree(entry.path()); !st) return st;
  }
  return ok_status();
}

}  // namespace wf::build
