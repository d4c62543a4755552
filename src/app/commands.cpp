#include <signal.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <future>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

#include "wheelforge/app/app.hpp"
#include "wheelforge/app/build_config.hpp"
#include "wheelforge/app/systemd.hpp"
#include "wheelforge/auth/tokens.hpp"
#include "wheelforge/catalog/catalog.hpp"
#include "wheelforge/catalog/jobs.hpp"
#include "wheelforge/core/name.hpp"
#include "wheelforge/http/server.hpp"
#include "wheelforge/ingest/ingestor.hpp"
#include "wheelforge/store/blob_store.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::app {
namespace {

/// Prints an error the way every command does and returns the exit status to use.
int report(const Error& error, int exit_status) {
  std::cerr << "error: " << error.message << "\n";
  return exit_status;
}

struct DataDir {
  std::unique_ptr<catalog::Catalog> catalog;
  std::unique_ptr<store::BlobStore> store;
};

Result<DataDir> open_data_dir(const Settings& settings) {
  std::error_code ec;
  std::filesystem::create_directories(settings.data_dir, ec);
  if (ec) return make_error(Errc::io, "create " + settings.data_dir.string() + ": " + ec.message());
  auto store = store::BlobStore::open(settings.data_dir);
  if (!store) return store.error();
  auto catalog = catalog::open_sqlite_catalog(settings.data_dir / "wheelforge.db");
  if (!catalog) return catalog.error();
  return DataDir{std::move(*catalog), std::move(*store)};
}

bool is_distribution(const std::filesystem::path& p) {
  const std::string name = p.filename().string();
  return name.ends_with(".whl") || name.ends_with(".tar.gz");
}

}  // namespace

namespace {

/// "<N>": the syslog priority of a log level, as journald reads it at the start of a line.
class SyslogPriority final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm& /*tm*/,
              spdlog::memory_buf_t& dest) override {
    int priority = 6;  // info
    switch (msg.level) {
      case spdlog::level::critical:
        priority = 2;
        break;
      case spdlog::level::err:
        priority = 3;
        break;
      case spdlog::level::warn:
        priority = 4;
        break;
      case spdlog::level::debug:
      case spdlog::level::trace:
        priority = 7;
        break;
      default:
        break;
    }
    const char text[] = {'<', static_cast<char>('0' + priority), '>'};
    dest.append(text, text + sizeof text);
  }
  [[nodiscard]] std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<SyslogPriority>();
  }
};

/// True when stderr is connected to the journal ($JOURNAL_STREAM names its device:inode).
bool stderr_is_journal() {
  const char* stream = std::getenv("JOURNAL_STREAM");
  if (stream == nullptr) return false;
  struct stat st {};
  if (::fstat(STDERR_FILENO, &st) != 0) return false;
  return std::string(stream) == std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
}

/// Formats lines into memory and leaves writing them to stderr to a thread of its own, which
/// writes whatever has gathered every 100 ms (at once for warnings and errors, or when much has
/// piled up). Logging a line therefore costs no system call and wakes no thread; a stalled
/// stderr never stalls the caller: above kMaxPending bytes, new lines are dropped (and counted).
class BatchingStderrSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  BatchingStderrSink() {
    // The writer thread must never be the one a process signal is delivered to: it starts
    // with every signal blocked (serve() takes SIGTERM/SIGINT/SIGHUP with sigwait).
    sigset_t all;
    sigset_t previous;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &previous);
    writer_ = std::thread([this] { write_loop(); });
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  }
  BatchingStderrSink(const BatchingStderrSink&) = delete;
  BatchingStderrSink& operator=(const BatchingStderrSink&) = delete;
  ~BatchingStderrSink() override {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_one();
    writer_.join();
  }

  /// Returns once every line logged so far has been written to stderr.
  void wait_written() {
    std::unique_lock lock(mutex_);
    const std::uint64_t target = logged_;
    urgent_ = true;
    wake_.notify_one();
    done_.wait(lock, [&] { return written_ >= target || stop_; });
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (pending_.size() >= kMaxPending) {
      ++dropped_;
      return;
    }
    spdlog::memory_buf_t formatted;
    formatter_->format(msg, formatted);
    pending_.append(formatted.data(), formatted.size());
    ++logged_;
    if (pending_.size() >= kWriteAt) urgent_ = true;
    if (urgent_) wake_.notify_one();
  }
  // Called with mutex_ held, for lines at or above the flush level.
  void flush_() override {
    urgent_ = true;
    wake_.notify_one();
  }

 private:
  static constexpr std::size_t kWriteAt = 64 * 1024;
  static constexpr std::size_t kMaxPending = 8 * 1024 * 1024;

  void write_loop() {
    std::string out;
    std::unique_lock lock(mutex_);
    while (true) {
      wake_.wait_for(lock, std::chrono::milliseconds(100), [this] { return urgent_ || stop_; });
      const bool stop = stop_;
      const std::uint64_t batch = logged_;
      out.swap(pending_);
      pending_.clear();
      if (dropped_ > 0) {
        out += "log: " + std::to_string(dropped_) + " line(s) dropped, stderr too slow\n";
        dropped_ = 0;
      }
      urgent_ = false;
      lock.unlock();
      if (!out.empty()) (void)write_all(STDERR_FILENO, out.data(), out.size());
      out.clear();
      lock.lock();
      written_ = batch;
      done_.notify_all();
      if (stop && pending_.empty()) return;
    }
  }

  std::string pending_;
  std::uint64_t dropped_ = 0;
  std::uint64_t logged_ = 0;   // lines taken in so far
  std::uint64_t written_ = 0;  // of those, written to stderr
  bool urgent_ = false;
  bool stop_ = false;
  std::condition_variable wake_;
  std::condition_variable done_;
  std::thread writer_;
};

std::weak_ptr<BatchingStderrSink> g_log_sink;

/// Makes sure lines logged so far are on stderr before the process tells the outside world
/// something (the "listening on" line, its end).
void flush_logs() {
  if (auto sink = g_log_sink.lock()) sink->wait_written();
}

}  // namespace

void init_logging() {
  auto sink = std::make_shared<BatchingStderrSink>();
  g_log_sink = sink;
  auto logger = std::make_shared<spdlog::logger>("wheelforge", sink);
  if (stderr_is_journal()) {
    // journald stamps each line itself and reads the priority from a "<N>" prefix.
    auto formatter = std::make_unique<spdlog::pattern_formatter>();
    formatter->add_flag<SyslogPriority>('*').set_pattern("%*%v");
    logger->set_formatter(std::move(formatter));
  } else {
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%fZ %l %v", spdlog::pattern_time_type::utc);
  }
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(logger);
}

int serve(const Settings& settings, const std::function<Result<Settings>()>& reload) {
  auto listen = parse_listen(settings.listen);
  if (!listen) return report(listen.error(), 2);
  auto dir = open_data_dir(settings);
  if (!dir) return report(dir.error(), 1);
  ingest::Limits limits;
  limits.max_file_size = settings.max_upload_size;
  ingest::Ingestor ingestor(*dir->store, *dir->catalog, limits);
  const Notifier notifier = Notifier::from_environment();

  // The build runner runs when recipes are configured.
  auto build_config = load_build_config(settings.config_file);
  if (!build_config) return report(build_config.error(), 2);
  std::unique_ptr<catalog::JobStore> job_store;
  std::unique_ptr<build::Runner> runner;
  std::function<void()> on_ingested;  // set once the server exists
  if (!build_config->recipes.empty()) {
    auto jobs = catalog::open_sqlite_job_store(settings.data_dir / "wheelforge.db");
    if (!jobs) return report(jobs.error(), 1);
    job_store = std::move(*jobs);
    runner =
        std::make_unique<build::Runner>(std::move(*build_config), *job_store, *dir->catalog,
                                        *dir->store, ingestor, settings.data_dir, [&on_ingested] {
                                          if (on_ingested) on_ingested();
                                        });
  }

  // Signals are taken by one dedicated thread (sigwait), so no handler runs inside the
  // network loop and stop() is called from ordinary code.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  http::ServerConfig config;
  config.host = listen->first;
  config.port = listen->second;
  config.worker_threads = settings.worker_threads;
  config.network_threads = settings.network_threads;
  config.read_timeout = settings.read_timeout;
  config.min_upload_rate = settings.min_upload_rate;
  config.idle_timeout = settings.idle_timeout;
  config.max_connections = settings.max_connections;
  config.shutdown_grace = settings.shutdown_grace;
  config.access_log = settings.access_log;
  config.private_reads = settings.private_reads;
  config.tls_cert_file = settings.tls_cert;
  config.tls_key_file = settings.tls_key;
  if (const auto fd = activated_socket()) config.listen_fd = *fd;
  http::Server server(
      config, http::Services{dir->catalog.get(), dir->store.get(), &ingestor, runner.get()});
  on_ingested = [&server] { server.reload_catalog([](const Status&) {}); };
  auto bound = server.start();
  if (!bound) return report(bound.error(), 1);
  spdlog::info("serving {} from {}{}", *bound, settings.data_dir.string(),
               config.listen_fd >= 0 ? " (socket activation)" : "");
  const char* scheme = settings.tls_cert.empty() ? "http" : "https";
  flush_logs();
  std::printf("listening on %s://%s\n", scheme, bound->c_str());
  std::fflush(stdout);
  if (runner) {
    runner->set_server_url(std::string(scheme) + "://" + *bound);
    if (auto st = runner->start(); !st) {
      std::cerr << "error: build runner: " << st.error().message << "\n";
      return 1;
    }
  }
  const std::string status = std::string("STATUS=Serving ") + scheme + "://" + *bound;
  notifier.notify("READY=1\n" + status);

  // The watchdog is fed only while the network loop answers: a stuck loop gets restarted.
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::thread watchdog;
  if (const auto interval = Notifier::watchdog_interval(); interval && notifier.enabled()) {
    watchdog = std::thread([&, interval = *interval] {
      auto beat = std::make_shared<std::atomic<bool>>(true);
      std::unique_lock lock(mu);
      while (!cv.wait_for(lock, interval, [&] { return done; })) {
        if (beat->exchange(false)) notifier.notify("WATCHDOG=1");
        server.post([beat] { beat->store(true); });
      }
    });
  }

  std::thread signal_thread([&] {
    while (true) {
      int sig = 0;
      sigwait(&signals, &sig);
      if (sig == SIGHUP) {
        notifier.notify("RELOADING=1\nSTATUS=Reloading configuration");
        std::string outcome = "reloaded";
        if (reload) {
          auto fresh = reload();
          if (!fresh) {
            outcome = "reload failed, keeping the running configuration: " + fresh.error().message;
          } else {
            ingestor.set_max_file_size(fresh->max_upload_size);
            if (!settings.tls_cert.empty()) {
              if (auto st = server.reload_tls(); !st) outcome += "; TLS: " + st.error().message;
            }
            if (fresh->listen != settings.listen || fresh->data_dir != settings.data_dir) {
              outcome += " (listen and data_dir changes need a restart)";
            }
          }
        }
        std::promise<Status> reloaded;
        server.reload_catalog([&reloaded](Status st) { reloaded.set_value(std::move(st)); });
        if (auto st = reloaded.get_future().get(); !st)
          outcome += "; catalog: " + st.error().message;
        spdlog::info("SIGHUP: {}", outcome);
        notifier.notify("READY=1\n" + status);
        continue;
      }
      spdlog::info("received {}, shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
      notifier.notify("STOPPING=1\nSTATUS=Stopping: finishing in-flight requests");
      server.stop();
      return;
    }
  });
  server.run();
  // Running builds are killed and left interrupted: the next start requeues them.
  if (runner) runner->stop();
  {
    std::lock_guard lock(mu);
    done = true;
  }
  cv.notify_all();
  if (watchdog.joinable()) watchdog.join();
  // Wake the signal thread if the loop ended for another reason than a signal.
  pthread_kill(signal_thread.native_handle(), SIGTERM);
  signal_thread.join();
  spdlog::info("stopped");
  spdlog::shutdown();
  return 0;
}

int ingest(const Settings& settings, const std::vector<std::filesystem::path>& paths) {
  auto dir = open_data_dir(settings);
  if (!dir) return report(dir.error(), 1);
  ingest::Limits limits;
  limits.max_file_size = settings.max_upload_size;
  ingest::Ingestor ingestor(*dir->store, *dir->catalog, limits);

  std::vector<std::filesystem::path> files;
  int rejected = 0;
  for (const auto& p : paths) {
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) {
      std::vector<std::filesystem::path> found;
      for (auto it = std::filesystem::recursive_directory_iterator(p, ec);
           !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
        if (it->is_regular_file() && is_distribution(it->path())) found.push_back(it->path());
      }
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else if (std::filesystem::exists(p, ec)) {
      files.push_back(p);
    } else {
      std::cerr << "rejected " << p.string() << ": no such file or directory\n";
      ++rejected;
    }
  }
  int stored = 0;
  int identical = 0;
  for (const auto& f : files) {
    auto result = ingestor.ingest_path(f);
    if (!result) {
      std::cerr << "rejected " << f.string() << ": " << result.error().message << "\n";
      ++rejected;
    } else if (result->outcome == ingest::Outcome::stored) {
      std::cout << "added " << f.string() << "\n";
      ++stored;
    } else {
      std::cout << "skipped " << f.string() << " (identical file already stored)\n";
      ++identical;
    }
  }
  std::cout << stored << " added, " << identical << " skipped, " << rejected << " rejected\n";
  return rejected == 0 ? 0 : 1;
}

int token_list(const Settings& settings) {
  auto dir = open_data_dir(settings);
  if (!dir) return report(dir.error(), 1);
  auto contents = dir->catalog->load();
  if (!contents) return report(contents.error(), 1);
  std::printf("%-6s %-7s %-24s %-28s %s\n", "ID", "SCOPE", "PROJECT", "CREATED",
              "STATE / DESCRIPTION");
  for (const auto& t : contents->tokens) {
    std::printf("%-6lld %-7s %-24s %-28s %s%s\n", static_cast<long long>(t.id),
                std::string(catalog::scope_name(t.scope)).c_str(), t.project.value_or("*").c_str(),
                iso8601_micros(t.created_at).c_str(), t.revoked ? "revoked " : "active ",
                t.description.c_str());
  }
  return 0;
}

int token_revoke(const Settings& settings, std::int64_t id) {
  auto dir = open_data_dir(settings);
  if (!dir) return report(dir.error(), 1);
  auto revoked = dir->catalog->revoke_token(id);
  if (!revoked) return report(revoked.error(), 1);
  std::cout << "revoked token #" << id << " (" << catalog::scope_name(revoked->scope) << ")\n";
  return 0;
}

int token_create(const Settings& settings, const std::string& scope,
                 const std::optional<std::string>& project, const std::string& description) {
  const auto parsed = catalog::parse_scope(scope);
  if (!parsed) {
    std::cerr << "error: --scope must be read, upload or admin\n";
    return 2;
  }
  auto dir = open_data_dir(settings);
  if (!dir) return report(dir.error(), 1);
  const std::string token = auth::generate_token();
  catalog::TokenRecord record;
  record.hash = auth::hash_token(token);
  record.scope = *parsed;
  if (project && !core::is_valid_project_name(*project)) {
    std::cerr << "error: --project: '" << *project << "' is not a valid project name\n";
    return 2;
  }
  record.project =
      project ? std::optional<std::string>(core::normalize_name(*project)) : std::nullopt;
  record.description = description;
  record.created_at = now_micros();
  auto stored = dir->catalog->insert_token(record);
  if (!stored) return report(stored.error(), 1);
  std::cerr << "created " << scope << " token #" << stored->id
            << (project ? " for project " + *project : std::string()) << "\n";
  std::cout << token << std::endl;
  return 0;
}

int project_list(const Settings& settings) {
  auto dir = open_data_dir(settings);
  if (!dir) return report(dir.error(), 1);
  auto contents = dir->catalog->load();
  if (!contents) return report(contents.error(), 1);
  std::map<std::string, std::size_t, std::less<>> files;
  for (const auto& f : contents->files) ++files[f.project];
  std::printf("%-40s %7s %-12s %s\n", "PROJECT", "FILES", "CLAIM", "LAST UPLOAD");
  for (const auto& p : contents->projects) {
    const auto it = files.find(p.name);
    std::printf("%-40s %7zu %-12s %s\n", p.name.c_str(), it == files.end() ? 0 : it->second,
                core::claim_text(p.claim).c_str(), iso8601_micros(p.last_upload).c_str());
  }
  return 0;
}

int project_claim(const Settings& settings, const std::string& project,
                  const core::ProjectClaim& claim) {
  if (!core::is_valid_project_name(project)) {
    std::cerr << "error: '" << project << "' is not a valid project name\n";
    return 2;
  }
  auto dir = open_data_dir(settings);
  if (!dir) return report(dir.error(), 1);
  auto updated = dir->catalog->set_claim(core::normalize_name(project), claim);
  if (!updated) return report(updated.error(), 1);
  std::cout << updated->name << ": " << core::claim_text(updated->claim) << "\n";
  return 0;
}

int yank(const Settings& settings, const std::string& project,
         const std::optional<std::string>& version, const std::optional<std::string>& filename,
         const std::optional<std::string>& reason) {
  if (version.has_value() == filename.has_value()) {
    std::cerr << "error: give a VERSION or --file FILENAME (not both)\n";
    return 2;
  }
  auto dir = open_data_dir(settings);
  if (!dir) return report(dir.error(), 1);
  auto changed = dir->catalog->set_yanked(core::normalize_name(project), version, filename, reason);
  if (!changed) return report(changed.error(), 1);
  for (const auto& name : *changed) std::cout << (reason ? "yanked " : "unyanked ") << name << "\n";
  return 0;
}

int build(const Settings& settings, const core::BuildRequest& request,
          const std::string& server_url) {
  auto config = load_build_config(settings.config_file);
  if (!config) return report(config.error(), 2);
  if (config->recipes.empty()) {
    std::cerr << "error: no [recipes] in the configuration (give --config FILE)\n";
    return 2;
  }
  auto dir = open_data_dir(settings);
  if (!dir) return report(dir.error(), 1);
  auto jobs = catalog::open_sqlite_job_store(settings.data_dir / "wheelforge.db");
  if (!jobs) return report(jobs.error(), 1);
  ingest::Limits limits;
  limits.max_file_size = settings.max_upload_size;
  ingest::Ingestor ingestor(*dir->store, *dir->catalog, limits);
  build::Runner runner(std::move(*config), **jobs, *dir->catalog, *dir->store, ingestor,
                       settings.data_dir);
  runner.set_server_url(server_url);
  auto created = runner.submit(request);
  if (!created) return report(created.error(), 2);
  const auto& [b, queued] = *created;
  std::cout << "build " << b.id << ": " << b.recipe << " " << b.version << ", " << queued.size()
            << " job(s)"
            << (queued.empty() ? " (every cell is built already; --force rebuilds)" : "")
            << std::endl;
  if (queued.empty()) return 0;
  // A one-off runner beside a possibly serving one: it runs its own jobs and takes over none.
  runner.restrict_to_build(b.id);
  if (auto st = runner.start(build::Runner::Recovery::leave); !st) {
    std::cerr << "error: " << st.error().message << "\n";
    return 1;
  }
  std::map<std::int64_t, core::JobState> seen;
  while (true) {
    auto list = (*jobs)->jobs_of_build(b.id);
    if (!list) break;
    bool all_done = true;
    for (const auto& j : *list) {
      if (seen[j.id] != j.state || !seen.contains(j.id)) {
        seen[j.id] = j.state;
        std::cout << "job " << j.id << " " << j.cell.key() << ": " << core::state_name(j.state)
                  << (j.reason.empty() ? "" : " (" + j.reason + ")")
                  << (j.wheel.empty() ? "" : " -> " + j.wheel) << std::endl;
      }
      all_done = all_done && core::is_terminal(j.state);
    }
    if (all_done) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  runner.stop();
  auto final_jobs = (*jobs)->jobs_of_build(b.id);
  int failed = 0;
  if (final_jobs) {
    for (const auto& j : *final_jobs) failed += j.state == core::JobState::succeeded ? 0 : 1;
  }
  std::cout << (final_jobs ? final_jobs->size() : 0U) - static_cast<std::size_t>(failed)
            << " succeeded, " << failed << " failed" << std::endl;
  return failed == 0 ? 0 : 1;
}

int delete_file(const Settings& settings, const std::string& filename) {
  auto dir = open_data_dir(settings);
  if (!dir) return report(dir.error(), 1);
  auto deleted = dir->catalog->delete_file(filename);
  if (!deleted) return report(deleted.error(), 1);
  std::cout << "deleted " << deleted->filename << " (the name stays reserved)\n";
  return 0;
}

}  // namespace wf::app
