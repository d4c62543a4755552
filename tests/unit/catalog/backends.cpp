#include "backends.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <system_error>

#include "catalog/pg_conn.hpp"

namespace wf::catalog::backends {

namespace {

namespace fs = std::filesystem;

struct Cluster {
  fs::path bin;
  fs::path dir;
  int port = 0;
  bool running = false;
  std::unique_ptr<pg::Conn> admin;
  int databases = 0;
};

std::mutex g_mu;
std::unique_ptr<Cluster> g_cluster;
std::string g_start_error;

fs::path find_bin() {
  if (const char* env = std::getenv("WF_PG_BIN")) return env;
  fs::path best;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    const fs::path bin = entry.path() / "bin";
    if (fs::exists(bin / "initdb") && (best.empty() || bin > best)) best = bin;
  }
  return best;
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

// The server refuses to run as root: as root, it runs as nobody.
std::string as_server_user() {
  return ::geteuid() == 0 ? "setpriv --reuid=65534 --regid=65534 --clear-groups -- " : "";
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Status run(const std::string& command, const fs::path& log) {
  const std::string full = as_server_user() + command + " >>" + log.string() + " 2>&1";
  if (std::system(full.c_str()) != 0) {
    return make_error(Errc::internal, "`" + command + "` failed: " + slurp(log));
  }
  return ok_status();
}

std::string pg_ctl(const Cluster& c, std::string_view action) {
  return (c.bin / "pg_ctl").string() + " -D " + (c.dir / "data").string() + " -l " +
         (c.dir / "server.log").string() + " -w -t 30 -o \"-p " + std::to_string(c.port) + " -k " +
         c.dir.string() +
         " -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off"
         " -c full_page_writes=off\" " +
         std::string(action);
}

std::string uri(const Cluster& c, std::string_view db) {
  return "postgresql://wheelforge@127.0.0.1:" + std::to_string(c.port) + "/" + std::string(db);
}

Status start_locked() {
  auto c = std::make_unique<Cluster>();
  c->bin = find_bin();
  if (c->bin.empty() || !fs::exists(c->bin / "initdb") || !fs::exists(c->bin / "pg_ctl")) {
    return make_error(Errc::not_found,
                      "PostgreSQL's server programs (initdb, pg_ctl) were not found under "
                      "/usr/lib/postgresql/*/bin or $WF_PG_BIN: install Debian's postgresql");
  }
  c->dir = fs::temp_directory_path() / ("wf-pg-" + std::to_string(::getpid()));
  fs::remove_all(c->dir);
  fs::create_directories(c->dir);
  if (::geteuid() == 0 && ::chown(c->dir.c_str(), 65534, 65534) != 0) {
    return make_error(Errc::internal, "chown " + c->dir.string());
  }
  const fs::path log = c->dir / "setup.log";
  if (auto st = run((c->bin / "initdb").string() + " -D " + (c->dir / "data").string() +
                        " -U wheelforge -A trust -E UTF8 --locale=C --no-sync",
                    log);
      !st) {
    return st;
  }
  c->port = free_port();
  if (auto st = run(pg_ctl(*c, "start"), log); !st) return st;
  c->running = true;
  auto admin = pg::Conn::open(uri(*c, "postgres"));
  if (!admin) {
    g_cluster = std::move(c);
    return admin.error();
  }
  c->admin = std::move(*admin);
  g_cluster = std::move(c);
  return ok_status();
}

class ClusterEnvironment final : public ::testing::Environment {
 public:
  void TearDown() override { stop_cluster(); }
};

[[maybe_unused]] ::testing::Environment* const g_env =
    ::testing::AddGlobalTestEnvironment(new ClusterEnvironment);

}  // namespace

std::string test_dir_name() {
  std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  for (auto& c : name) {
    if (c == '/') c = '_';
  }
  return name;
}

std::string backend_label(Backend backend) {
  return backend == Backend::sqlite ? "sqlite" : "postgresql";
}

Result<std::string> fresh_location(Backend backend) {
  if (backend == Backend::sqlite) return std::string("sqlite");
  std::lock_guard lock(g_mu);
  if (!g_cluster && g_start_error.empty()) {
    if (auto st = start_locked(); !st) g_start_error = st.error().message;
  }
  if (!g_start_error.empty()) return make_error(Errc::unavailable, g_start_error);
  Cluster& c = *g_cluster;
  const std::string name = "wf_test_" + std::to_string(++c.databases);
  auto made = c.admin->exec("create database", "CREATE DATABASE " + name);
  if (!made) return made.error();
  return uri(c, name);
}

void stop_cluster() {
  std::lock_guard lock(g_mu);
  if (!g_cluster) return;
  g_cluster->admin.reset();
  if (g_cluster->running) {
    (void)run((g_cluster->bin / "pg_ctl").string() + " -D " + (g_cluster->dir / "data").string() +
                  " -m immediate -w stop",
              g_cluster->dir / "setup.log");
  }
  std::error_code ec;
  fs::remove_all(g_cluster->dir, ec);
  g_cluster.reset();
}

Status set_server_stopped(bool stopped) {
  std::lock_guard lock(g_mu);
  if (!g_cluster) return make_error(Errc::internal, "no test cluster runs");
  Cluster& c = *g_cluster;
  const fs::path log = c.dir / "setup.log";
  if (stopped) {
    c.admin.reset();
    if (auto st = run(
            (c.bin / "pg_ctl").string() + " -D " + (c.dir / "data").string() + " -m fast -w stop",
            log);
        !st) {
      return st;
    }
    c.running = false;
    return ok_status();
  }
  if (auto st = run(pg_ctl(c, "start"), log); !st) return st;
  c.running = true;
  auto admin = pg::Conn::open(uri(c, "postgres"));
  if (!admin) return admin.error();
  c.admin = std::move(*admin);
  return ok_status();
}

}  // namespace wf::catalog::backends
