#include "wheelforge/store/read_cache.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>
#include <vector>

#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::store {

namespace fs = std::filesystem;

Result<std::unique_ptr<ReadCache>> ReadCache::open(const fs::path& dir, fs::path tmp_dir,
                                                   std::uint64_t max_bytes) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return errno_error(ec.value(), "create " + dir.string());
  std::unique_ptr<ReadCache> cache(new ReadCache(dir, std::move(tmp_dir), max_bytes));
  struct Found {
    std::string sha256;
    std::uint64_t size = 0;
    struct timespec used {};
  };
  std::vector<Found> found;
  std::vector<fs::path> strays;
  auto it = fs::recursive_directory_iterator(dir, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const fs::path& p = it->path();
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || S_ISDIR(st.st_mode)) continue;
    const std::string name = p.filename().string();
    if (!S_ISREG(st.st_mode) || !is_sha256_hex(name) || cache->path_of(name) != p.string()) {
      strays.push_back(p);
      continue;
    }
    found.push_back(Found{name, static_cast<std::uint64_t>(st.st_size), st.st_atim});
  }
  if (ec) return errno_error(ec.value(), "list " + dir.string());
  for (const auto& p : strays) fs::remove(p, ec);
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) {
    return a.used.tv_sec != b.used.tv_sec ? a.used.tv_sec < b.used.tv_sec
                                          : a.used.tv_nsec < b.used.tv_nsec;
  });
  std::lock_guard lock(cache->mu_);
  for (const auto& f : found) cache->add_locked(f.sha256, f.size);
  return cache;
}

std::string ReadCache::path_of(std::string_view sha256) const {
  std::string out = dir_.string();
  if (!out.empty() && out.back() != '/') out.push_back('/');
  out.append(sha256.substr(0, 2));
  out.push_back('/');
  out.append(sha256.substr(2, 2));
  out.push_back('/');
  out.append(sha256);
  return out;
}

std::optional<std::string> ReadCache::lookup(std::string_view sha256) {
  if (!is_sha256_hex(sha256)) return std::nullopt;
  const std::string key(sha256);
  std::string path = path_of(sha256);
  std::lock_guard lock(mu_);
  const auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    // Removed by another process sharing the directory (or by hand): fetched again.
    drop_locked(key);
    return std::nullopt;
  }
  uses_.splice(uses_.end(), uses_, it->second.use);
  return path;
}

Result<std::string> ReadCache::fill(std::string_view sha256, const BlobFetch& fetch) {
  if (!is_sha256_hex(sha256)) return make_error(Errc::internal, "cache fill of a malformed sha256");
  if (auto hit = lookup(sha256)) return *hit;
  auto file = AtomicFile::create(tmp_dir_, "cache-");
  if (!file) return file.error();
  crypto::Hasher hasher(crypto::Algorithm::sha256);
  std::uint64_t size = 0;
  auto got = fetch([&](std::string_view chunk) -> Status {
    if (auto st = file->write(chunk); !st) return st;
    hasher.update(chunk.data(), chunk.size());
    size += chunk.size();
    return ok_status();
  });
  if (!got) return got.error();
  const std::string actual = hasher.finish_hex();
  if (actual != sha256) {
    return make_error(Errc::io, "the stored bytes of blob " + std::string(sha256) +
                                    " have sha256 " + actual + ": damaged in the store");
  }
  const std::string dest = path_of(sha256);
  if (auto st = adopt(sha256, std::move(*file), size); !st) return st.error();
  return dest;
}

Status ReadCache::adopt(std::string_view sha256, AtomicFile file, std::uint64_t size) {
  const fs::path dest = path_of(sha256);
  std::error_code ec;
  fs::create_directories(dest.parent_path(), ec);
  if (ec) return errno_error(ec.value(), "create " + dest.parent_path().string());
  if (auto st = file.set_mode(0444); !st) return st;
  // A cache needs no durability: a copy lost in a crash is fetched again.
  if (auto st = file.commit(dest, Durability::deferred); !st) return st;
  std::lock_guard lock(mu_);
  add_locked(std::string(sha256), size);
  return ok_status();
}

void ReadCache::forget(std::string_view sha256) {
  if (!is_sha256_hex(sha256)) return;
  const std::string path = path_of(sha256);
  std::lock_guard lock(mu_);
  drop_locked(std::string(sha256));
  ::unlink(path.c_str());
}

void ReadCache::add_locked(const std::string& sha256, std::uint64_t size) {
  drop_locked(sha256);
  uses_.push_back(sha256);
  entries_.emplace(sha256, Entry{size, std::prev(uses_.end())});
  total_ += size;
  while (total_ > max_bytes_ && uses_.size() > 1) {
    const std::string victim = uses_.front();
    const std::string path = path_of(victim);
    drop_locked(victim);
    ::unlink(path.c_str());
  }
}

void ReadCache::drop_locked(const std::string& sha256) {
  const auto it = entries_.find(sha256);
  if (it == entries_.end()) return;
  total_ -= it->second.size;
  uses_.erase(it->second.use);
  entries_.erase(it);
}

std::uint64_t ReadCache::bytes() const {
  std::lock_guard lock(mu_);
  return total_;
}

std::size_t ReadCache::files() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

}  // namespace wf::store
