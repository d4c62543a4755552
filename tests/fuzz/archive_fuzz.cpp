// read_wheel, read_sdist_pkg_info and inspect_wheel_binaries on arbitrary bytes, written to an
// in-memory file (memfd) and opened through /proc/self/fd. Seeds: tests/fuzz/make_seeds.py writes
// small valid wheels (demo-1.0, one with ELF members) and sdists. Checked: no crash, failures are
// `invalid` (the file is always readable), and what is returned respects the limits.

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "fuzz_check.hpp"
#include "wheelforge/archive/elf.hpp"
#include "wheelforge/archive/reader.hpp"

namespace {

// Small limits reach the limit checks with small inputs; the code paths are the production
// ones.
wf::archive::Limits fuzz_limits() {
  wf::archive::Limits limits;
  limits.max_metadata_bytes = 64 * 1024;
  limits.max_members = 64;
  limits.max_inflated_bytes = 1024 * 1024;
  return limits;
}

int memfd() {
  static const int fd = [] {
    const int f = ::memfd_create("wf-fuzz-archive", MFD_CLOEXEC);
    if (f < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    return f;
  }();
  return fd;
}

void write_all(int fd, const std::uint8_t* data, std::size_t size) {
  WF_FUZZ_CHECK(::ftruncate(fd, 0) == 0);
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    WF_FUZZ_CHECK(n > 0);
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const int fd = memfd();
  write_all(fd, data, size);
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  const auto limits = fuzz_limits();

  const auto wheel = wf::archive::read_wheel(path, "demo", "1.0", limits);
  if (wheel) {
    WF_FUZZ_CHECK(wheel->dist_info_dir.ends_with(".dist-info"));
    WF_FUZZ_CHECK(wheel->metadata.size() <= limits.max_metadata_bytes);
    WF_FUZZ_CHECK(wheel->wheel.size() <= limits.max_metadata_bytes);
  } else {
    WF_FUZZ_CHECK(wheel.error().code == wf::Errc::invalid);
    WF_FUZZ_CHECK(!wheel.error().message.empty());
  }

  wf::archive::InspectLimits inspect;
  inspect.max_members = limits.max_members;
  inspect.max_binaries = 8;
  inspect.max_inflated_bytes = 4 * 1024 * 1024;
  const auto binaries = wf::archive::inspect_wheel_binaries(path, inspect);
  if (binaries) {
    WF_FUZZ_CHECK(binaries->size() <= inspect.max_binaries);
    for (const auto& b : *binaries) WF_FUZZ_CHECK(b.elf.has_value() != !b.problem.empty());
  } else {
    WF_FUZZ_CHECK(binaries.error().code == wf::Errc::invalid);
    WF_FUZZ_CHECK(!binaries.error().message.empty());
  }

  const auto pkg_info = wf::archive::read_sdist_pkg_info(path, limits);
  if (pkg_info) {
    WF_FUZZ_CHECK(pkg_info->size() <= limits.max_metadata_bytes);
  } else {
    WF_FUZZ_CHECK(pkg_info.error().code == wf::Errc::invalid);
    WF_FUZZ_CHECK(!pkg_info.error().message.empty());
  }
  return 0;
}
