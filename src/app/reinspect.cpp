// `wheelforge reinspect`: the stored wheels without binary findings read again as ingest reads
// them (app/maintenance.hpp).

#include <algorithm>

#include "maintenance_dir.hpp"
#include "wheelforge/app/maintenance.hpp"
#include "wheelforge/archive/elf.hpp"
#include "wheelforge/core/filename.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::app {

namespace fs = std::filesystem;

using detail::hash_file;
using detail::local_settings;
using detail::LockMode;
using detail::MaintenanceDir;
using detail::open_existing;

std::size_t ReinspectReport::count(ReinspectedWheel::Outcome outcome) const {
  return static_cast<std::size_t>(std::count_if(
      wheels.begin(), wheels.end(), [&](const auto& w) { return w.outcome == outcome; }));
}

std::size_t ReinspectReport::contradicting() const {
  return static_cast<std::size_t>(std::count_if(wheels.begin(), wheels.end(), [](const auto& w) {
    return w.outcome == ReinspectedWheel::Outcome::recorded && !w.detail.empty();
  }));
}

namespace {

// Reads one stored wheel's binaries as ingest does; the label check only reports.
ReinspectedWheel reinspect_wheel(const MaintenanceDir& dir, const catalog::UninspectedWheel& wheel,
                                 const archive::InspectLimits& limits) {
  using Outcome = ReinspectedWheel::Outcome;
  const core::FileRecord& f = wheel.file;
  ReinspectedWheel out{f.filename, Outcome::failed, std::nullopt, {}};
  if (f.damaged) {
    out.outcome = Outcome::skipped;
    out.detail = "damaged (withdrawn by fsck --repair): heal it first";
    return out;
  }
  if (!is_sha256_hex(f.sha256)) {
    out.detail = "the catalog's sha256 is malformed";
    return out;
  }
  // A blob file, or an object's verified copy in the read cache.
  auto local = dir.store->local_copy(f.sha256);
  if (!local) {
    out.detail = local.error().message + " (wheelforge fsck tells more)";
    return out;
  }
  const fs::path& path = *local;
  // The findings are kept for the file's lifetime: read them from its own bytes only.
  auto hashed = hash_file(path);
  if (!hashed) {
    out.detail = hashed.error().message + " (wheelforge fsck tells more)";
    return out;
  }
  if (hashed->sha256 != f.sha256) {
    out.detail = "its blob has sha256 " + hashed->sha256 + " (wheelforge fsck tells more)";
    return out;
  }
  auto binaries = archive::inspect_wheel_binaries(path, limits);
  if (!binaries) {
    out.detail = "reading the wheel's binaries: " + binaries.error().message;
    return out;
  }
  core::WheelFindings findings = core::find_wheel(*binaries, f.hints, wheel.requires_dist);
  const auto name = core::parse_dist_filename(f.filename);
  const std::string label = name ? name->version.local_str() : std::string();
  if (auto st = core::check_label_against_binaries(f.hints, label, findings); !st) {
    out.detail = st.error().message;
  }
  auto recorded = dir.catalog->record_findings(f.filename, f.sha256, findings);
  if (!recorded) {
    out.detail = recorded.error().message;
    if (recorded.error().code == Errc::not_found) out.outcome = Outcome::gone;
    return out;
  }
  out.outcome = *recorded ? Outcome::recorded : Outcome::already;
  if (*recorded) {
    out.findings = std::move(findings);
  } else {
    out.detail.clear();
  }
  return out;
}

}  // namespace

Result<ReinspectReport> reinspect_data_dir(
    const fs::path& data_dir, const ReinspectOptions& options,
    const std::function<void(const ReinspectedWheel&)>& on_wheel) {
  return reinspect_data_dir(local_settings(data_dir), options, on_wheel);
}

Result<ReinspectReport> reinspect_data_dir(
    const Settings& settings, const ReinspectOptions& options,
    const std::function<void(const ReinspectedWheel&)>& on_wheel) {
  auto dir = open_existing(settings, LockMode::shared);
  if (!dir) return dir.error();
  auto wheels = dir->catalog->uninspected_wheels();
  if (!wheels) return wheels.error();
  archive::InspectLimits limits;
  limits.max_members = options.max_members;
  limits.max_inflated_bytes = options.max_inflated_bytes;
  ReinspectReport report;
  for (const auto& wheel : *wheels) {
    ReinspectedWheel done = reinspect_wheel(*dir, wheel, limits);
    if (on_wheel) on_wheel(done);
    report.wheels.push_back(std::move(done));
  }
  return report;
}

}  // namespace wf::app
