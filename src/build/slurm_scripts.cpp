// The Slurm executor's text: what sbatch, scontrol and sacct print, parsed, the states of a
// batch job mapped to how a command ended, and the scripts a batch job runs (slurm.hpp).

#include <signal.h>

#include <algorithm>
#include <array>

#include "container.hpp"
#include "slurm.hpp"
#include "units.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::build {

namespace fs = std::filesystem;
using Where = CommandPlacement::Where;

namespace {

std::string first_word(std::string_view s) {
  s = trim(s);
  return std::string(s.substr(0, s.find_first_of(" \t")));
}

// "code:signal" as Slurm prints ExitCode.
void parse_exit_code(std::string_view text, SlurmJob& job) {
  const std::size_t colon = text.find(':');
  job.exit_code = static_cast<int>(parse_u64(text.substr(0, colon)).value_or(0));
  if (colon != std::string_view::npos) {
    job.signal = static_cast<int>(parse_u64(text.substr(colon + 1)).value_or(0));
  }
}

// The fields of `scontrol show -o`: "Key=Value Key=Value ..."; a value runs up to the next
// " Word=" (values such as Command may contain spaces).
std::vector<std::pair<std::string, std::string>> fields(std::string_view line) {
  std::vector<std::pair<std::string, std::string>> out;
  std::size_t pos = 0;
  const auto key_at = [&line](std::size_t at) -> std::size_t {
    // Length of a key starting at `at` followed by '=', or 0.
    std::size_t end = at;
    while (end < line.size() && (std::isalnum(static_cast<unsigned char>(line[end])) != 0 ||
                                 line[end] == '_' || line[end] == ':' || line[end] == '/')) {
      ++end;
    }
    return end > at && end < line.size() && line[end] == '=' ? end - at : 0;
  };
  while (pos < line.size()) {
    while (pos < line.size() && line[pos] == ' ') ++pos;
    const std::size_t klen = key_at(pos);
    if (klen == 0) break;
    const std::string key(line.substr(pos, klen));
    std::size_t vstart = pos + klen + 1;
    std::size_t vend = vstart;
    while (vend < line.size()) {
      if (line[vend] == ' ') {
        std::size_t next = vend;
        while (next < line.size() && line[next] == ' ') ++next;
        if (next >= line.size() || key_at(next) > 0) break;
      }
      ++vend;
    }
    out.emplace_back(key, std::string(trim(line.substr(vstart, vend - vstart))));
    pos = vend;
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Parsing and state mapping

std::vector<std::string> sinfo_argv(const std::string& partition) {
  std::vector<std::string> argv = {"sinfo", "-h", "-N", "-o", "%N|%c|%m|%P"};
  if (!partition.empty()) argv.push_back("--partition=" + partition);
  return argv;
}

std::vector<SlurmNode> parse_sinfo_nodes(std::string_view output, std::string_view partition) {
  std::vector<SlurmNode> all;
  std::vector<SlurmNode> chosen;
  const auto add = [](std::vector<SlurmNode>& to, const SlurmNode& n) {
    if (std::none_of(to.begin(), to.end(), [&](const SlurmNode& m) { return m.name == n.name; })) {
      to.push_back(n);
    }
  };
  for (const auto line : split(output, '\n')) {
    const auto parts = split(trim(line), '|');
    if (parts.size() < 4) continue;
    SlurmNode n;
    n.name = std::string(trim(parts[0]));
    const auto cpus = parse_u64(trim(parts[1]));
    // Memory may carry a '+' (nodes of one line with different sizes: the smallest is given).
    std::string_view memory = trim(parts[2]);
    if (!memory.empty() && memory.back() == '+') memory.remove_suffix(1);
    const auto mb = parse_u64(memory);
    if (n.name.empty() || !cpus || !mb) continue;
    n.cpus = static_cast<unsigned>(*cpus);
    n.memory_mb = *mb;
    std::string_view part = trim(parts[3]);
    const bool is_default = !part.empty() && part.back() == '*';
    if (is_default) part.remove_suffix(1);
    add(all, n);
    if (partition.empty() ? is_default : part == partition) add(chosen, n);
  }
  return partition.empty() && chosen.empty() ? all : chosen;
}

Result<FittedRequest> fit_to_nodes(const ResourceRequest& request,
                                   const std::vector<SlurmNode>& nodes, std::string_view where) {
  FittedRequest out{request, {}};
  const unsigned cpus = std::max(1U, request.cpus);
  const std::uint64_t mib = (request.memory_bytes + kMiB - 1) / kMiB;
  const auto holds = [&](const SlurmNode& n) { return n.cpus >= cpus && n.memory_mb >= mib; };
  if (nodes.empty() || std::any_of(nodes.begin(), nodes.end(), holds)) return out;
  const auto most_cpus =
      *std::max_element(nodes.begin(), nodes.end(), [](const SlurmNode& a, const SlurmNode& b) {
        return std::pair(a.cpus, a.memory_mb) < std::pair(b.cpus, b.memory_mb);
      });
  const auto most_memory =
      *std::max_element(nodes.begin(), nodes.end(), [](const SlurmNode& a, const SlurmNode& b) {
        return std::pair(a.memory_mb, a.cpus) < std::pair(b.memory_mb, b.cpus);
      });
  const std::string asked = std::to_string(cpus) + " CPU(s) and " + std::to_string(mib) + " MiB";
  const std::string largest =
      "the largest node" +
      (most_cpus.name == most_memory.name
           ? " is " + most_cpus.name + " with " + std::to_string(most_cpus.cpus) + " CPU(s) and " +
                 std::to_string(most_cpus.memory_mb) + " MiB"
           : "s are " + most_cpus.name + " with " + std::to_string(most_cpus.cpus) +
                 " CPU(s) and " + most_memory.name + " with " +
                 std::to_string(most_memory.memory_mb) + " MiB");
  if (request.source == ResourceRequest::Source::recipe) {
    return make_error(Errc::invalid, "the recipe's build jobs ask for " + asked +
                                         " (cpus x gb_per_job), more than any node of " +
                                         std::string(where) + " holds: " + largest);
  }
  // The default: as many CPUs as the node that holds most of the request has, each with the
  // memory a CPU was to have; 1 CPU and the largest node's memory when no node has that.
  const std::uint64_t per_cpu = request.memory_bytes / cpus;
  unsigned best = 0;
  for (const auto& n : nodes) {
    std::uint64_t c = std::min(cpus, n.cpus);
    if (per_cpu > 0) c = std::min<std::uint64_t>(c, n.memory_mb * kMiB / per_cpu);
    best = std::max(best, static_cast<unsigned>(c));
  }
  if (best > 0) {
    out.request.cpus = best;
    out.request.memory_bytes = (best * per_cpu + kMiB - 1) / kMiB * kMiB;
  } else {
    out.request.cpus = 1;
    out.request.memory_bytes = most_memory.memory_mb * kMiB;
  }
  out.note = "the default request of " + asked + " is more than any node of " + std::string(where) +
             " holds (" + largest + "): build jobs ask for " + std::to_string(out.request.cpus) +
             " CPU(s) and " + std::to_string(out.request.memory_bytes / kMiB) + " MiB";
  return out;
}

bool never_starts(std::string_view reason) {
  std::string text(trim(reason));
  std::replace(text.begin(), text.end(), '_', ' ');
  const std::string_view r = text;
  const std::string_view word = r.substr(0, r.find_first_of(", "));
  static constexpr std::string_view kNever[] = {
      "PartitionConfig", "PartitionNodeLimit", "PartitionTimeLimit",       "BadConstraints",
      "InvalidAccount",  "InvalidQOS",         "DependencyNeverSatisfied",
  };
  if (std::find(std::begin(kNever), std::end(kNever), word) != std::end(kNever)) return true;
  // Limits on one job (QOSMaxCpuPerJobLimit, AssocMaxMemPerJob, ...): waiting does not help,
  // unlike limits per user or account.
  if ((word.starts_with("QOSMax") || word.starts_with("AssocMax")) &&
      word.find("PerJob") != std::string_view::npos) {
    return true;
  }
  if (word == "ReqNodeNotAvail") {
    const std::size_t at = r.find("UnavailableNodes:");
    return at != std::string_view::npos &&
           trim(r.substr(at + std::string_view("UnavailableNodes:").size())).empty();
  }
  return false;
}

std::optional<std::string> parse_sbatch_id(std::string_view output) {
  for (const auto line : split(output, '\n')) {
    const std::string_view id = trim(line.substr(0, line.find(';')));
    if (!id.empty() && parse_u64(id)) return std::string(id);
  }
  return std::nullopt;
}

SlurmJob parse_scontrol_job(std::string_view output) {
  SlurmJob job;
  const std::string_view line = output.substr(0, output.find('\n'));
  std::string node_list;
  for (const auto& [key, value] : fields(line)) {
    if (key == "JobId") job.id = value;
    if (key == "JobState") {
      job.state = first_word(value);
      job.known = !job.state.empty();
    }
    if (key == "Reason") job.reason = value;
    if (key == "ExitCode") parse_exit_code(value, job);
    if (key == "BatchHost") job.node = value;
    if (key == "NodeList") node_list = value;
  }
  if (job.node.empty() && node_list != "(null)") job.node = node_list;
  return job;
}

SlurmJob parse_sacct_job(std::string_view output) {
  SlurmJob job;
  for (const auto line : split(output, '\n')) {
    const auto parts = split(trim(line), '|');
    if (parts.size() < 2 || trim(parts[0]).empty()) continue;
    job.state = first_word(parts[0]);
    parse_exit_code(trim(parts[1]), job);
    job.known = true;
    break;
  }
  return job;
}

bool is_active_state(std::string_view state) {
  static constexpr std::array<std::string_view, 11> kEnded = {
      "BOOT_FAIL",     "CANCELLED", "COMPLETED", "DEADLINE", "FAILED",      "NODE_FAIL",
      "OUT_OF_MEMORY", "PREEMPTED", "TIMEOUT",   "REVOKED",  "SPECIAL_EXIT"};
  return !state.empty() && std::find(kEnded.begin(), kEnded.end(), state) == kEnded.end();
}

ExitStatus ended_status(const SlurmJob& job, bool cancelled_by_us, bool started,
                        std::chrono::milliseconds time_limit) {
  ExitStatus s;
  const std::string who = "Slurm job " + job.id;
  if (!job.known) {
    s.note = who + " is no longer known to the cluster (scontrol, sacct) and left no exit status";
    return s;
  }
  const std::string where = job.node.empty() ? std::string() : " on " + job.node;
  if (job.state == "CANCELLED") {
    if (cancelled_by_us) {
      s.cancelled = true;
      s.note = who + " cancelled";
    } else {
      s.signal = SIGTERM;
      s.note = who + " was cancelled in Slurm, not by wheelforge";
    }
    return s;
  }
  if (job.state == "TIMEOUT") {
    s.timed_out = true;
    s.timeout = time_limit;
    s.note = who + ": TIMEOUT, its --time ran out" + where;
    return s;
  }
  if (job.state == "OUT_OF_MEMORY") {
    // As the kernel's OOM killer reports itself to the local executor: the OOM retry.
    s.signal = SIGKILL;
    s.note = who + ": OUT_OF_MEMORY" + where;
    return s;
  }
  if (job.state == "FAILED" || job.state == "COMPLETED") {
    // Never a success: the command itself reported nothing.
    if (job.signal != 0) {
      s.signal = job.signal;
    } else if (job.state == "FAILED" && job.exit_code != 0) {
      s.exited = true;
      s.code = job.exit_code;
    }
    s.note = who + ": " + job.state + where +
             (started ? " before the command reported how it ended"
                      : " before it started its commands (is DATA_DIR/builds on a filesystem "
                        "this node shares with the server? see its agent.out)");
    return s;
  }
  s.note = who + ": " + job.state +
           (job.reason.empty() || job.reason == "None" ? "" : " (" + job.reason + ")") + where;
  return s;
}

std::chrono::minutes time_limit(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) return std::chrono::minutes(0);
  const auto minutes = (timeout.count() + 59'999) / 60'000;
  return std::chrono::minutes(std::max<std::int64_t>(1, minutes));
}

// ---------------------------------------------------------------------------------------------
// Scripts

std::vector<std::string> sbatch_argv(const SlurmConfig& config, const ProcessSpec& spec,
                                     const fs::path& session_dir,
                                     const std::vector<std::string>& exported) {
  const CommandPlacement& p = spec.placement;
  std::vector<std::string> argv = {
      "sbatch",
      "--parsable",
      "--job-name=wheelforge-job" + std::to_string(p.job_id) + "-" +
          std::string(where_name(p.where)),
      "--chdir=" + session_dir.string(),
      "--output=" + (session_dir / "agent.out").string(),
      "--nodes=1",
      "--ntasks=1",
  };
  std::string exports;
  for (const auto& name : exported) exports += (exports.empty() ? "" : ",") + name;
  argv.push_back("--export=" + (exports.empty() ? std::string("NONE") : exports));
  if (p.where == Where::test) {
    argv.emplace_back("--cpus-per-task=1");
    const std::string& partition =
        config.smoke_partition.empty() ? config.partition : config.smoke_partition;
    if (!partition.empty()) argv.push_back("--partition=" + partition);
    if (!config.gres.empty()) argv.push_back("--gres=" + config.gres);
  } else {
    argv.push_back("--cpus-per-task=" + std::to_string(std::max(1U, p.cpus)));
    if (p.memory_bytes > 0) {
      argv.push_back("--mem=" + std::to_string((p.memory_bytes + kMiB - 1) / kMiB) + "M");
    }
    if (!config.partition.empty()) argv.push_back("--partition=" + config.partition);
  }
  if (const auto limit = time_limit(spec.timeout); limit.count() > 0) {
    argv.push_back("--time=" + std::to_string(limit.count()));
  }
  if (!config.account.empty()) argv.push_back("--account=" + config.account);
  argv.insert(argv.end(), config.sbatch_args.begin(), config.sbatch_args.end());
  argv.push_back((session_dir / "agent.sh").string());
  return argv;
}

std::string agent_script(const fs::path& session_dir, std::chrono::seconds idle,
                         std::chrono::seconds grace) {
  std::string s;
  s += "#!/bin/bash\n";
  s += "# wheelforge: the agent of one batch job. It runs the commands the server writes into\n";
  s += "# this directory (cmd-1.sh, cmd-2.sh, ...) one at a time, each in its own process group,\n";
  s += "# and records when each started (cmd-K.started) and how it ended (cmd-K.exit).\n";
  s += "# cmd-K.stop asks it to stop command K; `end` to leave once idle.\n";
  s += "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n";
  s += "export PATH\n";
  s += "dir=" + shell_quote(session_dir.string()) + "\n";
  s += "idle_limit=" + std::to_string(idle.count()) + "\n";
  s += "grace=" + std::to_string(std::max<std::int64_t>(1, grace.count())) + "\n";
  s += R"WF(cd "$dir" || {
  echo "wheelforge: cannot enter $dir on $(hostname): the builds directory must be on a filesystem this node shares with the server" >&2
  exit 70
}
publish() { printf '%s\n' "$2" > "$1.tmp" && mv -f "$1.tmp" "$1"; }
publish started "${SLURM_JOB_ID:-} $(hostname) ${SLURM_CPUS_PER_TASK:-} ${SLURM_MEM_PER_NODE:-} $(date +%s)"
child=
terminating=
on_term() {
  terminating=1
  if [ -n "$child" ]; then kill -TERM -- "-$child" 2>/dev/null; fi
}
trap on_term TERM INT
n=1
idle=0
while [ -z "$terminating" ]; do
  [ -d "$dir" ] || exit 0
  if [ -e "cmd-$n.sh" ]; then
    setsid /bin/bash "cmd-$n.sh" </dev/null >/dev/null 2>&1 &
    child=$!
    publish "cmd-$n.started" "$(date +%s)"
    stopped=
    while kill -0 "$child" 2>/dev/null; do
      if [ -z "$stopped" ] && [ -e "cmd-$n.stop" ]; then
        kill -TERM -- "-$child" 2>/dev/null
        stopped=$SECONDS
      elif [ -n "$stopped" ] && [ $((SECONDS - stopped)) -ge "$grace" ]; then
        kill -KILL -- "-$child" 2>/dev/null
      fi
      sleep 0.2
    done
    wait "$child"
    status=$?
    child=
    [ -n "$terminating" ] && break
    publish "cmd-$n.exit" "$status"
    n=$((n + 1))
    idle=0
    continue
  fi
  if [ -e end ]; then
    publish exited end
    exit 0
  fi
  if [ "$idle" -ge $((idle_limit * 5)) ]; then
    publish exited idle
    exit 0
  fi
  sleep 0.2
  idle=$((idle + 1))
done
publish terminated "$(date +%s)"
exit 143
)WF";
  return s;
}

std::string_view parallelism_awk() {
  // Integer arithmetic where C++ uses it (bytes are whole, the division floors); doubles
  // elsewhere, as in core::compute_parallelism.
  return R"WF(function bytes(t,   x, c) { x = gb * 1073741824 * t; c = int(x); if (c < x) c++; return c }
BEGIN {
  if (gb + 0 <= 0) gb = 4
  cores = int(cpus + 0); if (cores < 1) cores = 1
  budget = int(mem_mb + 0) * 1048576
  threads = int(archs + 0); if (threads < 1) threads = 1; if (threads > 4) threads = 4
  if (threads > cores) threads = cores
  while (threads > 1 && bytes(threads) > budget) threads--
  per = bytes(threads)
  jobs = int(budget / per)
  if ((jobs + 1) * per <= budget) jobs++
  if (jobs > 0 && jobs * per > budget) jobs--
  if (jobs > int(cores / threads)) jobs = int(cores / threads)
  if (jobs < 1) jobs = 1
  for (i = 0; i < halvings; i++) {
    if (jobs > 1) jobs = int(jobs / 2)
    else if (threads > 1) { jobs = 1; threads = int(threads / 2) }
  }
  printf "%d %d\n", jobs, threads
})WF";
}

std::string command_script(const ProcessSpec& spec, const ContainerConfig* containers,
                           const std::string& container_name) {
  const CommandPlacement& p = spec.placement;
  const fs::path cwd = spec.cwd.empty() ? p.work_dir : spec.cwd;
  std::string s;
  s += "#!/bin/bash\n";
  s += "# wheelforge: a command of job " + std::to_string(p.job_id) + " (" +
       std::string(where_name(p.where)) + "), run by the batch job's agent\n";
  s += "exec </dev/null >>" + shell_quote(spec.log_file.string()) + " 2>&1\n";
  s += "cd " + shell_quote(cwd.string()) + " || exit 127\n";
  s += "wf_cpus=${SLURM_CPUS_PER_TASK:-1}\n";
  s += "wf_memory_mb=${SLURM_MEM_PER_NODE:-}\n";
  s += "if [ -z \"$wf_memory_mb\" ] && [ -n \"${SLURM_MEM_PER_CPU:-}\" ]; then "
       "wf_memory_mb=$((SLURM_MEM_PER_CPU * wf_cpus)); fi\n";
  std::vector<std::string> omitted;
  if (p.sizing) {
    std::string planned_jobs = "1";
    std::string planned_threads = "1";
    for (const auto& [k, v] : spec.env) {
      if (k == "MAX_JOBS") planned_jobs = v;
      if (k == "NVCC_THREADS") planned_threads = v;
    }
    char gb[64];
    std::snprintf(gb, sizeof gb, "%.17g", p.sizing->gb_per_job);
    // What Slurm granted decides; without a memory figure, the server's plan stands.
    s += "wf_max_jobs=" + shell_quote(planned_jobs) +
         " wf_nvcc_threads=" + shell_quote(planned_threads) + "\n";
    s += "if [ -n \"$wf_memory_mb\" ]; then\n";
    s +=
        "  set -- $(awk -v cpus=\"$wf_cpus\" -v mem_mb=\"$wf_memory_mb\" -v gb=" + std::string(gb) +
        " -v archs=" + std::to_string(p.sizing->arch_count) +
        " -v halvings=" + std::to_string(p.sizing->halvings) + " " +
        shell_quote(parallelism_awk()) + ")\n";
    s += "  if [ -n \"$2\" ]; then wf_max_jobs=$1 wf_nvcc_threads=$2; fi\n";
    s += "fi\n";
    s += "echo \"==> [building] batch job ${SLURM_JOB_ID:-} on $(hostname) was granted $wf_cpus "
         "CPU(s) and ${wf_memory_mb:-?} MiB: MAX_JOBS=$wf_max_jobs "
         "NVCC_THREADS=$wf_nvcc_threads\"\n";
    omitted = {"MAX_JOBS", "NVCC_THREADS"};
  }
  if (containers == nullptr) {
    s += "exec /usr/bin/env -i";
    for (const auto& [k, v] : spec.env) {
      if (std::find(omitted.begin(), omitted.end(), k) != omitted.end()) continue;
      s += " " + shell_quote(k + "=" + v);
    }
    if (p.sizing) s += " \"MAX_JOBS=$wf_max_jobs\" \"NVCC_THREADS=$wf_nvcc_threads\"";
    for (const auto& a : spec.argv) s += " " + shell_quote(a);
    s += "\n";
    return s;
  }
  // In a container: the grant's limits, the container removed when the job or the command
  // is stopped (SIGTERM: the engine's client would leave it running).
  ContainerRun run;
  run.name = container_name;
  const std::string* image = image_for(*containers, p.cuda, p.python);
  run.image = image != nullptr ? *image : std::string();
  run.env_omitted = omitted;
  if (p.sizing) run.env_by_name = {"MAX_JOBS", "NVCC_THREADS"};
  if (p.where == Where::test) run.env_by_name.emplace_back("CUDA_VISIBLE_DEVICES");
  const std::vector<std::string> argv = container_run_argv(*containers, spec, run);
  s += "wf_opts=(--cpus \"$wf_cpus\")\n";
  s += "if [ -n \"$wf_memory_mb\" ]; then wf_opts+=(--memory \"${wf_memory_mb}m\" --memory-swap "
       "\"${wf_memory_mb}m\"); fi\n";
  if (containers->as_server_user) s += "wf_opts+=(--user \"$(id -u):$(id -g)\")\n";
  if (p.sizing) s += "export MAX_JOBS=\"$wf_max_jobs\" NVCC_THREADS=\"$wf_nvcc_threads\"\n";
  std::string remove;
  for (const auto& a : container_remove_argv(*containers, container_name))
    remove += shell_quote(a) + " ";
  s += "trap " + shell_quote(remove + ">/dev/null 2>&1") + " TERM\n";
  // The options go right after `run`.
  const std::size_t run_at = 1 + containers->engine_args.size();
  for (std::size_t i = 0; i < argv.size(); ++i) {
    if (i > 0) s += " ";
    s += shell_quote(argv[i]);
    if (i == run_at) s += " \"${wf_opts[@]}\"";
  }
  s += " &\n";
  s += "wf_client=$!\n";
  s += "wait \"$wf_client\"\n";
  s += "wf_status=$?\n";
  s += "wait \"$wf_client\" 2>/dev/null\n";
  s += "exit \"$wf_status\"\n";
  return s;
}

}  // namespace wf::build
