#pragma once
// Units the runner's sources share: byte sizes and the wall clock in whole seconds.

#include <chrono>
#include <cstdint>

namespace wf::build {

inline constexpr std::uint64_t kMiB = 1024ULL * 1024ULL;
/// MiB and GiB as doubles, for fractional sizes (gb_per_job) and figures in logs.
inline constexpr double kMiBd = 1024.0 * 1024.0;
inline constexpr double kGiBd = 1024.0 * kMiBd;

/// Seconds since the epoch, now.
inline std::int64_t epoch_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace wf::build
