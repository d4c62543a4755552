#pragma once
// The Slurm executor: a job's commands run in batch jobs on a cluster, optionally each in a
// container of the cell's image there (Slurm + containers).
//
// A batch job runs an *agent* (agent_script): a small bash loop in a directory of the job's
// work directory, DATA_DIR/builds/job-<id>/slurm/<n>-<where>/, that runs the commands the
// server writes there (cmd-1.sh, cmd-2.sh, ...: command_script) one at a time, each in its
// own process group, and records how each ended (cmd-K.started, cmd-K.exit). The server
// learns everything through these files and `scontrol show job` (then `sacct` for a job
// slurmctld has forgotten), never through a connection to the node: the builds directory
// must be on a filesystem the server and the nodes share.
//
// One batch job per job and placement:
//   build  the toolchain checks, the environment and the build, with --cpus-per-task and
//          --mem from the recipe (cpus, gb_per_job); MAX_JOBS and NVCC_THREADS are computed
//          inside the job from SLURM_CPUS_PER_TASK and SLURM_MEM_PER_NODE by the formula of
//          core::compute_parallelism (parallelism_awk), halved once per earlier OOM retry.
//          A failed build ends its batch job: an OOM retry runs in a new one, sized afresh.
//   test   the smoke test, on smoke_partition with gres (a GPU node); starting it ends the
//          build job.
// A batch job ends when the server says so (an `end` file: the job is over, or moved on), when
// it has waited idle_timeout for a command, when its --time (the recipe's timeout, in whole
// minutes) runs out, or when it is cancelled (scancel: a cancelled wheelforge job).
//
// Size: a build job's CPUs and memory are fitted to the partition's nodes (`sinfo`) before
// its first batch job (fit_request): the defaults are lowered to what a node holds, a recipe's
// own demand that no node holds fails the job at once.
//
// States (scontrol's JobState): PENDING waits (noted in the log once, with the reason), unless
// its reason never passes (never_starts: the batch job is cancelled and the command fails with
// that reason); RUNNING and the other active states run; a command's own end comes from its
// exit file. A batch job that ended before the command reported: CANCELLED (by wheelforge: the
// command is cancelled; by anyone else: it failed), TIMEOUT (timed out), OUT_OF_MEMORY (killed
// by SIGKILL: the OOM retry), FAILED, NODE_FAIL, BOOT_FAIL, PREEMPTED, DEADLINE (failed,
// naming the state), and a job neither scontrol nor sacct knows any more (lost).
//
// Crash recovery: the files and the batch job outlive the server. A restarted server
// re-attaches to the build command it finds in the job's latest build directory (reattach())
// and to its batch job, recorded in the job store.

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "remote.hpp"
#include "wheelforge/build/executor.hpp"
#include "wheelforge/build/executor_config.hpp"

namespace wf::build {

/// A batch job as the cluster reports it.
struct SlurmJob {
  std::string id;
  bool known = false;  ///< false: neither scontrol nor sacct knows it (any more)
  std::string state;   ///< JobState's first word: "PENDING", "RUNNING", "OUT_OF_MEMORY", ...
  std::string reason;  ///< Reason ("Resources", "None", ...)
  std::string node;    ///< BatchHost, else NodeList
  int exit_code = 0;   ///< ExitCode=<code>:<signal>
  int signal = 0;
};

/// A node of a partition as `sinfo` reports it.
struct SlurmNode {
  std::string name;
  unsigned cpus = 0;
  std::uint64_t memory_mb = 0;  ///< RealMemory, MiB
  friend bool operator==(const SlurmNode&, const SlurmNode&) = default;
};

/// The `sinfo -h -N -o '%N|%c|%m|%P'` argv for `partition` (empty: every partition).
[[nodiscard]] std::vector<std::string> sinfo_argv(const std::string& partition);
/// The nodes of `partition` in that output, each once; for an empty partition, the nodes of
/// the default one (marked '*'), else every node listed.
[[nodiscard]] std::vector<SlurmNode> parse_sinfo_nodes(std::string_view output,
                                                       std::string_view partition);
/// `request` fitted to `nodes` (see Executor::fit_request): unchanged when a node holds it;
/// a default request lowered to the node that holds most of it, with a note saying so; a
/// recipe's own request that no node holds refused (invalid), naming what was asked and the
/// largest nodes. `where` names the partition in messages ("partition gpu").
[[nodiscard]] Result<FittedRequest> fit_to_nodes(const ResourceRequest& request,
                                                 const std::vector<SlurmNode>& nodes,
                                                 std::string_view where);
/// True for a pending Reason that never passes for this job as it was submitted: it asks for
/// more than the partition allows or any node holds (PartitionConfig, PartitionNodeLimit,
/// PartitionTimeLimit, BadConstraints, a QOS or association limit per job), names an
/// account, QOS or dependency that is invalid or can never be met, or ReqNodeNotAvail with no
/// unavailable node listed (no node could ever run it). Resources, Priority, a node that is
/// down for now and the like pass.
[[nodiscard]] bool never_starts(std::string_view reason);

/// The job id sbatch --parsable printed ("1234" or "1234;cluster"); nullopt when there is none.
[[nodiscard]] std::optional<std::string> parse_sbatch_id(std::string_view output);
/// A job from `scontrol show job -o ID` (one line of Key=Value fields). known is false when
/// the output has no JobState.
[[nodiscard]] SlurmJob parse_scontrol_job(std::string_view output);
/// A job from `sacct -X -n -P -j ID -o State,ExitCode` ("CANCELLED by 0|0:15"); known is
/// false when no line has both fields.
[[nodiscard]] SlurmJob parse_sacct_job(std::string_view output);
/// True for the states of a job that has not ended (PENDING, RUNNING, COMPLETING, ...).
[[nodiscard]] bool is_active_state(std::string_view state);
/// How a command ended when its batch job ended without its exit status (see the states
/// above). `cancelled_by_us`: wheelforge cancelled it; `started`: the agent had started;
/// `time_limit`: the job's --time.
[[nodiscard]] ExitStatus ended_status(const SlurmJob& job, bool cancelled_by_us, bool started,
                                      std::chrono::milliseconds time_limit);

/// A recipe timeout as sbatch --time: whole minutes, rounded up (at least 1); 0: none.
[[nodiscard]] std::chrono::minutes time_limit(std::chrono::milliseconds timeout);

/// The sbatch command line of a batch job for `spec`'s job and placement, its agent in
/// `session_dir`. The job gets none of the server's environment (--export=NONE) but the
/// variables named in `exported` (a container engine's settings).
[[nodiscard]] std::vector<std::string> sbatch_argv(const SlurmConfig& config,
                                                   const ProcessSpec& spec,
                                                   const std::filesystem::path& session_dir,
                                                   const std::vector<std::string>& exported);

/// The agent a batch job runs (bash). `idle`: how long it waits for a command; `grace`:
/// between SIGTERM and SIGKILL when the server stops a command (its timeout).
[[nodiscard]] std::string agent_script(const std::filesystem::path& session_dir,
                                       std::chrono::seconds idle, std::chrono::seconds grace);

/// The script of one command (bash): its output appended to its log, in its directory, with
/// exactly its environment (env -i), or in a container (`containers` set: the run argv of
/// container.hpp, the grant's limits from SLURM_*, the container removed on SIGTERM). A build
/// command (placement.sizing) gets MAX_JOBS and NVCC_THREADS from the job's grant.
[[nodiscard]] std::string command_script(const ProcessSpec& spec, const ContainerConfig* containers,
                                         const std::string& container_name);

/// The awk program that computes "MAX_JOBS NVCC_THREADS" from -v cpus, mem_mb, gb, archs,
/// halvings, as core::compute_parallelism and core::halve do.
[[nodiscard]] std::string_view parallelism_awk();

/// The Slurm executor. `containers`: run commands in containers (nullptr: directly on the
/// node). `client` runs sbatch, scontrol, sacct and scancel; empty: run_client with the
/// server's environment.
[[nodiscard]] std::unique_ptr<Executor> make_slurm_executor(const SlurmConfig& config,
                                                            const ContainerConfig* containers,
                                                            ClientRunner client);

}  // namespace wf::build
