#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <future>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

#include "command_support.hpp"
#include "wheelforge/app/app.hpp"
#include "wheelforge/app/log_output.hpp"
#include "wheelforge/app/systemd.hpp"
#include "wheelforge/build/executor.hpp"
#include "wheelforge/catalog/catalog.hpp"
#include "wheelforge/catalog/change_feed.hpp"
#include "wheelforge/catalog/jobs.hpp"
#include "wheelforge/catalog/shared_pages.hpp"
#include "wheelforge/http/fetcher.hpp"
#include "wheelforge/http/server.hpp"
#include "wheelforge/ingest/ingestor.hpp"
#include "wheelforge/store/blob_store.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/log.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::app {
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

/// True when two [build] tables say the same.
bool same_host(const build::HostConfig& a, const build::HostConfig& b) {
  return a.executor == b.executor && a.cuda_homes == b.cuda_homes && a.pythons == b.pythons &&
         a.torch_index == b.torch_index && a.system_torch == b.system_torch &&
         a.memory_reserve_bytes == b.memory_reserve_bytes &&
         a.max_concurrent_jobs == b.max_concurrent_jobs &&
         a.keep_failed_work_dirs == b.keep_failed_work_dirs && a.oom_retries == b.oom_retries &&
         a.pip_cache_bytes == b.pip_cache_bytes && a.compile_cache == b.compile_cache &&
         a.compile_cache_root == b.compile_cache_root &&
         a.compile_cache_bytes == b.compile_cache_bytes && a.lease == b.lease &&
         a.run_jobs == b.run_jobs;
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

void detail::flush_logs() {
  if (auto output = g_log_output.lock()) output->flush();
}

using detail::flush_logs;
using detail::ingest_limits;
using detail::open_data_dir;
using detail::report;

int runner(const Configuration& configuration) {
  const Settings& settings = configuration.settings;
  if (configuration.build.recipes.empty()) {
    std::cerr << "error: no [recipes.NAME] in the configuration"
              << (settings.config_file ? " " + settings.config_file->string()
                                       : std::string(" (give --config FILE)"))
              << ": a runner has nothing to build\n";
    return 2;
  }
  for (const auto& p : build_host_problems(configuration.build.host)) {
    log::warn("build runner: {}", p);
  }
  // The servers' URL, for torch_index's {server}: base_url, else what listen names.
  std::string url = settings.base_url;
  if (url.empty()) {
    if (auto derived = server_url(settings)) url = *derived;
  }
  while (url.ends_with('/')) url.pop_back();
  auto dir = open_data_dir(settings);
  if (!dir) return report(dir.error(), 1);
  auto jobs = catalog::open_job_store(settings.catalog, settings.data_dir);
  if (!jobs) return report(jobs.error(), 1);
  ingest::Ingestor ingestor(*dir->store, *dir->catalog, ingest_limits(settings));
  const auto executor = build::make_executor(configuration.build.host.executor);
  build::Runner runner(configuration.build, *executor, **jobs, *dir->catalog, *dir->store, ingestor,
                       settings.data_dir);
  runner.set_server_url(url);
  auto signer = detail::open_build_signer(configuration, url);
  if (!signer) return report(signer.error(), 1);
  runner.set_signer(std::move(*signer));

  sigset_t signals;
  sigemptyset(&signals);
  for (const int sig : {SIGTERM, SIGINT, SIGUSR2}) sigaddset(&signals, sig);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  if (auto st = runner.start(); !st) {
    std::cerr << "error: build runner: " << st.error().message << "\n";
    return 1;
  }
  log::info("runner {}: running jobs from {} (torch_index's {{server}}: {})", runner.id(),
            catalog::describe_catalog_location(settings.catalog), url.empty() ? "unset" : url);
  flush_logs();
  std::printf("runner %s\n", runner.id().c_str());
  std::fflush(stdout);
  const Notifier notifier = Notifier::from_environment();
  notifier.notify("READY=1\nSTATUS=Running jobs as " + runner.id());
  std::thread drain_thread;
  while (true) {
    int sig = 0;
    sigwait(&signals, &sig);
    if (sig == SIGUSR2) {
      // A drain: no job starts; the running ones finish, then the runner ends.
      log::info("received SIGUSR2, draining: stopping once {} running job(s) have finished",
                runner.running_jobs());
      notifier.notify("STATUS=Draining");
      if (!drain_thread.joinable()) {
        drain_thread = std::thread([&runner] {
          if (runner.drain()) ::kill(::getpid(), SIGTERM);
        });
      }
      continue;
    }
    log::info("received {}, stopping the runner", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    break;
  }
  notifier.notify("STOPPING=1");
  runner.stop();  // ends a drain that still waits
  if (drain_thread.joinable()) drain_thread.join();
  flush_logs();
  return 0;
}

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
  // The stores' latency and errors (/metrics), counted from the first call.
  const auto store_metrics = std::make_shared<handlers::StoreMetrics>();
  auto dir = open_data_dir(settings, {store_metrics, store_metrics});
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
    auto jobs = catalog::open_job_store(settings.catalog, settings.data_dir);
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
  sigaddset(&signals, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // A client that goes away while a file body streams makes sendfile(2) fail with EPIPE, and
  // sendfile has no MSG_NOSIGNAL: without this, that SIGPIPE would end the process. (Build
  // steps get every signal back to its default when they start.)
  std::signal(SIGPIPE, SIG_IGN);

  // Upstream indexes: one outbound client for all of them, their pages cached in memory and
  // under DATA_DIR/upstream/pages (docs/upstreams.md).
  std::unique_ptr<handlers::Fetcher> fetcher;
  std::unique_ptr<handlers::Upstreams> upstreams;
  if (!configuration.upstreams.empty()) {
    auto made = http::make_fetcher(http::FetcherConfig{});
    if (!made) return report(made.error(), 1);
    fetcher = std::move(*made);
    upstreams = std::make_unique<handlers::Upstreams>(configuration.upstreams, *fetcher,
                                                      settings.data_dir / "upstream" / "pages",
                                                      settings.upstream_page_cache);
    upstreams->set_file_cache_limit(settings.upstream_file_cache);
    upstreams->set_page_disk_limit(settings.upstream_page_disk_cache);
    // On a shared catalog the servers share their upstream pages (docs/scale.md).
    upstreams->share_pages(catalog::open_shared_pages(settings.catalog));
    for (const auto& u : configuration.upstreams) {
      log::info("upstream {}: {}", u.name, u.url);
    }
  }

  // Trusted publishing: the issuers' keys are fetched through the same outbound client.
  std::unique_ptr<handlers::OidcIssuers> oidc;
  if (!configuration.oidc_issuers.empty()) {
    if (!fetcher) {
      auto made = http::make_fetcher(http::FetcherConfig{});
      if (!made) return report(made.error(), 1);
      fetcher = std::move(*made);
    }
    oidc = std::make_unique<handlers::OidcIssuers>(configuration.oidc_issuers, *fetcher);
    for (const auto& i : configuration.oidc_issuers) {
      log::info("oidc issuer {}: {} (audience {})", i.name, i.url, i.audience);
    }
  }

  // The build runner's provenance is signed by the configured key, else by this data
  // directory's own (made on first use), when this server runs jobs or a key is configured.
  std::shared_ptr<const auth::BuildSigner> signer;
  const bool runs_jobs =
      runner && configuration.build.host.run_jobs != build::HostConfig::RunJobs::no;
  if (runs_jobs || configuration.build_signer) {
    std::string url = settings.base_url;
    if (url.empty()) {
      if (auto derived = server_url(settings)) url = *derived;
    }
    auto opened = detail::open_build_signer(configuration, url);
    if (!opened) return report(opened.error(), 1);
    signer = std::move(*opened);
    if (runner) runner->set_signer(signer);
    log::info("build provenance: signed by {} (served at /_/build-provenance.pem)",
              signer->certificate().describe());
  }

  http::ServerConfig config;
  if (signer) config.build_certificate = signer->certificate().pem();
  config.upstreams = upstreams.get();
  config.oidc = oidc.get();
  config.attestation_roots = configuration.attestation_roots.get();
  if (configuration.attestation_roots) {
    log::info("attestations: verified against {} certificate(s) of {}",
              configuration.attestation_roots->size(),
              configuration.attestation_trust_roots.string());
  }
  config.host = listen->first;
  config.port = listen->second;
  config.worker_threads = settings.worker_threads;
  config.network_threads = settings.network_threads;
  config.read_timeout = settings.read_timeout;
  config.first_byte_timeout = settings.first_byte_timeout;
  config.min_upload_rate = settings.min_upload_rate;
  config.idle_timeout = settings.idle_timeout;
  config.max_connections = settings.max_connections;
  config.max_connections_per_client = settings.max_connections_per_client;
  config.trusted_proxies = settings.trusted_proxies;
  config.forwarded_header = settings.forwarded_header;
  config.shutdown_grace = settings.shutdown_grace;
  config.access_log = settings.access_log;
  config.private_reads = settings.private_reads;
  config.file_serving = settings.file_serving == "proxy" ? handlers::FileServing::proxy
                                                         : handlers::FileServing::redirect;
  config.presign_expiry = settings.s3.presign_expiry;
  config.tls_cert_file = settings.tls_cert;
  config.tls_key_file = settings.tls_key;
  if (const auto fd = activated_socket()) config.listen_fd = *fd;
  // A shared catalog (PostgreSQL): other replicas' changes come through its change feed.
  const auto feed = catalog::open_change_feed(settings.catalog);
  config.feed = feed.get();
  http::Server server(config, http::Services{dir->catalog.get(), dir->store.get(), &ingestor,
                                             runner.get(), store_metrics.get()});
  on_ingested = [&server] { server.reload_catalog([](const Status&) {}); };
  auto bound = server.start();
  if (!bound) return report(bound.error(), 1);
  log::info(
      "serving {} from {} (catalog: {}){}{}", *bound, settings.data_dir.string(),
      catalog::describe_catalog_location(settings.catalog),
      dir->store->backend() == store::BlobBackend::file
          ? std::string()
          : " and " + dir->store->describe() + " (file_serving = " + settings.file_serving + ")",
      config.listen_fd >= 0 ? " (socket activation)" : "");
  const char* scheme = settings.tls_cert.empty() ? "http" : "https";
  flush_logs();
  std::printf("listening on %s://%s\n", scheme, bound->c_str());
  std::fflush(stdout);
  if (runner && configuration.build.host.run_jobs == build::HostConfig::RunJobs::no) {
    // Builds are accepted, cancelled and served here; runners elsewhere run them.
    log::info(
        "build runner: this server runs no jobs ([build] run_jobs = false); they wait in "
        "the catalog for a runner (`wheelforge runner` or a server that runs jobs)");
  } else if (runner) {
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

  // SIGUSR2: a drain. No build starts any more; once the running ones have finished (and
  // published), the server stops as on SIGTERM. A SIGTERM meanwhile stops it at once, leaving
  // the builds running for the next start.
  std::thread drain_thread;
  std::thread signal_thread([&] {
    while (true) {
      int sig = 0;
      sigwait(&signals, &sig);
      if (sig == SIGUSR2) {
        if (drain_thread.joinable()) continue;
        const std::size_t running = runner ? runner->running_jobs() : 0;
        log::info(
            "received SIGUSR2, draining: no build starts; stopping once {} running build(s) "
            "have finished",
            running);
        notifier.notify("STATUS=Draining: waiting for " + std::to_string(running) +
                        " running build(s)");
        drain_thread = std::thread([&] {
          if (runner && !runner->drain()) return;
          log::info("drained: no build runs; shutting down");
          notifier.notify("STOPPING=1\nSTATUS=Stopping: finishing in-flight requests");
          server.stop();
        });
        continue;
      }
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
            // The upstreams' caches and the pages' links are built from them at start.
            if (fresh.config->upstreams != configuration.upstreams ||
                now.upstream_page_cache != settings.upstream_page_cache ||
                now.upstream_file_cache != settings.upstream_file_cache ||
                now.upstream_page_disk_cache != settings.upstream_page_disk_cache) {
              outcome += " ([[upstream]] and upstream cache changes need a restart)";
            }
            if (fresh.config->oidc_issuers != configuration.oidc_issuers) {
              outcome += " ([[oidc_issuer]] changes need a restart)";
            }
            if (fresh.config->attestation_trust_roots != configuration.attestation_trust_roots) {
              outcome += " ([attestations] changes need a restart)";
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
  // Running builds go on (their jobs are resumed at the next start); whatever else runs is
  // cancelled and its job requeued at the next start.
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
  // Ends once the runner stopped (runner->stop() above ended its wait).
  if (drain_thread.joinable()) drain_thread.join();
  log::info("stopped");
  log::shutdown();
  return 0;
}

}  // namespace wf::app
