#include "container.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

#include "detached.hpp"
#include "files.hpp"
#include "units.hpp"
#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::build {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// How long the engine's client may take to end after its container was removed.
constexpr std::chrono::seconds kClientGrace{30};
constexpr std::chrono::seconds kContainerClientTimeout{120};

bool is_engine_variable(std::string_view name) {
  static constexpr std::string_view kNames[] = {
      "PATH",
      "HOME",
      "USER",
      "LOGNAME",
      "LANG",
      "TMPDIR",
      "XDG_RUNTIME_DIR",
      "XDG_CONFIG_HOME",
      "XDG_DATA_HOME",
      "REGISTRY_AUTH_FILE",
  };
  if (name.starts_with("CONTAINERS_") || name.starts_with("DOCKER_")) return true;
  return std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
}

// One running container: the engine's client as a local process (a detached one for the
// build: detached.hpp), and the removal that ends the container when the command is
// cancelled or runs out of time.
class ContainerExecution final : public Execution {
 public:
  ContainerExecution(std::unique_ptr<Execution> client, std::vector<std::string> remove,
                     std::chrono::milliseconds timeout, catalog::Provenance provenance,
                     Clock::time_point started = Clock::now())
      : client_(std::move(client)),
        remove_(std::move(remove)),
        timeout_(timeout),
        provenance_(std::move(provenance)),
        started_(started) {}

  /// nullopt for a re-attached client: the job's record keeps what its start recorded.
  std::optional<catalog::Provenance> provenance() const override {
    if (provenance_.image.empty()) return std::nullopt;
    return provenance_;
  }

  std::optional<ExitStatus> poll() override {
    if (status_) return status_;
    const auto now = Clock::now();
    if (!ending_ && timeout_.count() > 0 && now - started_ >= timeout_) {
      timed_out_ = true;
      end_container();
    }
    if (remover_) (void)remover_->poll();
    // A client that does not end once its container is gone is ended too.
    if (ending_ && !client_stopped_ && now - ending_at_ >= kClientGrace) {
      client_->cancel();
      client_stopped_ = true;
    }
    auto ended = client_->poll();
    if (!ended) return std::nullopt;
    // Reported once the removal is through too, so that no container outlives the command.
    if (remover_ && !remover_->poll()) return std::nullopt;
    ExitStatus out = *ended;
    if (timed_out_) {
      out.timed_out = true;
      out.timeout = timeout_;
    }
    out.cancelled = cancelled_;
    status_ = out;
    return status_;
  }

  void cancel() override {
    if (status_ || ending_) return;
    cancelled_ = true;
    end_container();
  }

  [[nodiscard]] bool detached() const override { return client_->detached(); }

 private:
  void end_container() {
    ending_ = true;
    ending_at_ = Clock::now();
    ProcessSpec spec;
    spec.argv = remove_;
    spec.env = engine_environment();
    spec.log_file = "/dev/null";
    spec.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(kContainerClientTimeout);
    auto remover = Process::start(spec);
    if (remover) {
      remover_.emplace(std::move(*remover));
    } else {
      // No way to remove it: ending the client is all that is left.
      client_->cancel();
      client_stopped_ = true;
    }
  }

  std::unique_ptr<Execution> client_;
  std::vector<std::string> remove_;
  std::chrono::milliseconds timeout_;
  catalog::Provenance provenance_;
  Clock::time_point started_;
  std::optional<Process> remover_;
  bool ending_ = false;
  bool cancelled_ = false;
  bool timed_out_ = false;
  bool client_stopped_ = false;
  Clock::time_point ending_at_;
  std::optional<ExitStatus> status_;
};

class ContainerExecutor final : public Executor {
 public:
  ContainerExecutor(ContainerConfig config, ClientRunner client)
      : config_(std::move(config)), client_(std::move(client)) {
    if (!client_) {
      client_ = [](const std::vector<std::string>& argv) {
        return run_client(argv, engine_environment(), kContainerClientTimeout);
      };
    }
  }

  std::string_view name() const override {
    return config_.engine == ContainerConfig::Engine::docker ? "docker" : "podman";
  }

  Capacity capacity() override { return Capacity{available_memory_bytes(), available_cores()}; }

  Status prepare(const fs::path& work_dir) override { return make_directories(work_dir); }

  Result<std::unique_ptr<Execution>> start(const ProcessSpec& spec) override {
    const CommandPlacement& p = spec.placement;
    if (p.where == CommandPlacement::Where::server) return start_local(spec);
    const std::string* image = image_for(config_, p.cuda, p.python);
    if (image == nullptr) {
      return make_error(Errc::invalid, "no container image for CUDA " + p.cuda + " (Python " +
                                           p.python + ") in [build.images]");
    }
    ContainerRun run;
    // Unique on the host, also for a command run again after a failed re-attach.
    run.name = container_name(
        p, std::string(where_name(p.where)) + "-" + hex_encode(crypto::random_bytes(4)));
    run.image = *image;
    run.memory = memory_arg(p.memory_bytes);
    if (p.cpus > 0) run.cpus = std::to_string(p.cpus);
    if (config_.as_server_user) {
      run.user = std::to_string(::getuid()) + ":" + std::to_string(::getgid());
    }
    ProcessSpec client;
    client.argv = container_run_argv(config_, spec, run);
    // What runs the command, in the job's log and record (as a batch job's sbatch line is).
    catalog::Provenance provenance;
    provenance.image = *image;
    provenance.image_digest = image_digest(*image);
    provenance.engine_command = command_line(argv_for_log(client.argv));
    note_in(p.log, "[" + std::string(name()) + "] image " + *image +
                       (provenance.image_digest.empty() ? std::string(" (no digest reported)")
                                                        : " (" + provenance.image_digest + ")") +
                       ": " + provenance.engine_command);
    client.env = engine_environment();
    client.cwd = p.work_dir;
    client.log_file = spec.log_file;
    client.kill_grace = spec.kill_grace;
    Result<std::unique_ptr<Execution>> started = make_error(Errc::internal, "not started");
    if (p.lifetime == CommandPlacement::Lifetime::detached) {
      // The client (and so the container, which ends with it) outlives the server; the next
      // one finds the container's name in the record.
      const std::string identity = command_identity(spec);
      started = start_detached(client, detached_dir(p.work_dir, identity), identity,
                               {{"container", run.name}});
    } else {
      started = start_local(client);
    }
    if (!started) {
      return make_error(started.error().code,
                        engine_program(config_) + ": " + started.error().message);
    }
    return std::unique_ptr<Execution>(std::make_unique<ContainerExecution>(
        std::move(*started), container_remove_argv(config_, run.name), spec.timeout,
        std::move(provenance)));
  }

  bool reattaches() const override { return true; }

  Result<std::unique_ptr<Execution>> reattach(const ProcessSpec& spec) override {
    const CommandPlacement& p = spec.placement;
    if (p.lifetime != CommandPlacement::Lifetime::detached) {
      return make_error(Errc::not_found, "only a detached command (the build) is re-attached to");
    }
    const std::string identity = command_identity(spec);
    const fs::path dir = detached_dir(p.work_dir, identity);
    auto record = read_detached_record(dir);
    if (!record || record->identity != identity || !record->notes.contains("container")) {
      return make_error(Errc::not_found,
                        "no such command ran (the recipe or the configuration changed?)");
    }
    auto client = reattach_detached(dir, *record, std::chrono::milliseconds(0), spec.kill_grace);
    if (!client) return client.error();
    // The timeout counts from the container's start.
    const auto running_for = std::chrono::seconds(
        std::max<std::int64_t>(0, std::chrono::duration_cast<std::chrono::seconds>(
                                      std::chrono::system_clock::now().time_since_epoch())
                                          .count() -
                                      record->started_at));
    return std::unique_ptr<Execution>(std::make_unique<ContainerExecution>(
        std::move(*client), container_remove_argv(config_, record->notes.at("container")),
        spec.timeout, catalog::Provenance{}, Clock::now() - running_for));
  }

  std::string read_log(const fs::path& log, std::uint64_t offset, std::size_t max) override {
    return read_file_chunk(log, offset, max);
  }

  LogChunk read_log_tail(const fs::path& log, std::size_t max) override {
    LogChunk chunk;
    chunk.data = build::read_log_tail(log, max, chunk.offset);
    return chunk;
  }

  void release(const CommandPlacement& job, Release how) override {
    // Containers of a finished job are gone (--rm); those of a server that died are not.
    if (how != Release::abandoned) return;
    auto listed = client_(container_list_argv(config_, job_label(job)));
    if (!listed || !listed->status.success()) return;
    int removed = 0;
    for (const auto id : split(listed->output, '\n')) {
      const std::string name(trim(id));
      if (name.empty()) continue;
      if (auto gone = client_(container_remove_argv(config_, name));
          gone && gone->status.success()) {
        ++removed;
      }
    }
    if (removed > 0) {
      note_in(job.log, "removed " + std::to_string(removed) +
                           " container(s) left from the previous attempt");
    }
  }

  std::vector<std::string> check(const fs::path& /*builds_dir*/, const ResourceRequest& /*probe*/,
                                 std::chrono::seconds /*limit*/,
                                 std::vector<std::string>& notes) override {
    std::vector<std::string> problems;
    const std::string program = engine_program(config_);
    std::vector<std::string> version = {program};
    version.insert(version.end(), config_.engine_args.begin(), config_.engine_args.end());
    version.emplace_back("version");
    auto answered = client_(version);
    if (!answered || !answered->status.success()) {
      problems.push_back("build.executor: `" + command_line(version) + "` failed: " +
                         (answered ? answered->status.describe() + ": " +
                                         sanitize_for_log(trim(answered->output), 500)
                                   : answered.error().message));
      return problems;
    }
    notes.push_back(program + " answers");
    for (const auto& [key, image] : config_.images) {
      std::vector<std::string> inspect = {program};
      inspect.insert(inspect.end(), config_.engine_args.begin(), config_.engine_args.end());
      for (const char* a : {"image", "inspect", "--format", "{{.Id}}"}) inspect.emplace_back(a);
      inspect.push_back(image);
      auto found = client_(inspect);
      if (!found || !found->status.success()) {
        problems.push_back(
            "build.images." + key + ": image '" + sanitize_for_log(image) +
            "' is not on this host (" + program + " image inspect: " +
            (found ? sanitize_for_log(trim(found->output), 300) : found.error().message) + ")");
      } else {
        notes.push_back("image " + image + " is there");
      }
    }
    return problems;
  }

 private:
  // The image's repository digest (the part after '@'), else its id, as the engine reports
  // them now; empty when it reports neither (the run itself then says what is wrong).
  std::string image_digest(const std::string& image) {
    std::vector<std::string> inspect = {engine_program(config_)};
    inspect.insert(inspect.end(), config_.engine_args.begin(), config_.engine_args.end());
    for (const char* a :
         {"image", "inspect", "--format", "{{.Id}} {{range .RepoDigests}}{{.}} {{end}}"}) {
      inspect.emplace_back(a);
    }
    inspect.push_back(image);
    auto found = client_(inspect);
    if (!found || !found->status.success()) return {};
    return parse_image_digest(found->output);
  }

  ContainerConfig config_;
  ClientRunner client_;
};

}  // namespace

std::string engine_program(const ContainerConfig& config) {
  if (!config.program.empty()) return config.program;
  return config.engine == ContainerConfig::Engine::docker ? "docker" : "podman";
}

std::string job_label(const CommandPlacement& job) {
  return "org.wheelforge.job=" + crypto::sha256_hex(job.job_tag).substr(0, 16);
}

std::string container_name(const CommandPlacement& job, std::string_view tag) {
  return "wf-" + crypto::sha256_hex(job.job_tag).substr(0, 12) + "-" + std::to_string(job.job_id) +
         "-" + std::string(tag);
}

std::string parse_image_digest(std::string_view output) {
  const std::string_view line = trim(output.substr(0, output.find('\n')));
  const auto words = split(line, ' ');
  std::string id;
  for (const auto word : words) {
    const std::string_view w = trim(word);
    if (w.empty()) continue;
    if (id.empty()) {
      id = std::string(w);
      continue;
    }
    if (const std::size_t at = w.find('@'); at != std::string_view::npos) {
      return sanitize_for_log(w.substr(at + 1), 200);
    }
  }
  if (!id.empty() && id.find(':') == std::string::npos) id = "sha256:" + id;
  return sanitize_for_log(id, 200);
}

std::vector<std::string> argv_for_log(std::vector<std::string> argv) {
  static constexpr std::string_view kSecretWords[] = {"TOKEN",      "SECRET", "PASSWORD",
                                                      "PASSWD",     "APIKEY", "API_KEY",
                                                      "CREDENTIAL", "AUTH",   "PRIVATE"};
  for (std::size_t i = 1; i < argv.size(); ++i) {
    if (argv[i - 1] != "--env") continue;
    const std::size_t eq = argv[i].find('=');
    if (eq == std::string::npos) continue;
    std::string name = argv[i].substr(0, eq);
    for (auto& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    for (const auto word : kSecretWords) {
      if (name.find(word) != std::string::npos) {
        argv[i] = argv[i].substr(0, eq + 1) + "***";
        break;
      }
    }
  }
  return argv;
}

std::string memory_arg(std::uint64_t bytes) {
  if (bytes == 0) return {};
  return std::to_string((bytes + kMiB - 1) / kMiB) + "m";
}

std::vector<std::string> container_run_argv(const ContainerConfig& config, const ProcessSpec& spec,
                                            const ContainerRun& run) {
  const CommandPlacement& p = spec.placement;
  std::vector<std::string> argv = {engine_program(config)};
  argv.insert(argv.end(), config.engine_args.begin(), config.engine_args.end());
  for (const auto& a : {std::string("run"), std::string("--rm"), std::string("--init"),
                        std::string("--name"), run.name, std::string("--label"), job_label(p)}) {
    argv.push_back(a);
  }
  if (!run.user.empty()) {
    argv.emplace_back("--user");
    argv.push_back(run.user);
  }
  argv.emplace_back("--network");
  argv.push_back(config.network);
  // The job's files at the same paths as on the host: every path the steps pass stays valid.
  const auto volume = [&argv](const std::string& host, const std::string& inside,
                              const char* mode) {
    argv.emplace_back("--volume");
    argv.push_back(host + ":" + inside + ":" + mode);
  };
  if (!p.work_dir.empty()) volume(p.work_dir.string(), p.work_dir.string(), "rw");
  if (!p.envs_dir.empty()) volume(p.envs_dir.string(), p.envs_dir.string(), "rw");
  if (!p.pip_cache.empty()) volume(p.pip_cache.string(), p.pip_cache.string(), "rw");
  if (!p.compile_cache.empty()) {
    volume(p.compile_cache.string(), p.compile_cache.string(), "rw");
  }
  for (const auto& mount : config.mounts) {
    const std::size_t colon = mount.find(':');
    if (colon == std::string::npos) {
      volume(mount, mount, "ro");
    } else {
      volume(mount.substr(0, colon), mount.substr(colon + 1), "ro");
    }
  }
  if (!run.memory.empty()) {
    for (const char* flag : {"--memory", "--memory-swap"}) {
      argv.emplace_back(flag);
      argv.push_back(run.memory);
    }
  }
  if (!run.cpus.empty()) {
    argv.emplace_back("--cpus");
    argv.push_back(run.cpus);
  }
  if (p.where == CommandPlacement::Where::test) {
    if (config.gpus == ContainerConfig::Gpus::cdi) {
      argv.emplace_back("--device");
      argv.emplace_back("nvidia.com/gpu=all");
    } else if (config.gpus == ContainerConfig::Gpus::all) {
      argv.emplace_back("--gpus");
      argv.emplace_back("all");
    }
  }
  argv.emplace_back("--workdir");
  argv.push_back(spec.cwd.empty() ? p.work_dir.string() : spec.cwd.string());
  for (const auto& [k, v] : spec.env) {
    if (std::find(run.env_omitted.begin(), run.env_omitted.end(), k) != run.env_omitted.end()) {
      continue;
    }
    argv.emplace_back("--env");
    argv.push_back(k + "=" + v);
  }
  for (const auto& name : run.env_by_name) {
    argv.emplace_back("--env");
    argv.push_back(name);
  }
  argv.insert(argv.end(), config.run_args.begin(), config.run_args.end());
  argv.push_back(run.image);
  argv.insert(argv.end(), spec.argv.begin(), spec.argv.end());
  return argv;
}

std::vector<std::string> container_remove_argv(const ContainerConfig& config,
                                               const std::string& name) {
  std::vector<std::string> argv = {engine_program(config)};
  argv.insert(argv.end(), config.engine_args.begin(), config.engine_args.end());
  argv.emplace_back("rm");
  argv.emplace_back("--force");
  // podman waits up to 10 s for a stop otherwise; docker's rm --force kills at once.
  if (config.engine == ContainerConfig::Engine::podman) {
    argv.emplace_back("--time");
    argv.emplace_back("0");
  }
  argv.push_back(name);
  return argv;
}

std::vector<std::string> container_list_argv(const ContainerConfig& config,
                                             const std::string& label) {
  std::vector<std::string> argv = {engine_program(config)};
  argv.insert(argv.end(), config.engine_args.begin(), config.engine_args.end());
  for (const char* a : {"ps", "--all", "--quiet", "--filter"}) argv.emplace_back(a);
  argv.push_back("label=" + label);
  return argv;
}

std::vector<std::pair<std::string, std::string>> engine_environment() {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& [k, v] : server_environment()) {
    if (is_engine_variable(k)) out.emplace_back(std::move(k), std::move(v));
  }
  return out;
}

std::unique_ptr<Executor> make_container_executor(const ContainerConfig& config,
                                                  ClientRunner client) {
  return std::make_unique<ContainerExecutor>(config, std::move(client));
}

}  // namespace wf::build
