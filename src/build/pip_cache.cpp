#include "wheelforge/build/pip_cache.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <vector>

namespace wf::build {

namespace fs = std::filesystem;

fs::path pip_cache_dir(const fs::path& builds_dir) {
  return builds_dir / "pip-cache";
}

CacheTrim trim_pip_cache(const fs::path& dir, std::uint64_t limit) {
  struct Entry {
    std::int64_t used = 0;  // seconds
    std::uint64_t bytes = 0;
    fs::path path;
  };
  CacheTrim out;
  if (limit == 0) return out;
  std::vector<Entry> files;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec),
       end;
       !ec && it != end; it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    // Blocks actually allocated: what the bound is about.
    const auto bytes = static_cast<std::uint64_t>(st.st_blocks) * 512U;
    files.push_back(
        Entry{std::max<std::int64_t>(st.st_atim.tv_sec, st.st_mtim.tv_sec), bytes, it->path()});
    out.bytes_before += bytes;
  }
  if (out.bytes_before <= limit) return out;
  std::sort(files.begin(), files.end(),
            [](const Entry& a, const Entry& b) { return a.used < b.used; });
  const std::uint64_t target = limit - limit / 8;
  std::uint64_t left = out.bytes_before;
  for (const auto& f : files) {
    if (left <= target) break;
    if (!fs::remove(f.path, ec)) continue;
    left -= f.bytes;
    ++out.removed;
    out.removed_bytes += f.bytes;
  }
  return out;
}

}  // namespace wf::build
