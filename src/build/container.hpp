#pragma once
// The container executor: each command of a cell's build and smoke test runs in a container
// of the cell's image ([build.images]), through the podman or docker CLI of this host.
//
// What a container sees: the job's work directory and the build environments directory,
// writable, at the same paths as on the host (so every path the steps pass, the venv's
// interpreter, the source, the output, stays valid inside), the configured `mounts`
// read-only, and nothing else of the host. Its environment is exactly the command's (--env),
// its limits the job's grant (--memory, --memory-swap, --cpus), its network `network`, and the
// smoke test gets the GPUs (--device nvidia.com/gpu=all through CDI, or --gpus all).
// [build.python] and [build.cuda] name paths inside the image.
//
// The engine's client (`podman run`) is a local process whose output is the container's:
// it goes into the command's log. A container is named after its job and command and
// labelled with its job, so that cancelling a command (or a server started after one that
// died) removes it by name: killing the client would leave the container running.
//
// The argv built here is also what a Slurm job runs when its commands run in containers
// (slurm.hpp): one construction, unit-tested.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "remote.hpp"
#include "wheelforge/build/executor.hpp"
#include "wheelforge/build/executor_config.hpp"

namespace wf::build {

/// The engine's CLI ("podman", "docker" or the configured program).
[[nodiscard]] std::string engine_program(const ContainerConfig& config);

/// The label every container of a job carries ("org.wheelforge.job=<hash of the job tag>").
[[nodiscard]] std::string job_label(const CommandPlacement& job);

/// A container's name: "wf-<12 hex digits of the job tag's hash>-<job id>-<tag>", unique on a
/// host for a job's command `tag`.
[[nodiscard]] std::string container_name(const CommandPlacement& job, std::string_view tag);

/// What the run argv needs besides the command.
struct ContainerRun {
  std::string name;
  std::string image;
  /// --memory and --memory-swap (e.g. "1024m"), --cpus (e.g. "4"); empty: no limit.
  std::string memory;
  std::string cpus;
  /// --user UID:GID; empty: the image's user.
  std::string user;
  /// Variables passed by name from the client's environment (--env NAME), after the
  /// command's own.
  std::vector<std::string> env_by_name;
  /// Variables of the command's environment left out (the ones passed by name instead).
  std::vector<std::string> env_omitted;
};

/// `ENGINE [engine_args] run --rm --init --name N --label L [--user] --network NET --volume ...
/// (the work directory, the environments and the pip cache, at their paths)
/// [--memory M --memory-swap M] [--cpus C] [GPU] --workdir CWD --env K=V ... [run_args] IMAGE
/// ARGV...` for `spec` (placement, environment, working directory, argv). The working
/// directory defaults to the job's work directory.
[[nodiscard]] std::vector<std::string> container_run_argv(const ContainerConfig& config,
                                                          const ProcessSpec& spec,
                                                          const ContainerRun& run);

/// `ENGINE [engine_args] rm --force [--time 0] NAME`: ends and removes a container at once.
[[nodiscard]] std::vector<std::string> container_remove_argv(const ContainerConfig& config,
                                                             const std::string& name);

/// `ENGINE [engine_args] ps --all --quiet --filter label=L`: the containers of a job.
[[nodiscard]] std::vector<std::string> container_list_argv(const ContainerConfig& config,
                                                           const std::string& label);

/// The environment the engine's client runs with: this server's PATH, HOME, user and
/// XDG/TMPDIR variables, and every CONTAINERS_* / DOCKER_* / REGISTRY_AUTH_FILE variable it
/// has (how podman and docker are configured from outside).
[[nodiscard]] std::vector<std::pair<std::string, std::string>> engine_environment();

/// The digest of `image inspect --format '{{.Id}} {{range .RepoDigests}}{{.}} {{end}}'`
/// output: the first repository digest's part after '@' ("sha256:..."), else the image id
/// (with "sha256:" added when the engine leaves it out); empty for empty output.
[[nodiscard]] std::string parse_image_digest(std::string_view output);

/// A run argv as the job's log and record show it: the values of --env variables whose names
/// look like secrets (TOKEN, SECRET, PASSWORD, API_KEY, CREDENTIAL, AUTH, ...) replaced by ***.
[[nodiscard]] std::vector<std::string> argv_for_log(std::vector<std::string> argv);

/// --memory's value for a grant: whole MiB, rounded up ("1024m"); empty for 0.
[[nodiscard]] std::string memory_arg(std::uint64_t bytes);

/// The container executor; `client` runs the engine's short commands (rm, ps, image
/// inspect); empty: run_client with engine_environment().
[[nodiscard]] std::unique_ptr<Executor> make_container_executor(const ContainerConfig& config,
                                                                ClientRunner client = {});

}  // namespace wf::build
