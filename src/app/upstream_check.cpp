// `wheelforge upstream check`: one fetch through http::make_fetcher, reported for an operator.

#include "wheelforge/app/upstream_check.hpp"

#include <iostream>

#include "wheelforge/app/app.hpp"
#include "wheelforge/core/name.hpp"
#include "wheelforge/http/fetcher.hpp"
#include "wheelforge/util/log.hpp"
#include "wheelforge/util/url.hpp"

namespace wf::app {

namespace {

/// What pip asks an index for: PEP 691 JSON first, then HTML.
constexpr const char* kAccept =
    "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, "
    "text/html;q=0.01";

/// The largest page read: PyPI's whole index page is tens of MiB; the body is counted, not kept.
constexpr std::uint64_t kMaxPageBytes = 1ULL << 30;

}  // namespace

int upstream_check(const UpstreamCheckOptions& options) {
  auto url = parse_url(options.url);
  if (!url) {
    std::cerr << "error: " << url.error().message << "\n";
    return 2;
  }
  if (options.project) {
    if (!core::is_valid_project_name(*options.project)) {
      std::cerr << "error: '" << *options.project << "' is not a valid project name\n";
      return 2;
    }
    if (!url->path.ends_with('/')) url->path += '/';
    url->path += core::normalize_name(*options.project) + "/";
  }
  init_logging();
  // The command's output says what happened; the log adds only errors.
  log::set_level(log::Level::error);

  http::FetcherConfig config;
  config.ca_file = options.ca_file;
  config.connect_timeout = options.timeout;
  config.read_timeout = options.timeout;
  config.max_concurrent = 1;
  auto fetcher = http::make_fetcher(config);
  if (!fetcher) {
    std::cerr << "error: " << fetcher.error().message << "\n";
    return 2;
  }

  handlers::FetchRequest request;
  request.url = url->with_userinfo();
  request.headers = {{"Accept", kAccept}};
  request.max_bytes = kMaxPageBytes;
  request.sink = [](std::string_view) { return ok_status(); };

  std::cout << "GET " << url->redacted() << "\n";
  const auto started = std::chrono::steady_clock::now();
  const auto answer = (*fetcher)->fetch(request);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - started)
                      .count();
  if (!answer) {
    std::cout << "time: " << ms << " ms\n";
    std::cerr << "error: " << answer.error().message << "\n";
    return 1;
  }
  const auto answered = parse_url(answer->url);
  std::cout << "status: " << answer->status << "\n";
  std::cout << "answered by: " << (answered ? answered->redacted() : answer->url) << "\n";
  if (answered && answered->https()) {
    std::cout << "tls: verified (certificate chain trusted by the system's store"
              << (options.ca_file.empty() ? "" : " or " + options.ca_file) << ", name "
              << answered->host << ")\n";
  } else {
    std::cout << "tls: none (plain http)\n";
  }
  const auto type = answer->header("content-type");
  std::cout << "content-type: " << (type.empty() ? "(none)" : type) << "\n";
  std::cout << "bytes: " << answer->body_bytes << "\n";
  std::cout << "time: " << ms << " ms\n";
  if (answer->status < 200 || answer->status > 299) {
    std::cerr << "error: upstream " << url->redacted() << " answered " << answer->status << "\n";
    return 1;
  }
  return 0;
}

}  // namespace wf::app
