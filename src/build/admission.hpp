#pragma once
// One admission budget for every runner on a data directory: the server's runner and any
// number of `wheelforge build` commands share the host's memory and cores, so that
// concurrent builds never add up past the host.
//
// The ledger is a small text file, DATA_DIR/builds/admission, read and rewritten under an
// exclusive flock(2). It holds the budget (measured when nothing is granted) and one line per
// grant or build reservation, each with its owner: the process (pid and start time, so that a
// reused pid is not mistaken for a live owner) and the runner instance inside it. Entries of
// owners that died are dropped by the next reader, so a killed runner never holds the budget.
//
//   budget <memory bytes> <cores>
//   grant <pid> <start time> <instance> <job id> <memory bytes> <cores>
//   reserve <pid> <start time> <instance> <build id>
//
// All methods block on the lock and on file I/O (short: the file stays a few lines long).
// Thread-safe.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "wheelforge/build/executor.hpp"
#include "wheelforge/core/build.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::build {

/// What a job asks of the budget.
struct Demand {
  std::int64_t job_id = 0;
  double gb_per_job = 4.0;  ///< peak GiB of one compile job per nvcc thread
  unsigned arch_count = 1;
  unsigned max_cores = 0;  ///< the recipe's cpus: the most cores granted; 0: no cap
  /// A job whose resources a cluster grants: counted against max_concurrent_jobs only (it
  /// holds none of this host's memory or cores) and granted this parallelism.
  std::optional<core::Parallelism> planned;
};

/// The runner's own limits.
struct AdmissionLimits {
  std::uint64_t reserve_bytes = 0;   ///< kept back from the measured memory
  unsigned max_concurrent_jobs = 0;  ///< grants at once on this data directory; 0: no limit
};

/// The answer to a job asking for admission.
struct Admission {
  std::optional<core::Parallelism> grant;  ///< nullopt: the job must wait
  std::string waiting_for;                 ///< why it waits, for the job's log
};

/// What the other owners hold, as seen now.
struct LedgerView {
  std::set<std::int64_t> jobs_of_others;    ///< jobs granted to other live runners
  std::set<std::int64_t> builds_of_others;  ///< builds reserved by other live runners
};

class AdmissionLedger {
 public:
  /// Opens (creating it 0640 when missing) the ledger file. Fails with io naming the path.
  [[nodiscard]] static Result<std::unique_ptr<AdmissionLedger>> open(
      const std::filesystem::path& file);

  AdmissionLedger(const AdmissionLedger&) = delete;
  AdmissionLedger& operator=(const AdmissionLedger&) = delete;
  /// Drops this instance's entries (best effort).
  ~AdmissionLedger();

  /// Grants the job the parallelism that fits what is free, by the formula of
  /// core::compute_parallelism, and records the grant; no grant when it must wait: when the
  /// concurrency limit is reached, or when some grant is live and the free cores are 0 or the
  /// free memory is below one compile job. A job is always admitted when nothing is granted
  /// (1 × 1 if memory is short), so the queue makes progress on any host. The budget is
  /// measured with `measure` (minus the reserve) when no grant is live, and kept while any is.
  /// A demand with `planned` parallelism (a cluster job) waits only for the concurrency limit.
  [[nodiscard]] Result<Admission> admit(const Demand& demand, const AdmissionLimits& limits,
                                        const std::function<Capacity()>& measure);
  /// Gives a job's grant back (no-op when it holds none).
  [[nodiscard]] Status release(std::int64_t job_id);
  /// Records that this runner alone runs the jobs of `build_id` while it lives.
  [[nodiscard]] Status reserve_build(std::int64_t build_id);
  /// Runs `create` under the ledger's lock and reserves the build it returns (none when it
  /// returns nullopt): a runner that reads the ledger after listing queued jobs never sees
  /// the new build's jobs unreserved.
  [[nodiscard]] Status reserve_new_build(
      const std::function<std::optional<std::int64_t>()>& create);
  /// What other live runners hold.
  [[nodiscard]] Result<LedgerView> view();
  /// Removes every entry of this instance.
  [[nodiscard]] Status release_all();

 private:
  struct Entries;
  AdmissionLedger(std::filesystem::path file, UniqueFd fd);
  // Runs `change` over the live entries under the lock and writes them back when it says so.
  [[nodiscard]] Status update(const std::function<bool(Entries&)>& change);

  std::filesystem::path file_;
  UniqueFd fd_;
  std::string owner_;  // "<pid> <start time> <instance>"
  std::mutex mu_;      // flock does not exclude threads sharing one open file
};

}  // namespace wf::build
