#include "wheelforge/build/executor.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "files.hpp"
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

  Result<std::unique_ptr<Execution>> start(const ProcessSpec& spec) override {
    auto process = Process::start(spec);
    if (!process) return process.error();
    return std::unique_ptr<Execution>(std::make_unique<LocalExecution>(std::move(*process)));
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

std::unique_ptr<Executor> make_local_executor() {
  return std::make_unique<LocalExecutor>();
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
