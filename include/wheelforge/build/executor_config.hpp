#pragma once
// Which executor runs a build's commands, and how: [build.executor] and [build.images] of the
// configuration file (docs/runner.md, "Executors"). Plain data; the app module reads it from TOML
// and make_executor() (executor.hpp) turns it into an Executor.

#include <chrono>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace wf::build {

/// How a container engine runs a command (podman or docker, on this host or in a Slurm job).
struct ContainerConfig {
  enum class Engine { podman, docker };
  Engine engine = Engine::podman;
  /// The engine's CLI: a path, or a name looked up in the server's PATH. Empty: "podman" or
  /// "docker".
  std::string program;
  /// Options before `run` (the engine's global options, e.g. podman's
  /// ["--runtime", "runc", "--cgroup-manager", "cgroupfs"]).
  std::vector<std::string> engine_args;
  /// Options added to every `run` (e.g. ["--ulimit", "nofile=20000:20000"]).
  std::vector<std::string> run_args;
  /// The image of each cell: keys "12.8" (every Python) or "12.8/3.12" (one Python, tried
  /// first).
  std::map<std::string, std::string> images;
  /// How the smoke test gets the GPUs.
  enum class Gpus {
    cdi,   ///< --device nvidia.com/gpu=all (CDI; podman, docker 25+)
    all,   ///< --gpus all (docker with the NVIDIA runtime hook, podman 5)
    none,  ///< no GPU: the smoke test runs on the CPU only
  };
  Gpus gpus = Gpus::cdi;
  /// --network: "host" (the default) lets the build environment reach this server's index on
  /// the host's loopback; "none" for builds that need no index.
  std::string network = "host";
  /// Further host paths every command sees, read-only: "/usr/local/cuda-12.8" (the same path
  /// inside) or "/opt/cuda-12.8:/usr/local/cuda" (host:container).
  std::vector<std::string> mounts;
  /// Run commands as the server's user and group (--user UID:GID), so that what they write
  /// into the builds directory belongs to the server; false: the image's user (rootless
  /// podman, where the server's user already is root inside).
  bool as_server_user = true;
  friend bool operator==(const ContainerConfig&, const ContainerConfig&) = default;
};

/// A Slurm cluster that runs each job's commands in batch jobs.
struct SlurmConfig {
  std::string partition;        ///< --partition of build jobs; empty: the cluster's default
  std::string account;          ///< --account; empty: none
  std::string smoke_partition;  ///< --partition of smoke-test jobs; empty: `partition`
  std::string gres;             ///< --gres of smoke-test jobs, e.g. "gpu:1"; empty: none
  std::vector<std::string> sbatch_args;  ///< further sbatch options of every job
  /// CPUs of a build job when its recipe names none.
  unsigned default_cpus = 4;
  /// How long a batch job waits for its next command before it ends by itself (a server that
  /// went away does not hold the allocation for ever).
  std::chrono::seconds idle_timeout{600};
  /// Run each command in a container inside the batch job (Slurm + containers), with the
  /// executor's ContainerConfig.
  bool in_containers = false;
  friend bool operator==(const SlurmConfig&, const SlurmConfig&) = default;
};

struct ExecutorConfig {
  enum class Kind { local, podman, docker, slurm };
  Kind kind = Kind::local;
  ContainerConfig container;  ///< podman, docker, and slurm with in_containers
  SlurmConfig slurm;          ///< slurm

  /// True when the cells' interpreters and CUDA homes are paths inside container images or on
  /// cluster nodes rather than on the server's host.
  [[nodiscard]] bool remote_toolchain() const { return kind != Kind::local; }
  /// The container settings in effect, or nullptr when commands run outside containers.
  [[nodiscard]] const ContainerConfig* containers() const {
    if (kind == Kind::podman || kind == Kind::docker) return &container;
    if (kind == Kind::slurm && slurm.in_containers) return &container;
    return nullptr;
  }
  friend bool operator==(const ExecutorConfig&, const ExecutorConfig&) = default;
};

/// "local", "podman", "docker", "slurm".
[[nodiscard]] const char* kind_name(ExecutorConfig::Kind kind);

/// The image of a cell: the "CUDA/PYTHON" entry, else the "CUDA" one; nullptr when neither.
[[nodiscard]] inline const std::string* image_for(const ContainerConfig& config,
                                                  std::string_view cuda, std::string_view python) {
  std::string key = std::string(cuda) + "/" + std::string(python);
  if (const auto it = config.images.find(key); it != config.images.end()) return &it->second;
  key = std::string(cuda);
  if (const auto it = config.images.find(key); it != config.images.end()) return &it->second;
  return nullptr;
}

}  // namespace wf::build
