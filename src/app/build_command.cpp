#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <future>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

#include "build_progress.hpp"
#include "command_support.hpp"
#include "wheelforge/app/app.hpp"
#include "wheelforge/auth/tokens.hpp"
#include "wheelforge/build/executor.hpp"
#include "wheelforge/catalog/catalog.hpp"
#include "wheelforge/catalog/jobs.hpp"
#include "wheelforge/http/server.hpp"
#include "wheelforge/ingest/ingestor.hpp"
#include "wheelforge/store/blob_store.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/log.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::app {

using detail::flush_logs;
using detail::ingest_limits;
using detail::open_data_dir;
using detail::report;

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
  auto jobs = catalog::open_job_store(settings.catalog, settings.data_dir);
  if (!jobs) return report(jobs.error(), 1);
  ingest::Ingestor ingestor(*dir->store, *dir->catalog, ingest_limits(settings));
  const auto executor = build::make_executor(build_config.host.executor);
  build::Runner runner(build_config, *executor, **jobs, *dir->catalog, *dir->store, ingestor,
                       settings.data_dir);
  runner.set_server_url(url);
  auto signer = detail::open_build_signer(configuration, url);
  if (!signer) return report(signer.error(), 1);
  runner.set_signer(std::move(*signer));
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
  {
    catalog::AuditRecord entry;
    entry.action = "build";
    entry.actor = detail::local_actor();
    entry.target = "build #" + std::to_string(b.id);
    entry.detail = "recipe=" + b.recipe + " version=" + b.version +
                   " jobs=" + std::to_string(queued.size()) + (b.force ? " force" : "");
    if (auto st = dir->catalog->record_audit(entry); !st) {
      std::cerr << "warning: the build was not recorded in the audit trail: " << st.error().message
                << "\n";
    }
  }

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

}  // namespace wf::app
