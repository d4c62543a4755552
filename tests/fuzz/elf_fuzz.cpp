// read_elf on arbitrary bytes, twice: from memory, and as a deflated member of a wheel through
// inspect_wheel_binaries (the forward-only source with its passes and window). Seeds:
// tests/fuzz/make_seeds.py compiles small shared objects and executables (x86_64, and other
// architectures and byte orders with clang and lld when they are installed). Checked: no crash;
// failures are `invalid` with a message; results respect the limits; both sources read the same
// facts (unless the member needs more passes than allowed); the manylinux assessment of the facts
// does not crash and is consistent; the binary findings (core/binding.hpp) are bounded, survive
// their stored form unchanged, and a label check never fails for a binary that links no CUDA.

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "archive/zip_builder.hpp"
#include "fuzz_check.hpp"
#include "wheelforge/archive/elf.hpp"
#include "wheelforge/core/binding.hpp"
#include "wheelforge/core/manylinux.hpp"

namespace {

// Small limits reach the limit checks with small inputs; the code paths are the production
// ones.
wf::archive::ElfLimits fuzz_limits() {
  wf::archive::ElfLimits limits;
  limits.max_program_headers = 64;
  limits.max_dynamic_bytes = 16 * 1024;
  limits.max_string_table_bytes = 256 * 1024;
  limits.max_symbols = 4096;
  limits.max_version_entries = 256;
  return limits;
}

int memfd() {
  static const int fd = [] {
    const int f = ::memfd_create("wf-fuzz-elf", MFD_CLOEXEC);
    if (f < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    return f;
  }();
  return fd;
}

void write_all(int fd, const std::string& data) {
  WF_FUZZ_CHECK(::ftruncate(fd, 0) == 0);
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n =
        ::pwrite(fd, data.data() + done, data.size() - done, static_cast<off_t>(done));
    WF_FUZZ_CHECK(n > 0);
    done += static_cast<std::size_t>(n);
  }
}

void check_facts(const wf::core::ElfInfo& info, const wf::archive::ElfLimits& limits) {
  WF_FUZZ_CHECK(info.symbols.size() < limits.max_symbols);
  std::size_t versions = info.version_needs.size();
  for (const auto& need : info.version_needs) versions += need.versions.size();
  WF_FUZZ_CHECK(versions <= limits.max_version_entries);
  WF_FUZZ_CHECK(!info.arch().empty());
  if (!info.has_dynamic) WF_FUZZ_CHECK(info.needed.empty() && info.symbols.empty());
}

void check_assessment(const std::vector<wf::core::WheelBinary>& binaries) {
  const auto a = wf::core::assess_manylinux(binaries, wf::core::torch_extension_provided(binaries));
  WF_FUZZ_CHECK(!a.summary().empty());
  if (a.outcome == wf::core::ManylinuxOutcome::tagged) {
    WF_FUZZ_CHECK(a.policy != nullptr && a.policy->arch == a.arch);
    WF_FUZZ_CHECK(a.unsatisfied.empty() && a.too_new.empty() && a.problems.empty());
    WF_FUZZ_CHECK(!a.platform_tags().empty());
  } else {
    WF_FUZZ_CHECK(a.platform_tags().empty());
  }
}

void check_findings(const std::vector<wf::core::WheelBinary>& binaries) {
  const std::vector<std::string> requires_dist = {"torch>=2.9"};
  const auto w = wf::core::find_wheel(binaries, {}, requires_dist);
  WF_FUZZ_CHECK(w.binaries.size() == binaries.size());
  for (const auto& b : w.binaries) {
    WF_FUZZ_CHECK(b.needed.size() <= wf::core::kMaxNeeded);
    WF_FUZZ_CHECK(b.binding_symbol.size() <= wf::core::kMaxSymbolShown);
    WF_FUZZ_CHECK((b.binding == wf::core::TorchBinding::none) == b.binding_symbol.empty());
    if (b.cuda_major) WF_FUZZ_CHECK(!b.cuda_library.empty());
  }
  WF_FUZZ_CHECK(w.torch_from.has_value() == (w.binding() == wf::core::TorchBinding::stable_abi));
  const auto back = wf::core::decode_findings(wf::core::encode_findings(w));
  WF_FUZZ_CHECK(back.has_value());
  WF_FUZZ_CHECK(*back == w);
  for (const char* label : {"cu128torch2.8", "cpu", "rocm6.4", "torch2.8", ""}) {
    const auto st =
        wf::core::check_label_against_binaries(wf::core::parse_local_label(label), label, w);
    if (w.cuda_evidence() == nullptr) WF_FUZZ_CHECK(st.ok());
    if (!st) WF_FUZZ_CHECK(st.error().code == wf::Errc::invalid);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto limits = fuzz_limits();
  const std::string bytes(wf::fuzz::as_text(data, size));

  wf::archive::MemorySource memory(bytes);
  const auto direct = wf::archive::read_elf(memory, limits);
  if (direct) {
    check_facts(*direct, limits);
    check_assessment({{"pkg/_C.so", size, *direct, ""}});
    check_findings({{"pkg/_C.so", size, *direct, ""}});
  } else {
    WF_FUZZ_CHECK(direct.error().code == wf::Errc::invalid);
    WF_FUZZ_CHECK(!direct.error().message.empty());
  }

  // The same bytes as a deflated member of a wheel: the forward-only source must agree.
  using wf::archive::fixtures::Compression;
  const std::string wheel = wf::archive::fixtures::build_zip(
      {{"pkg/_C.so", bytes, Compression::deflate}, {"pkg/__init__.py", ""}});
  const int fd = memfd();
  write_all(fd, wheel);
  wf::archive::InspectLimits inspect;
  inspect.elf = limits;
  const auto binaries =
      wf::archive::inspect_wheel_binaries("/proc/self/fd/" + std::to_string(fd), inspect);
  WF_FUZZ_CHECK(binaries.ok());
  const bool elf_magic = bytes.size() >= 4 && bytes.compare(0, 4,
                                                            "\x7f"
                                                            "ELF") == 0;
  WF_FUZZ_CHECK(binaries->size() == (elf_magic ? 1U : 0U));
  if (!elf_magic) return 0;
  const auto& member = binaries->front();
  if (member.problem.find("passes over the deflated member") != std::string::npos) return 0;
  WF_FUZZ_CHECK(member.elf.has_value() == direct.ok());
  if (direct) {
    WF_FUZZ_CHECK(*member.elf == *direct);
  } else {
    WF_FUZZ_CHECK(member.problem == direct.error().message);
  }
  check_assessment(*binaries);
  check_findings(*binaries);
  return 0;
}
