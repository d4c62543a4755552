#pragma once
// What the container and Slurm executors share: running a client program (podman, docker,
// sbatch, scontrol, scancel) and capturing what it prints, the environment such clients get,
// and the local executor's way of running a command on this host (for the steps whose
// commands stay on the server).

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "wheelforge/build/executor.hpp"

namespace wf::build {

/// Starts `spec` as a local process (the local executor's start()).
[[nodiscard]] Result<std::unique_ptr<Execution>> start_local(const ProcessSpec& spec);

/// What a client printed (stdout and stderr together) and how it ended.
struct ClientOutput {
  ExitStatus status;
  std::string output;
};

/// Runs a client with `env` to its end (killed after `timeout`) and returns its output (at
/// most 1 MiB). Fails when it cannot start (the program is missing). Blocks.
[[nodiscard]] Result<ClientOutput> run_client(
    const std::vector<std::string>& argv,
    const std::vector<std::pair<std::string, std::string>>& env, std::chrono::seconds timeout);

/// How executors run their clients; tests replace it with a fake that records the command
/// lines and answers from a script.
using ClientRunner = std::function<Result<ClientOutput>(const std::vector<std::string>& argv)>;

/// The environment clients run with: this server's own (the engine's and the cluster's
/// settings come from it: CONTAINERS_CONF, DOCKER_HOST, SLURM_CONF, ...).
[[nodiscard]] std::vector<std::pair<std::string, std::string>> server_environment();

/// `argv` as a command line for logs and messages (arguments with spaces quoted).
[[nodiscard]] std::string command_line(const std::vector<std::string>& argv);

/// Appends "==> <line>" to a job's log (the executor's own notes), redacted.
void note_in(const std::filesystem::path& log, std::string_view line);

}  // namespace wf::build
