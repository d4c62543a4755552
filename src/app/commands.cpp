#include <malloc.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <future>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

#include "build_progress.hpp"
#include "wheelforge/app/app.hpp"
#include "wheelforge/app/log_output.hpp"
#include "wheelforge/app/systemd.hpp"
#include "wheelforge/auth/tokens.hpp"
#include "wheelforge/build/executor.hpp"
#include "wheelforge/catalog/catalog.hpp"
#include "wheelforge/catalog/jobs.hpp"
#include "wheelforge/core/name.hpp"
#include "wheelforge/http/server.hpp"
#include "wheelforge/ingest/ingestor.hpp"
#include "wheelforge/store/blob_store.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/log.hpp"
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

/// What the ingest path accepts: the upload size limit and the archive policy.
ingest::Limits ingest_limits(const Settings& settings) {
  ingest::Limits limits;
  limits.max_file_size = settings.max_upload_size;
  limits.max_inflated_size = settings.max_inflated_size;
  limits.max_compression_ratio = settings.max_compression_ratio;
  limits.max_archive_members = settings.max_archive_members;
  return limits;
}

}  // namespace

namespace {

/// True when stderr is connected to the journal ($JOURNAL_STREAM names its device:inode).
bool stderr_is_journal() {
  const char* stream = std::getenv("JOURNAL_STREAM");
  if (stream == nullptr) return false;
  struct stat st {};
  if (::fstat(STDERR_FILENO, &st) != 0) return false;
  return std::string(stream) == std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
}

std::weak_ptr<LogOutput> g_log_output;

/// Makes sure lines logged so far are on stderr before the process tells the outside world
/// something (the "listening on" line, its end).
void flush_logs() {
  if (auto output = g_log_output.lock()) output->flush();
}

/// True when two [build] tables say the same.
bool same_host(const build::HostConfig& a, const build::HostConfig& b) {
  return a.executor == b.executor && a.cuda_homes == b.cuda_homes && a.pythons == b.pythons &&
         a.torch_index == b.torch_index && a.system_torch == b.system_torch &&
         a.memory_reserve_bytes == b.memory_reserve_bytes &&
         a.max_concurrent_jobs == b.max_concurrent_jobs &&
         a.keep_failed_work_dirs == b.keep_failed_work_dirs && a.oom_retries == b.oom_retries;
}

/// What keeps `fresh` recipes from applying to a runner started with `running`: a matrix
/// value whose interpreter or toolkit only the new [build] has ([build] is read once, at
/// start: the admission budget is set up from it).
std::vector<std::string> recipes_needing_restart(const build::RunnerConfig& running,
                                                 const build::RunnerConfig& fresh) {
  std::vector<std::string> problems;
  for (const auto& [name, rc] : fresh.recipes) {
    for (const auto& python : rc.matrix.python) {
      if (!running.host.pythons.contains(python)) {
        problems.push_back("recipes." + name + ".matrix.python: " + python +
                           " has no interpreter in the running [build.python] ([build] "
                           "changes need a restart)");
      }
    }
    for (const auto& cuda : rc.matrix.cuda) {
      if (!running.host.cuda_homes.contains(cuda.str())) {
        problems.push_back("recipes." + name + ".matrix.cuda: " + cuda.str() +
                           " has no toolkit in the running [build.cuda] ([build] changes need "
                           "a restart)");
      }
    }
  }
  return problems;
}

}  // namespace

void init_logging() {
  // The log's lines, formatted and written by a LogOutput on stderr (its own format). Warnings
  // and errors wake its writer at once; flush_logs() waits for it.
  auto output = std::make_shared<LogOutput>(
      STDERR_FILENO, stderr_is_journal() ? LogOutput::Style::journal : LogOutput::Style::text);
  g_log_output = output;
  log::set_output([output](LogLevel level, std::chrono::system_clock::time_point time,
                           std::string_view line) { output->line(level, time, line); });
}

int serve(const Configuration& configuration, const std::function<ConfigCheck()>& reload) {
  const Settings& settings = configuration.settings;
  // A fixed mmap threshold: every allocation above 128 KiB is its own mapping, given back to
  // the system when freed. glibc otherwise raises the threshold to the largest block freed
  // so far (the catalog's rows at start, up to 32 MiB), and from then on serves large
  // short-lived buffers (log lines gathered while the log output lags, pages rebuilt after
  // an upload) from the threads' heaps, which keep the memory: RSS then creeps up under load.
  (void)::mallopt(M_MMAP_THRESHOLD, 128 * 1024);

  auto listen = parse_listen(settings.listen);
  if (!listen) return report(listen.error(), 2);
  auto dir = open_data_dir(settings);
  if (!dir) return report(dir.error(), 1);
  ingest::Ingestor ingestor(*dir->store, *dir->catalog, ingest_limits(settings));
  const Notifier notifier = Notifier::from_environment();

  // The build runner runs when recipes are configured. What the host lacks (interpreters,
  // CUDA toolkits) fails those cells' jobs, not the server.
  std::unique_ptr<catalog::JobStore> job_store;
  const std::unique_ptr<build::Executor> executor =
      build::make_executor(configuration.build.host.executor);
  std::unique_ptr<build::Runner> runner;
  std::function<void()> on_ingested;  // set once the server exists
  if (!configuration.build.recipes.empty()) {
    for (const auto& p : build_host_problems(configuration.build.host)) {
      log::warn("build runner: {}", p);
    }
    auto jobs = catalog::open_sqlite_job_store(settings.data_dir / "wheelforge.db");
    if (!jobs) return report(jobs.error(), 1);
    job_store = std::move(*jobs);
    runner =
        std::make_unique<build::Runner>(configuration.build, *executor, *job_store, *dir->catalog,
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
  // A client that goes away while a file body streams makes sendfile(2) fail with EPIPE, and
  // sendfile has no MSG_NOSIGNAL: without this, that SIGPIPE would end the process. (Build
  // steps get every signal back to its default when they start.)
  std::signal(SIGPIPE, SIG_IGN);

  http::ServerConfig config;
  config.host = listen->first;
  config.port = listen->second;
  config.worker_threads = settings.worker_threads;
  config.network_threads = settings.network_threads;
  config.read_timeout = settings.read_timeout;
  config.min_upload_rate = settings.min_upload_rate;
  config.idle_timeout = settings.idle_timeout;
  config.max_connections = settings.max_connections;
  config.max_connections_per_client = settings.max_connections_per_client;
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
  log::info("serving {} from {}{}", *bound, settings.data_dir.string(),
            config.listen_fd >= 0 ? " (socket activation)" : "");
  const char* scheme = settings.tls_cert.empty() ? "http" : "https";
  flush_logs();
  std::printf("listening on %s://%s\n", scheme, bound->c_str());
  std::fflush(stdout);
  if (runner) {
    runner->set_server_url(settings.base_url.empty() ? std::string(scheme) + "://" + *bound
                                                     : settings.base_url);
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
          const auto fresh = reload();
          // A configuration is applied as a whole or not at all: the file's own problems, and
          // recipes that need what only a restart would bring, keep the running one.
          std::vector<std::string> problems = fresh.problems;
          if (fresh.config && runner) {
            for (auto& p : recipes_needing_restart(runner->config(), fresh.config->build)) {
              problems.push_back(std::move(p));
            }
          }
          if (!problems.empty()) {
            // Each problem on its own line, then the outcome.
            for (const auto& p : problems) log::warn("SIGHUP: {}", p);
            outcome = "reload failed, keeping the running configuration: " +
                      std::to_string(problems.size()) + " problem(s)" +
                      (settings.config_file ? " in " + settings.config_file->string() : "");
          } else {
            const Settings& now = fresh.config->settings;
            const build::RunnerConfig& build = fresh.config->build;
            ingestor.set_limits(ingest_limits(now));
            if (!settings.tls_cert.empty()) {
              if (auto st = server.reload_tls(); !st) outcome += "; TLS: " + st.error().message;
            }
            if (now.listen != settings.listen || now.data_dir != settings.data_dir) {
              outcome += " (listen and data_dir changes need a restart)";
            }
            if (runner) {
              for (const auto& p : fresh.host_problems) log::warn("SIGHUP: build runner: {}", p);
              runner->set_recipes(build.recipes);
              runner->set_server_url(now.base_url.empty() ? std::string(scheme) + "://" + *bound
                                                          : now.base_url);
              outcome += "; build runner: " + std::to_string(build.recipes.size()) + " recipe(s)";
              if (!same_host(configuration.build.host, build.host)) {
                outcome += " ([build] changes need a restart)";
              }
            } else if (!build.recipes.empty()) {
              outcome += " (the build runner was off at start: [recipes] need a restart)";
            }
          }
        }
        std::promise<Status> reloaded;
        server.reload_catalog([&reloaded](Status st) { reloaded.set_value(std::move(st)); });
        if (auto st = reloaded.get_future().get(); !st)
          outcome += "; catalog: " + st.error().message;
        log::info("SIGHUP: {}", outcome);
        notifier.notify("READY=1\n" + status);
        continue;
      }
      log::info("received {}, shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
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
  // It blocks SIGTERM and takes it with sigwait(), so this wakes it rather than ends it.
  // NOLINTNEXTLINE(bugprone-bad-signal-to-kill-thread)
  pthread_kill(signal_thread.native_handle(), SIGTERM);
  signal_thread.join();
  log::info("stopped");
  log::shutdown();
  return 0;
}

int ingest(const Settings& settings, const std::vector<std::filesystem::path>& paths) {
  auto dir = open_data_dir(settings);
  if (!dir) return report(dir.error(), 1);
  ingest::Ingestor ingestor(*dir->store, *dir->catalog, ingest_limits(settings));

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
  int restored = 0;
  // Batches share their syncs and their catalog transaction (see Ingestor::ingest_paths);
  // bounded in files (open temp files) and bytes (data written but not yet flushed).
  constexpr std::size_t kBatchFiles = 128;
  constexpr std::uintmax_t kBatchBytes = 512ULL << 20U;
  std::vector<std::filesystem::path> batch;
  std::uintmax_t batch_bytes = 0;
  const auto run_batch = [&] {
    const auto results = ingestor.ingest_paths(batch);
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const auto& f = batch[i];
      const auto& result = results[i];
      if (!result) {
        std::cerr << "rejected " << f.string() << ": " << result.error().message << "\n";
        ++rejected;
      } else if (result->outcome == ingest::Outcome::stored) {
        std::cout << "added " << f.string() << "\n";
        ++stored;
      } else if (result->outcome == ingest::Outcome::restored) {
        std::cout << "restored " << f.string() << " (it was damaged; served again)\n";
        ++restored;
      } else {
        std::cout << "skipped " << f.string() << " (identical file already stored)\n";
        ++identical;
      }
    }
    std::cout.flush();
    batch.clear();
    batch_bytes = 0;
  };
  for (const auto& f : files) {
    std::error_code ec;
    std::uintmax_t size = std::filesystem::file_size(f, ec);
    if (ec) size = 0;  // the ingest reports why the file cannot be read
    if (!batch.empty() && (batch.size() == kBatchFiles || batch_bytes + size > kBatchBytes)) {
      run_batch();
    }
    batch.push_back(f);
    batch_bytes += size;
  }
  if (!batch.empty()) run_batch();
  std::cout << stored << " added, " << identical << " skipped, " << rejected << " rejected";
  if (restored > 0) std::cout << ", " << restored << " restored";
  std::cout << "\n";
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

namespace {

/// Connects to the host and port of `url` (http:// or https://), within `timeout`: whether
/// anything listens there. Fails with unavailable and the reason (refused, unreachable, cannot
/// resolve). Blocks up to `timeout` per address.
Status check_reachable(const std::string& url, std::chrono::milliseconds timeout) {
  std::string_view rest = url;
  std::string port = "80";
  if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
  } else if (rest.starts_with("https://")) {
    rest.remove_prefix(8);
    port = "443";
  } else {
    return make_error(Errc::invalid, "'" + sanitize_for_log(url) + "' is not an http:// URL");
  }
  std::string_view authority = rest.substr(0, rest.find('/'));
  if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
    authority.remove_prefix(at + 1);
  }
  std::string host;
  if (authority.starts_with('[')) {
    const auto close = authority.find(']');
    host = std::string(authority.substr(1, close == std::string_view::npos ? 0 : close - 1));
    if (close != std::string_view::npos && close + 1 < authority.size() &&
        authority[close + 1] == ':') {
      port = std::string(authority.substr(close + 2));
    }
  } else if (const auto colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = std::string(authority.substr(0, colon));
    port = std::string(authority.substr(colon + 1));
  } else {
    host = std::string(authority);
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return make_error(Errc::unavailable,
                      "cannot resolve '" + sanitize_for_log(host) + "': " + ::gai_strerror(rc));
  }
  std::string why = "no address";
  for (const addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    int err = ::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, static_cast<int>(timeout.count())) == 1) {
        socklen_t len = sizeof(err);
        if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      } else {
        err = ETIMEDOUT;
      }
    }
    ::close(fd);
    if (err == 0) {
      ::freeaddrinfo(found);
      return ok_status();
    }
    why = std::strerror(err);
  }
  ::freeaddrinfo(found);
  return make_error(Errc::unavailable, host + ":" + port + ": " + why);
}

std::string signal_name(int sig) {
  switch (sig) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "signal " + std::to_string(sig);
  }
}

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  for (std::size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) {
    s.replace(pos, from.size(), to);
  }
  return s;
}

}  // namespace

int build(const Configuration& configuration, const core::BuildRequest& request,
          const std::optional<std::string>& server_url_flag) {
  // SIGINT, SIGTERM and SIGHUP (a closed terminal) cancel the build. Blocked before any thread
  // starts, so that every thread inherits the mask and only the loop below takes them (with
  // sigtimedwait); build steps start with every signal back at its default.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stop_signals, sig);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  // Output to a pipe whose reader left fails quietly instead of ending the command while its
  // builds run on.
  std::signal(SIGPIPE, SIG_IGN);
  init_logging();
  // Progress is the command's own output; the log adds only errors (a warning line on stderr
  // would also break the terminal's status line).
  log::set_level(log::Level::error);

  const Settings& settings = configuration.settings;
  const build::RunnerConfig& build_config = configuration.build;
  if (build_config.recipes.empty()) {
    std::cerr << "error: no [recipes] in the configuration"
              << (settings.config_file ? " " + settings.config_file->string()
                                       : std::string(" (give --config FILE)"))
              << "\n";
    return 2;
  }
  std::string url;
  if (server_url_flag) {
    url = std::string(trim(*server_url_flag));
    while (url.ends_with('/')) url.pop_back();
  } else {
    auto derived = server_url(settings);
    if (!derived) {
      std::cerr << "error: where is the server? " << derived.error().message
                << " (or pass --server-url)\n";
      return 2;
    }
    url = *derived;
  }
  const std::string& torch_index = build_config.host.torch_index;
  const bool torch_from_server =
      !build_config.host.system_torch && torch_index.find("{server}") != std::string::npos;
  if (torch_from_server) {
    if (auto st = check_reachable(url, std::chrono::seconds(3)); !st) {
      std::cerr << "error: torch is installed from " << replace_all(torch_index, "{server}", url)
                << " (build.torch_index), but no server answers at " << url << ": "
                << st.error().message
                << ". Start `wheelforge serve` with this configuration, or point listen or "
                   "base_url (or --server-url) at the server of this data directory.\n";
      return 2;
    }
  }
  for (const auto& p : build_host_problems(build_config.host)) {
    std::cerr << "warning: " << p << "\n";
  }

  auto dir = open_data_dir(settings);
  if (!dir) return report(dir.error(), 1);
  auto jobs = catalog::open_sqlite_job_store(settings.data_dir / "wheelforge.db");
  if (!jobs) return report(jobs.error(), 1);
  ingest::Ingestor ingestor(*dir->store, *dir->catalog, ingest_limits(settings));
  const auto executor = build::make_executor(build_config.host.executor);
  build::Runner runner(build_config, *executor, **jobs, *dir->catalog, *dir->store, ingestor,
                       settings.data_dir);
  runner.set_server_url(url);
  // A one-off runner beside a possibly serving one: its build is reserved for it as it is
  // recorded, and it runs its own jobs and takes over none.
  auto created = runner.submit_own(request);
  if (!created && created.error().code == Errc::conflict) {
    // Nothing to do is not a failure: the wheels are there.
    std::cout << request.recipe << " " << request.version << ": "
              << replace_all(created.error().message, "use force", "use --force") << std::endl;
    return 0;
  }
  if (!created) return report(created.error(), 2);
  const auto& [b, queued] = *created;

  const char* term = std::getenv("TERM");
  const bool terminal =
      ::isatty(STDOUT_FILENO) == 1 && (term == nullptr || std::string_view(term) != "dumb");
  const char* no_color = std::getenv("NO_COLOR");  // docs/formats.md, "Terminals"
  BuildProgress::Options options;
  options.terminal = terminal;
  options.color = terminal && (no_color == nullptr || *no_color == '\0');
  options.width = [] {
    winsize ws{};
    return ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 ? static_cast<unsigned>(ws.ws_col) : 0U;
  };
  BuildProgress progress(
      [](std::string_view text) { (void)std::fwrite(text.data(), 1, text.size(), stdout); },
      options);
  progress.start(
      b, queued, [&runner](std::int64_t id) { return runner.log_path(id); },
      build_config.host.system_torch ? "the interpreters' own installations"
                                     : replace_all(torch_index, "{server}", url));
  std::fflush(stdout);

  if (auto st = runner.start(build::Runner::Recovery::leave); !st) {
    std::cerr << "error: " << st.error().message << "\n";
    return 1;
  }

  // Logs are read the way the server reads them, through the runner's executor.
  constexpr std::size_t kLogChunk = 256 * 1024;
  std::map<std::int64_t, std::uint64_t> offsets;
  std::vector<catalog::JobRecord> current = queued;
  int stop_signal = 0;
  const auto began = std::chrono::steady_clock::now();
  const auto elapsed = [&began] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 began);
  };
  bool store_error_shown = false;
  while (true) {
    // States first, then the logs: a job's last log lines are written before its final state,
    // so once a final state is seen, reading the log to its end gets all of it.
    if (auto list = (*jobs)->jobs_of_build(b.id)) {
      current = std::move(*list);
    } else if (!store_error_shown) {
      progress.message("warning: reading the jobs: " + list.error().message);
      store_error_shown = true;
    }
    progress.running_states(current);
    bool more = false;
    for (const auto& j : current) {
      auto& offset = offsets[j.id];
      const std::string bytes = runner.read_log(j.id, offset, kLogChunk);
      offset += bytes.size();
      more = more || bytes.size() == kLogChunk;
      progress.log(j.id, bytes);
    }
    if (!more) progress.finished_states(current, now_micros());
    const bool all_done = std::all_of(current.begin(), current.end(),
                                      [](const auto& j) { return core::is_terminal(j.state); });
    if (all_done && !more) break;
    progress.tick(elapsed(), now_micros());
    std::fflush(stdout);

    // The next round, or a signal.
    timespec wait{0, more ? 0L : 250'000'000L};
    siginfo_t info{};
    const int sig = ::sigtimedwait(&stop_signals, &info, &wait);
    if (sig <= 0) continue;
    if (stop_signal == 0) {
      stop_signal = sig;
      progress.message(signal_name(sig) +
                       ": cancelling the build's jobs (their process trees are killed)");
      for (const auto& j : current) {
        if (!core::is_terminal(j.state)) (void)runner.cancel(j.id);
      }
    } else {
      progress.message(signal_name(sig) +
                       ": still cancelling; waiting for the jobs' processes to end");
    }
  }
  runner.stop();
  if (auto list = (*jobs)->jobs_of_build(b.id)) current = std::move(*list);
  const int unsuccessful = progress.summary(current, elapsed(), now_micros());
  std::fflush(stdout);
  if (stop_signal != 0) {
    flush_logs();
    std::cerr << "error: " << signal_name(stop_signal) << ": build " << b.id << " was cancelled\n";
    return 128 + stop_signal;
  }
  return unsuccessful == 0 ? 0 : 1;
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
