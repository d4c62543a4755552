#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "archive/archive_source.hpp"
#include "archive/member_checks.hpp"
#include "archive/member_source.hpp"
#include "archive/zip_layout.hpp"
#include "wheelforge/archive/elf.hpp"

namespace wf::archive {
namespace {

constexpr std::string_view kElfMagic =
    "\x7f"
    "ELF";

bool is_directory(const ZipMember& m) {
  return !m.name.empty() && m.name.back() == '/';
}

}  // namespace

Result<std::vector<core::WheelBinary>> inspect_wheel_binaries(ByteSource& file,
                                                              const InspectLimits& limits) {
  // The same layout checks as read_wheel: nothing is inflated from a zip that readers could
  // disagree about. The declared sizes are read_wheel's to judge (the archive policy); here
  // the inflate budget bounds the work.
  Limits layout;
  layout.max_members = limits.max_members;
  layout.max_inflated_bytes = UINT64_MAX;
  layout.max_compression_ratio = UINT64_MAX;
  CappedProblems problems;
  auto members = scan_zip_layout(file, layout, problems);
  if (!members) return members.error();
  if (!problems.empty()) return problems.to_error();
  std::sort(members->begin(), members->end(), [](const ZipMember& a, const ZipMember& b) {
    return a.local_header_offset < b.local_header_offset;
  });

  InflateBudget budget{limits.max_inflated_bytes, limits.max_inflated_bytes, false};
  std::vector<core::WheelBinary> out;
  for (const ZipMember& m : *members) {
    if (is_directory(m) || m.uncompressed_size < kElfMagic.size()) continue;
    auto data = member_data_offset(file, m);
    if (!data) return data.error();

    std::unique_ptr<ByteSource> source;
    if (m.method == kMethodStored) {
      if (m.compressed_size != m.uncompressed_size) {
        return make_error(Errc::invalid, "stored member " + quote_name(m.name) +
                                             " has different compressed and uncompressed sizes");
      }
      source = make_region_source(file, *data, m.uncompressed_size);
    } else {
      source = std::make_unique<InflatingMemberSource>(file, m, budget, limits.max_passes);
    }

    // A member that cannot even be started is a damaged wheel, not a damaged binary.
    auto magic = source->read_at(0, kElfMagic.size());
    if (!magic) return magic.error();
    if (*magic != kElfMagic) continue;
    if (out.size() >= limits.max_binaries) {
      return make_error(Errc::invalid, "the wheel has more than " +
                                           std::to_string(limits.max_binaries) + " ELF members");
    }

    core::WheelBinary binary;
    binary.path = m.name;
    binary.size = m.uncompressed_size;
    auto elf = read_elf(*source, limits.elf);
    if (elf) {
      binary.elf = std::move(*elf);
    } else if (budget.exhausted || elf.error().code != Errc::invalid) {
      return elf.error();
    } else {
      binary.problem = elf.error().message;
    }
    out.push_back(std::move(binary));
  }
  return out;
}

Result<std::vector<core::WheelBinary>> inspect_wheel_binaries(const std::filesystem::path& wheel,
                                                              const InspectLimits& limits) {
  auto file = open_file_source(wheel);
  if (!file) return file.error();
  return inspect_wheel_binaries(**file, limits);
}

Result<std::vector<core::WheelMember>> list_wheel_members(ByteSource& file,
                                                          std::uint64_t max_members) {
  Limits layout;
  layout.max_members = max_members;
  layout.max_inflated_bytes = UINT64_MAX;
  layout.max_compression_ratio = UINT64_MAX;
  CappedProblems problems;
  auto members = scan_zip_layout(file, layout, problems);
  if (!members) return members.error();
  if (!problems.empty()) return problems.to_error();
  std::vector<core::WheelMember> out;
  out.reserve(members->size());
  for (const ZipMember& m : *members) {
    out.push_back({m.name, m.uncompressed_size, m.compressed_size});
  }
  return out;
}

Result<std::vector<core::WheelMember>> list_wheel_members(const std::filesystem::path& wheel,
                                                          std::uint64_t max_members) {
  auto file = open_file_source(wheel);
  if (!file) return file.error();
  return list_wheel_members(**file, max_members);
}

}  // namespace wf::archive
