#include "remote.hpp"

#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/redact.hpp"

extern char** environ;

namespace wf::build {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kMaxClientOutput = 1U << 20U;

}  // namespace

Result<ClientOutput> run_client(const std::vector<std::string>& argv,
                                const std::vector<std::pair<std::string, std::string>>& env,
                                std::chrono::seconds timeout) {
  std::error_code ec;
  fs::path dir = fs::temp_directory_path(ec);
  if (ec) dir = "/tmp";
  std::string pattern = (dir / "wf-client-XXXXXX").string();
  const int fd = ::mkstemp(pattern.data());
  if (fd < 0) return errno_error(errno, "cannot create a temporary file in " + dir.string());
  ::close(fd);
  const fs::path output = pattern;
  ProcessSpec spec;
  spec.argv = argv;
  spec.env = env;
  spec.log_file = output;
  spec.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
  spec.kill_grace = std::chrono::milliseconds(2000);
  auto status = run_to_completion(spec, {}, std::chrono::milliseconds(20));
  ClientOutput out;
  out.output = read_file_chunk(output, 0, kMaxClientOutput);
  fs::remove(output, ec);
  if (!status) return status.error();
  out.status = *status;
  return out;
}

std::vector<std::pair<std::string, std::string>> server_environment() {
  std::vector<std::pair<std::string, std::string>> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const std::size_t eq = entry.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    env.emplace_back(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  bool has_path = false;
  for (const auto& [k, v] : env) has_path = has_path || k == "PATH";
  if (!has_path) env.emplace_back("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin");
  return env;
}

std::string command_line(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    const bool plain =
        !a.empty() && a.find_first_of(" \t\n'\"\\$`;&|<>()*?[]{}!#~") == std::string::npos;
    if (plain) {
      out += a;
      continue;
    }
    out += '\'';
    for (const char c : a) {
      if (c == '\'') {
        out += "'\\''";
      } else {
        out += c;
      }
    }
    out += '\'';
  }
  return out;
}

void note_in(const fs::path& log, std::string_view line) {
  if (log.empty()) return;
  std::ofstream out(log, std::ios::app);
  out << "==> " << redact(line) << "\n";
}

}  // namespace wf::build
