#include "wheelforge/app/systemd.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace wf::app {
namespace {

class NotifySocket {
 public:
  NotifySocket() {
    path_ = ::testing::TempDir() + "wf-notify-" + std::to_string(::getpid());
    ::unlink(path_.c_str());
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  }
  NotifySocket(const NotifySocket&) = delete;
  NotifySocket& operator=(const NotifySocket&) = delete;
  ~NotifySocket() {
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  std::string receive() const {
    char buf[512];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

TEST(Systemd, NotifyIsANoOpWithoutSocket) {
  ::unsetenv("NOTIFY_SOCKET");
  const auto n = Notifier::from_environment();
  EXPECT_FALSE(n.enabled());
  EXPECT_FALSE(n.notify("READY=1"));
}

TEST(Systemd, NotifySendsDatagrams) {
  NotifySocket sock;
  ::setenv("NOTIFY_SOCKET", sock.path().c_str(), 1);
  const auto n = Notifier::from_environment();
  ::unsetenv("NOTIFY_SOCKET");
  ASSERT_TRUE(n.enabled());
  EXPECT_TRUE(n.notify("READY=1\nSTATUS=Serving"));
  EXPECT_EQ(sock.receive(), "READY=1\nSTATUS=Serving");
}

TEST(Systemd, WatchdogInterval) {
  ::unsetenv("WATCHDOG_PID");
  ::setenv("WATCHDOG_USEC", "3000000", 1);
  EXPECT_EQ(Notifier::watchdog_interval(), std::chrono::microseconds(1500000));
  ::setenv("WATCHDOG_PID", "1", 1);  // another process's watchdog
  EXPECT_FALSE(Notifier::watchdog_interval());
  ::setenv("WATCHDOG_PID", std::to_string(::getpid()).c_str(), 1);
  EXPECT_TRUE(Notifier::watchdog_interval());
  ::unsetenv("WATCHDOG_USEC");
  ::unsetenv("WATCHDOG_PID");
  EXPECT_FALSE(Notifier::watchdog_interval());
}

TEST(Systemd, SocketActivationNeedsOurPid) {
  ::setenv("LISTEN_PID", "1", 1);
  ::setenv("LISTEN_FDS", "1", 1);
  EXPECT_FALSE(activated_socket());
  EXPECT_EQ(std::getenv("LISTEN_FDS"), nullptr);  // never passed on to children
  ::unsetenv("LISTEN_PID");
  EXPECT_FALSE(activated_socket());
}

}  // namespace
}  // namespace wf::app
