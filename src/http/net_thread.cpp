#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server_impl.hpp"

namespace wf::http {

constinit thread_local NetThread* t_net_thread = nullptr;

NetThread::Blob NetThread::open_blob(const std::string& path, std::uint64_t installed) {
  forget_if_reinstalled(installed);
  if (const auto it = blobs.find(path); it != blobs.end()) return it->second;
  Blob blob{std::make_shared<UniqueFd>(::open(path.c_str(), O_RDONLY | O_CLOEXEC)), nullptr};
  if (!blob.fd->valid()) return blob;
  struct stat st {};
  if (::fstat(blob.fd->get(), &st) == 0 && st.st_size <= static_cast<off_t>(kSmallBlob)) {
    auto bytes = std::make_shared<std::string>(static_cast<std::size_t>(st.st_size), '\0');
    if (::pread(blob.fd->get(), bytes->data(), bytes->size(), 0) ==
        static_cast<ssize_t>(bytes->size())) {
      blob.bytes = std::move(bytes);
    }
  }
  if (blobs.size() >= kMaxCachedBlobs) blobs.clear();
  blobs.emplace(path, blob);
  return blob;
}

std::shared_ptr<UniqueFd> NetThread::page_file(const std::shared_ptr<const std::string>& page,
                                               std::uint64_t installed) {
  if (page->size() < kFilePage) return nullptr;
  forget_if_reinstalled(installed);
  if (const auto it = pages.find(page.get()); it != pages.end()) return it->second.fd;
  auto fd = std::make_shared<UniqueFd>(::memfd_create("wheelforge-page", MFD_CLOEXEC));
  if (!fd->valid() || !write_all(fd->get(), page->data(), page->size())) return nullptr;
  if (pages.size() >= kMaxCachedPages) pages.clear();
  // The entry holds the page, so that its address is not reused while it is a key.
  pages.emplace(page.get(), PageFile{page, fd});
  return fd;
}

NetThread::Evicted NetThread::evict_one() {
  if (SessionBase* s = fresh.front(); s != nullptr) {
    s->evict();
    return Evicted::fresh;
  }
  if (SessionBase* s = idle.front(); s != nullptr) {
    s->evict();
    return Evicted::idle;
  }
  return Evicted::none;
}

void NetThread::forget_if_reinstalled(std::uint64_t installed) {
  if (cached_installed == installed) return;
  blobs.clear();
  pages.clear();
  cached_installed = installed;
}

}  // namespace wf::http
