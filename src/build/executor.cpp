#include "wheelforge/build/executor.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "container.hpp"
#include "detached.hpp"
#include "files.hpp"
#include "remote.hpp"
#include "slurm.hpp"
#include "wheelforge/util/fs.hpp"

namespace wf::build {
namespace {

class LocalExecution final : public Execution {
 public:
  explicit LocalExecution(Process process) : process_(std::move(process)) {}
  std::optional<ExitStatus> poll() override { return process_.poll(); }
  void cancel() override { process_.cancel(); }

 private:
  Process process_;
};

class LocalExecutor final : public Executor {
 public:
  std::string_view name() const override { return "local"; }

  Capacity capacity() override { return Capacity{available_memory_bytes(), available_cores()}; }

  Status prepare(const std::filesystem::path& work_dir) override {
    return make_directories(work_dir);
  }

  bool reattaches() const override { return true; }

  Result<std::unique_ptr<Execution>> start(const ProcessSpec& spec) override {
    if (spec.placement.lifetime != CommandPlacement::Lifetime::detached) return start_local(spec);
    const std::string identity = command_identity(spec);
    return start_detached(spec, detached_dir(spec.placement.work_dir, identity), identity);
  }

  Result<std::unique_ptr<Execution>> reattach(const ProcessSpec& spec) override {
    if (spec.placement.lifetime != CommandPlacement::Lifetime::detached) {
      return make_error(Errc::not_found, "only a detached command (the build) is re-attached to");
    }
    const std::string identity = command_identity(spec);
    const auto dir = detached_dir(spec.placement.work_dir, identity);
    auto record = read_detached_record(dir);
    if (!record || record->identity != identity) {
      return make_error(Errc::not_found,
                        "no such command ran (the recipe or the configuration changed?)");
    }
    return reattach_detached(dir, *record, spec.timeout, spec.kill_grace);
  }

  void release(const CommandPlacement& job, Release how) override {
    // What a job left on this host: every process carries its tag.
    if (how == Release::abandoned && !job.job_tag.empty()) {
      const int killed = kill_processes_with_env("WHEELFORGE_JOB=" + job.job_tag);
      if (killed > 0) {
        note_in(job.log,
                "ended " + std::to_string(killed) + " process(es) left from the previous attempt");
      }
    }
  }

  std::string read_log(const std::filesystem::path& log, std::uint64_t offset,
                       std::size_t max) override {
    return read_file_chunk(log, offset, max);
  }

  LogChunk read_log_tail(const std::filesystem::path& log, std::size_t max) override {
    LogChunk chunk;
    chunk.data = build::read_log_tail(log, max, chunk.offset);
    return chunk;
  }
};

}  // namespace

Result<std::unique_ptr<Execution>> Executor::reattach(const ProcessSpec& /*spec*/) {
  return make_error(Errc::not_found,
                    "the " + std::string(name()) + " executor does not re-attach to commands");
}

void Executor::release(const CommandPlacement& /*job*/, Release /*how*/) {}

Result<FittedRequest> Executor::fit_request(const ResourceRequest& request) {
  return FittedRequest{request, {}};
}

std::vector<std::string> Executor::check(const std::filesystem::path& /*builds_dir*/,
                                         const ResourceRequest& /*probe*/,
                                         std::chrono::seconds /*limit*/,
                                         std::vector<std::string>& /*notes*/) {
  return {};
}

const char* kind_name(ExecutorConfig::Kind kind) {
  switch (kind) {
    case ExecutorConfig::Kind::local:
      return "local";
    case ExecutorConfig::Kind::podman:
      return "podman";
    case ExecutorConfig::Kind::docker:
      return "docker";
    case ExecutorConfig::Kind::slurm:
      return "slurm";
  }
  return "local";
}

std::unique_ptr<Executor> make_local_executor() {
  return std::make_unique<LocalExecutor>();
}

Result<std::unique_ptr<Execution>> start_local(const ProcessSpec& spec) {
  auto process = Process::start(spec);
  if (!process) return process.error();
  return std::unique_ptr<Execution>(std::make_unique<LocalExecution>(std::move(*process)));
}

std::unique_ptr<Executor> make_executor(const ExecutorConfig& config) {
  switch (config.kind) {
    case ExecutorConfig::Kind::local:
      return make_local_executor();
    case ExecutorConfig::Kind::podman:
    case ExecutorConfig::Kind::docker:
      return make_container_executor(config.container);
    case ExecutorConfig::Kind::slurm:
      return make_slurm_executor(config.slurm, config.containers(), {});
  }
  return make_local_executor();
}

Result<ExitStatus> run_on(Executor& executor, const ProcessSpec& spec,
                          const std::function<bool()>& should_cancel,
                          std::chrono::milliseconds poll_interval) {
  auto execution = executor.start(spec);
  if (!execution) return execution.error();
  bool cancelled = false;
  while (true) {
    if (auto status = (*execution)->poll()) return *status;
    if (!cancelled && should_cancel && should_cancel()) {
      (*execution)->cancel();
      cancelled = true;
    }
    std::this_thread::sleep_for(poll_interval);
  }
}

}  // namespace wf::build
