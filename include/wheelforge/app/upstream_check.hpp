#pragma once
// `wheelforge upstream check URL`: one fetch of an upstream index's simple page through the
// same client the proxy uses, with what an operator needs to know when it fails (the host and
// the cause: a name that does not resolve, a refused connection, a certificate not trusted or
// for another name, a timeout, an answer other than 200).

#include <chrono>
#include <optional>
#include <string>

namespace wf::app {

struct UpstreamCheckOptions {
  /// The index's simple URL ("https://pypi.org/simple/"), credentials in the userinfo allowed.
  std::string url;
  /// Check this project's page (URL/<normalized name>/) instead of the index page.
  std::optional<std::string> project;
  /// PEM certificate authorities trusted besides the system's store.
  std::string ca_file;
  /// Connect timeout and read timeout.
  std::chrono::seconds timeout{10};
};

/// Prints the answer's status, the URL that answered, the TLS outcome, its type, bytes and
/// time; returns 0 for a 2xx answer, 1 for a failed fetch or another status (with the error on
/// stderr), 2 for a bad URL, project name or CA file.
int upstream_check(const UpstreamCheckOptions& options);

}  // namespace wf::app
