#include "admission.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <map>
#include <vector>

#include "units.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::build {

namespace fs = std::filesystem;

namespace {

// Field 22 of /proc/<pid>/stat: when the process started, in clock ticks since boot. Together
// with the pid it names one process for ever (a pid is reused only by a later process).
std::optional<std::uint64_t> start_time(const std::string& pid) {
  auto stat = read_small_file("/proc/" + pid + "/stat", 4096);
  if (!stat.ok()) return std::nullopt;
  const std::string& s = stat.value();
  const auto close = s.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  // After ')': state is field 3, so start time (field 22) is the 20th field from there.
  const auto fields = split(std::string_view(s).substr(close + 2), ' ');
  if (fields.size() < 20) return std::nullopt;
  if (fields[0] == "Z" || fields[0] == "X") return std::nullopt;  // dead, not yet reaped
  return parse_u64(fields[19]);
}

std::string own_process() {
  const std::string pid = std::to_string(::getpid());
  return pid + " " + std::to_string(start_time(pid).value_or(0));
}

// Splits on single spaces, dropping empty parts.
std::vector<std::string_view> words(std::string_view line) {
  std::vector<std::string_view> out;
  for (const auto w : split(line, ' ')) {
    if (!w.empty()) out.push_back(w);
  }
  return out;
}

}  // namespace

struct AdmissionLedger::Entries {
  struct Grant {
    std::string owner;
    std::int64_t job_id = 0;
    std::uint64_t memory_bytes = 0;
    unsigned cores = 0;
  };
  struct Reservation {
    std::string owner;
    std::int64_t build_id = 0;
  };
  std::optional<std::pair<std::uint64_t, unsigned>> budget;
  std::vector<Grant> grants;
  std::vector<Reservation> reservations;

  // Parses the file, keeping only the entries of live owners (malformed lines are dropped:
  // a runner killed in the middle of a rewrite leaves at worst a torn line).
  static Entries parse(std::string_view text) {
    Entries e;
    std::map<std::string, bool, std::less<>> alive;
    const auto live = [&alive](std::string_view pid, std::string_view start) {
      const std::string key = std::string(pid) + " " + std::string(start);
      if (const auto it = alive.find(key); it != alive.end()) return it->second;
      const auto t = start_time(std::string(pid));
      const bool is_alive = t && std::to_string(*t) == start;
      alive.emplace(key, is_alive);
      return is_alive;
    };
    for (const auto line : split(text, '\n')) {
      const auto w = words(line);
      if (w.size() == 3 && w[0] == "budget") {
        const auto memory = parse_u64(w[1]);
        const auto cores = parse_u64(w[2]);
        if (memory && cores) e.budget = std::pair{*memory, static_cast<unsigned>(*cores)};
      } else if (w.size() == 7 && w[0] == "grant") {
        const auto job = parse_u64(w[4]);
        const auto memory = parse_u64(w[5]);
        const auto cores = parse_u64(w[6]);
        if (!job || !memory || !cores || !parse_u64(w[1]) || !live(w[1], w[2])) continue;
        e.grants.push_back(
            Grant{std::string(w[1]) + " " + std::string(w[2]) + " " + std::string(w[3]),
                  static_cast<std::int64_t>(*job), *memory, static_cast<unsigned>(*cores)});
      } else if (w.size() == 5 && w[0] == "reserve") {
        const auto build = parse_u64(w[4]);
        if (!build || !parse_u64(w[1]) || !live(w[1], w[2])) continue;
        e.reservations.push_back(
            Reservation{std::string(w[1]) + " " + std::string(w[2]) + " " + std::string(w[3]),
                        static_cast<std::int64_t>(*build)});
      }
    }
    return e;
  }

  [[nodiscard]] std::string text() const {
    std::string out =
        "# wheelforge admission ledger: grants of running build jobs (see docs/runner.md, "
        "Admission)\n";
    if (budget) {
      out +=
          "budget " + std::to_string(budget->first) + " " + std::to_string(budget->second) + "\n";
    }
    for (const auto& g : grants) {
      out += "grant " + g.owner + " " + std::to_string(g.job_id) + " " +
             std::to_string(g.memory_bytes) + " " + std::to_string(g.cores) + "\n";
    }
    for (const auto& r : reservations) {
      out += "reserve " + r.owner + " " + std::to_string(r.build_id) + "\n";
    }
    return out;
  }
};

Result<std::unique_ptr<AdmissionLedger>> AdmissionLedger::open(const fs::path& file) {
  UniqueFd fd(::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOCTTY, 0640));
  if (!fd.valid()) return errno_error(errno, "cannot open the admission ledger " + file.string());
  return std::unique_ptr<AdmissionLedger>(new AdmissionLedger(file, std::move(fd)));
}

AdmissionLedger::AdmissionLedger(fs::path file, UniqueFd fd)
    : file_(std::move(file)), fd_(std::move(fd)) {
  static std::atomic<unsigned> instances{0};
  owner_ = own_process() + " " + std::to_string(++instances);
}

AdmissionLedger::~AdmissionLedger() {
  try {
    (void)release_all();
  } catch (...) {
    // Out of memory while leaving: the entries go when this process is gone.
  }
}

Status AdmissionLedger::update(const std::function<bool(Entries&)>& change) {
  std::lock_guard lock(mu_);
  while (::flock(fd_.get(), LOCK_EX) != 0) {
    if (errno != EINTR) return errno_error(errno, "cannot lock " + file_.string());
  }
  struct Unlock {
    int fd;
    ~Unlock() { ::flock(fd, LOCK_UN); }
  } unlock{fd_.get()};

  std::string text;
  char buffer[4096];
  for (off_t at = 0;;) {
    const ssize_t n = ::pread(fd_.get(), buffer, sizeof buffer, at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error(errno, "cannot read " + file_.string());
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
    at += n;
    if (text.size() > (1U << 20U)) break;  // no runner writes this much: a damaged file
  }
  Entries entries = Entries::parse(text);
  if (!change(entries)) return ok_status();
  const std::string out = entries.text();
  if (::ftruncate(fd_.get(), 0) != 0) return errno_error(errno, "cannot rewrite " + file_.string());
  for (std::size_t done = 0; done < out.size();) {
    const ssize_t n =
        ::pwrite(fd_.get(), out.data() + done, out.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error(errno, "cannot write " + file_.string());
    done += static_cast<std::size_t>(n);
  }
  return ok_status();
}

Result<Admission> AdmissionLedger::admit(const Demand& demand, const AdmissionLimits& limits,
                                         const std::function<Capacity()>& measure) {
  Admission answer;
  auto st = update([&](Entries& e) {
    if (limits.max_concurrent_jobs != 0 && e.grants.size() >= limits.max_concurrent_jobs) {
      answer.waiting_for = std::to_string(e.grants.size()) +
                           " job(s) of this data directory run (max_concurrent_jobs = " +
                           std::to_string(limits.max_concurrent_jobs) + ")";
      return false;
    }
    if (demand.planned) {
      e.grants.push_back(Entries::Grant{owner_, demand.job_id, 0, 0});
      answer.grant = *demand.planned;
      return true;
    }
    if (e.grants.empty() || !e.budget) {
      // Measured while nothing is granted, so that memory our own builds use is not mistaken
      // for memory the host lacks.
      const Capacity c = measure();
      e.budget = std::pair{
          c.memory_bytes > limits.reserve_bytes ? c.memory_bytes - limits.reserve_bytes : 0,
          std::max(1U, c.cores)};
    }
    std::uint64_t used_memory = 0;
    unsigned used_cores = 0;
    for (const auto& g : e.grants) {
      used_memory += g.memory_bytes;
      used_cores += g.cores;
    }
    const auto [budget, cores] = *e.budget;
    const auto min_bytes = static_cast<std::uint64_t>(demand.gb_per_job * kGiBd);
    const std::uint64_t free_memory = budget > used_memory ? budget - used_memory : 0;
    const unsigned free_cores = cores > used_cores ? cores - used_cores : 0;
    if (!e.grants.empty() && (free_cores == 0 || free_memory < min_bytes)) {
      char text[200];
      std::snprintf(text, sizeof text,
                    "%zu job(s) of this data directory hold %.1f of %.1f GiB and %u of %u cores; "
                    "this job needs %.1f GiB and a core",
                    e.grants.size(), static_cast<double>(used_memory) / kGiBd,
                    static_cast<double>(budget) / kGiBd, used_cores, cores, demand.gb_per_job);
      answer.waiting_for = text;
      return false;
    }
    core::Resources res;
    res.available_memory_bytes = free_memory;
    res.reserve_bytes = 0;
    res.cores =
        std::max(1U, demand.max_cores == 0 ? free_cores : std::min(free_cores, demand.max_cores));
    const core::Parallelism p =
        core::compute_parallelism(res, demand.gb_per_job, demand.arch_count, free_memory);
    // A core for each compiler process: every thread of every compile job.
    e.grants.push_back(
        Entries::Grant{owner_, demand.job_id, p.memory_bytes, p.max_jobs * p.nvcc_threads});
    answer.grant = p;
    return true;
  });
  if (!st) return st.error();
  return answer;
}

Status AdmissionLedger::release(std::int64_t job_id) {
  return update([&](Entries& e) {
    const auto before = e.grants.size();
    std::erase_if(e.grants,
                  [&](const Entries::Grant& g) { return g.owner == owner_ && g.job_id == job_id; });
    return e.grants.size() != before;
  });
}

Status AdmissionLedger::reserve_build(std::int64_t build_id) {
  return update([&](Entries& e) {
    e.reservations.push_back(Entries::Reservation{owner_, build_id});
    return true;
  });
}

Status AdmissionLedger::reserve_new_build(
    const std::function<std::optional<std::int64_t>()>& create) {
  return update([&](Entries& e) {
    const auto build_id = create();
    if (!build_id) return false;
    e.reservations.push_back(Entries::Reservation{owner_, *build_id});
    return true;
  });
}

Result<LedgerView> AdmissionLedger::view() {
  LedgerView v;
  auto st = update([&](Entries& e) {
    for (const auto& g : e.grants) {
      if (g.owner != owner_) v.jobs_of_others.insert(g.job_id);
    }
    for (const auto& r : e.reservations) {
      if (r.owner != owner_) v.builds_of_others.insert(r.build_id);
    }
    return false;
  });
  if (!st) return st.error();
  return v;
}

Status AdmissionLedger::release_all() {
  return update([&](Entries& e) {
    const auto before = e.grants.size() + e.reservations.size();
    std::erase_if(e.grants, [&](const Entries::Grant& g) { return g.owner == owner_; });
    std::erase_if(e.reservations, [&](const Entries::Reservation& r) { return r.owner == owner_; });
    return e.grants.size() + e.reservations.size() != before;
  });
}

}  // namespace wf::build
