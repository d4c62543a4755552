#include "wheelforge/http/fetcher.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "http/loopback_server.hpp"
#include "wheelforge/util/log.hpp"

namespace wf::http {
namespace {

namespace fs = std::filesystem;
using handlers::FetchRequest;
using handlers::FetchResponse;
using test::Conn;
using test::header_of;
using test::LoopbackServer;
using test::path_of;
using test::response;

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

std::unique_ptr<handlers::Fetcher> fetcher(FetcherConfig config = {}) {
  auto made = make_fetcher(config);
  EXPECT_TRUE(made.ok()) << (made.ok() ? "" : made.error().message);
  return made.ok() ? std::move(made.value()) : nullptr;
}

Result<FetchResponse> get(handlers::Fetcher& f, const std::string& url,
                          std::uint64_t max_bytes = 16ULL * 1024 * 1024) {
  FetchRequest req;
  req.url = url;
  req.max_bytes = max_bytes;
  return f.fetch(req);
}

/// A body of `n` bytes that is not one byte repeated.
std::string body_of(std::size_t n) {
  std::string out(n, '\0');
  std::mt19937 rng(42);
  for (auto& c : out) c = static_cast<char>('a' + rng() % 26);
  return out;
}

std::string chunked(std::string_view body, std::size_t piece) {
  std::string out;
  for (std::size_t at = 0; at < body.size(); at += piece) {
    const auto part = body.substr(at, piece);
    char size[32];
    std::snprintf(size, sizeof size, "%zx", part.size());
    out += std::string(size) + ";ext=1\r\n" + std::string(part) + "\r\n";
  }
  return out + "0\r\n\r\n";
}

TEST(Fetcher, AnswersWithContentLength) {
  const auto body = body_of(300'000);
  std::string head_seen;
  std::mutex m;
  LoopbackServer server([&](Conn& c, const std::string& head) {
    {
      const std::lock_guard lock(m);
      head_seen = head;
    }
    c.write(response(200, body, "Content-Type: text/html\r\nETag: \"v1\"\r\n"));
  });
  auto f = fetcher();
  FetchRequest req;
  req.url = server.url("/simple/demo/?q=1");
  req.headers = {{"Accept", "text/html"}, {"Accept-Encoding", "gzip"}, {"User-Agent", "x"}};
  const auto r = f->fetch(req);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, body);
  EXPECT_EQ(r->body_bytes, body.size());
  EXPECT_EQ(r->header("content-type"), "text/html");
  EXPECT_EQ(r->header("etag"), "\"v1\"");
  EXPECT_EQ(r->url, req.url);
  const std::lock_guard lock(m);
  EXPECT_EQ(path_of(head_seen), "/simple/demo/?q=1");
  EXPECT_EQ(header_of(head_seen, "Host"), "127.0.0.1:" + std::to_string(server.port()));
  EXPECT_EQ(header_of(head_seen, "User-Agent"), default_user_agent());
  EXPECT_TRUE(default_user_agent().starts_with("wheelforge/"));
  EXPECT_EQ(header_of(head_seen, "Accept"), "text/html");
  // The body as it is stored: no compression is asked for, whatever the caller said.
  EXPECT_EQ(header_of(head_seen, "Accept-Encoding"), "identity");
}

TEST(Fetcher, AnswersChunked) {
  const auto body = body_of(200'000);
  LoopbackServer server([&](Conn& c, const std::string&) {
    c.write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(body, 7000));
  });
  auto f = fetcher();
  const auto r = get(*f, server.url("/x"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->body, body);
  EXPECT_EQ(r->body_bytes, body.size());
}

TEST(Fetcher, ABodyCutShortFails) {
  LoopbackServer server([&](Conn& c, const std::string& head) {
    if (path_of(head) == "/length") {
      c.write("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nonly this");
    } else {
      c.write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcde\r\n");
    }
  });
  auto f = fetcher();
  for (const auto* path : {"/length", "/chunked"}) {
    const auto r = get(*f, server.url(path));
    ASSERT_FALSE(r.ok()) << path;
    EXPECT_EQ(r.error().code, Errc::unavailable);
    EXPECT_TRUE(contains(r.error().message, "the connection closed while reading the body"))
        << r.error().message;
  }
}

TEST(Fetcher, AServerThatClosesWithoutAnAnswerFails) {
  LoopbackServer server([&](Conn&, const std::string&) {});
  auto f = fetcher();
  const auto r = get(*f, server.url("/simple/"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::unavailable);
  EXPECT_TRUE(contains(r.error().message, "the connection closed while reading the answer's head"))
      << r.error().message;
}

TEST(Fetcher, AnswersUntilTheServerCloses) {
  LoopbackServer server(
      [&](Conn& c, const std::string&) { c.write("HTTP/1.1 200 OK\r\n\r\nuntil the end"); });
  auto f = fetcher();
  const auto r = get(*f, server.url("/x"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->body, "until the end");
}

TEST(Fetcher, TheSinkGetsChunksAsTheyArrive) {
  const auto first = body_of(100'000);
  const auto second = std::string(50'000, 'z');
  std::promise<void> first_sunk;
  auto first_sunk_future = first_sunk.get_future();
  std::atomic<bool> second_sent{false};
  LoopbackServer server([&](Conn& c, const std::string&) {
    c.write("HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(first.size() + second.size()) +
            "\r\n\r\n" + first);
    // The rest only once the sink has had the first part: a fetcher holding the body back
    // would wait here until the bound, and fail the expectation below.
    first_sunk_future.wait_for(std::chrono::seconds(20));
    second_sent = true;
    c.write(second);
  });
  auto f = fetcher();
  std::string got;
  std::size_t calls = 0;
  bool saw_first_before_second = false;
  FetchRequest req;
  req.url = server.url("/file.whl");
  req.sink = [&](std::string_view chunk) -> Status {
    ++calls;
    got += chunk;
    if (got.size() == first.size()) {
      saw_first_before_second = !second_sent;
      first_sunk.set_value();
    }
    return ok_status();
  };
  const auto r = f->fetch(req);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(saw_first_before_second);
  EXPECT_EQ(got, first + second);
  EXPECT_GT(calls, 2U);
  EXPECT_TRUE(r->body.empty());
  EXPECT_EQ(r->body_bytes, first.size() + second.size());
}

TEST(Fetcher, ASinkErrorStopsTheFetch) {
  const auto body = body_of(2'000'000);
  std::promise<bool> closed;
  LoopbackServer server([&](Conn& c, const std::string&) {
    c.write("HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size() * 10) + "\r\n\r\n");
    bool gone = false;
    for (int i = 0; i < 10 && !gone; ++i) gone = !c.write(body);
    closed.set_value(gone);
  });
  auto f = fetcher();
  int calls = 0;
  FetchRequest req;
  req.url = server.url("/file.whl");
  req.max_bytes = body.size() * 10;
  req.sink = [&](std::string_view) -> Status {
    ++calls;
    return make_error(Errc::storage_full, "disk full while writing");
  };
  const auto r = f->fetch(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::storage_full);
  EXPECT_EQ(r.error().message, "disk full while writing");
  EXPECT_EQ(calls, 1);
  // The connection was closed: the server could not write the whole 20 MB.
  EXPECT_TRUE(closed.get_future().get());
}

TEST(Fetcher, MaxBytesIsEnforced) {
  const auto body = body_of(5000);
  LoopbackServer server([&](Conn& c, const std::string& head) {
    if (path_of(head) == "/length") {
      c.write(response(200, body));
    } else {
      c.write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(body, 1000));
    }
  });
  auto f = fetcher();
  for (const auto* path : {"/length", "/chunked"}) {
    const auto r = get(*f, server.url(path), 4999);
    ASSERT_FALSE(r.ok()) << path;
    EXPECT_EQ(r.error().code, Errc::too_large) << path;
    EXPECT_TRUE(contains(r.error().message, "larger than 4999 bytes")) << r.error().message;
    const auto exact = get(*f, server.url(path), 5000);
    ASSERT_TRUE(exact.ok()) << path << ": " << exact.error().message;
    EXPECT_EQ(exact->body, body);
  }
  // A sink does not lift the limit.
  FetchRequest req;
  req.url = server.url("/chunked");
  req.max_bytes = 2500;
  std::size_t sunk = 0;
  req.sink = [&](std::string_view chunk) -> Status {
    sunk += chunk.size();
    return ok_status();
  };
  const auto r = f->fetch(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::too_large);
  EXPECT_LE(sunk, 2500U);
}

TEST(Fetcher, NotModifiedIsPassedThrough) {
  std::mutex m;
  std::string inm;
  LoopbackServer server([&](Conn& c, const std::string& head) {
    {
      const std::lock_guard lock(m);
      inm = header_of(head, "If-None-Match").value_or("");
    }
    c.write("HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\n\r\n");
  });
  auto f = fetcher();
  FetchRequest req;
  req.url = server.url("/simple/demo/");
  req.headers = {{"If-None-Match", "\"v1\""}};
  const auto r = f->fetch(req);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->status, 304);
  EXPECT_TRUE(r->body.empty());
  EXPECT_EQ(r->header("etag"), "\"v1\"");
  const std::lock_guard lock(m);
  EXPECT_EQ(inm, "\"v1\"");
}

TEST(Fetcher, OtherStatusesAreAnswers) {
  LoopbackServer server(
      [&](Conn& c, const std::string&) { c.write(response(404, "no such project")); });
  auto f = fetcher();
  const auto r = get(*f, server.url("/simple/none/"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(r->body, "no such project");
}

TEST(Fetcher, FollowsRedirects) {
  LoopbackServer other(
      [&](Conn& c, const std::string& head) { c.write(response(200, "other " + path_of(head))); });
  LoopbackServer server([&](Conn& c, const std::string& head) {
    const auto path = path_of(head);
    if (path == "/simple/demo") {
      c.write(response(301, "", "Location: demo/\r\n"));  // relative
    } else if (path == "/simple/demo/") {
      c.write(response(302, "moved", "Location: ../../pages/demo/?v=2\r\n"));
    } else if (path == "/pages/demo/?v=2") {
      c.write(response(307, "", "Location: " + other.url("/final/") + "\r\n"));  // absolute
    } else if (path == "/no-location") {
      c.write(response(302, "stays"));
    } else {
      c.write(response(404, ""));
    }
  });
  auto f = fetcher();
  const auto r = get(*f, server.url("/simple/demo"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "other /final/");
  EXPECT_EQ(r->url, other.url("/final/"));
  EXPECT_EQ(server.requests(), 3);
  // A redirect without a Location is an answer like any other.
  const auto stays = get(*f, server.url("/no-location"));
  ASSERT_TRUE(stays.ok());
  EXPECT_EQ(stays->status, 302);
  EXPECT_EQ(stays->body, "stays");
}

TEST(Fetcher, RedirectLoopsAndTooManyRedirectsFail) {
  LoopbackServer server([&](Conn& c, const std::string& head) {
    const auto path = path_of(head);
    if (path == "/loop") {
      c.write(response(302, "", "Location: /loop2\r\n"));
    } else if (path == "/loop2") {
      c.write(response(302, "", "Location: /loop\r\n"));
    } else {
      const int n = std::stoi(path.substr(3));  // "/r/N"
      c.write(response(302, "", "Location: /r/" + std::to_string(n + 1) + "\r\n"));
    }
  });
  FetcherConfig config;
  config.max_redirects = 3;
  auto f = fetcher(config);
  const auto loop = get(*f, server.url("/loop"));
  ASSERT_FALSE(loop.ok());
  EXPECT_EQ(loop.error().code, Errc::unavailable);
  EXPECT_TRUE(contains(loop.error().message, "redirect loop")) << loop.error().message;
  const auto many = get(*f, server.url("/r/0"));
  ASSERT_FALSE(many.ok());
  EXPECT_EQ(many.error().code, Errc::unavailable);
  EXPECT_TRUE(contains(many.error().message, "too many redirects (more than 3)"))
      << many.error().message;
  EXPECT_TRUE(contains(many.error().message, "127.0.0.1")) << many.error().message;
}

TEST(Fetcher, CredentialsInTheUrlBecomeBasicAuth) {
  std::mutex m;
  std::vector<std::optional<std::string>> auths;
  LoopbackServer other([&](Conn& c, const std::string& head) {
    {
      const std::lock_guard lock(m);
      auths.push_back(header_of(head, "Authorization"));
    }
    c.write(response(200, "other"));
  });
  LoopbackServer server([&](Conn& c, const std::string& head) {
    {
      const std::lock_guard lock(m);
      auths.push_back(header_of(head, "Authorization"));
    }
    if (path_of(head) == "/away") {
      c.write(response(302, "", "Location: " + other.url("/x") + "\r\n"));
    } else if (path_of(head) == "/here") {
      c.write(response(302, "", "Location: /there\r\n"));
    } else {
      c.write(response(200, "ok"));
    }
  });
  std::vector<std::string> lines;
  log::set_output([&](log::Level, std::chrono::system_clock::time_point, std::string_view line) {
    const std::lock_guard lock(m);
    lines.emplace_back(line);
  });
  log::set_level(log::Level::debug);
  auto f = fetcher();
  const auto base = "http://us%65r:s3cr%40t@127.0.0.1:" + std::to_string(server.port());
  ASSERT_TRUE(get(*f, base + "/simple/").ok());
  ASSERT_TRUE(get(*f, base + "/here").ok());  // same origin: sent again
  const auto away = get(*f, base + "/away");  // another origin: not sent there
  ASSERT_TRUE(away.ok());
  EXPECT_EQ(away->body, "other");
  EXPECT_EQ(away->url.find("s3cr"), std::string::npos);
  const auto wrong = get(*f, base + ":/nowhere");
  EXPECT_FALSE(wrong.ok());
  log::shutdown();
  log::set_level(log::Level::info);
  const std::lock_guard lock(m);
  const std::string expected = "Basic " + base64_encode("user:s3cr@t");
  ASSERT_EQ(auths.size(), 5U);
  EXPECT_EQ(auths[0], expected);
  EXPECT_EQ(auths[1], expected);
  EXPECT_EQ(auths[2], expected);
  EXPECT_EQ(auths[3], expected);
  EXPECT_FALSE(auths[4]) << *auths[4];
  // One line per fetch, and never the credentials.
  std::size_t fetch_lines = 0;
  for (const auto& line : lines) {
    EXPECT_FALSE(contains(line, "s3cr")) << line;
    EXPECT_FALSE(contains(line, "user")) << line;
    if (contains(line, "upstream GET")) ++fetch_lines;
  }
  EXPECT_EQ(fetch_lines, 3U);
}

TEST(Fetcher, CredentialsGoOnlyToTheirOrigin) {
  std::mutex m;
  std::vector<std::pair<std::string, std::optional<std::string>>> seen;  // (who, Authorization)
  std::string home;  // the credentials' origin: the server below
  LoopbackServer other([&](Conn& c, const std::string& head) {
    std::string back;
    {
      const std::lock_guard lock(m);
      seen.emplace_back("other " + path_of(head), header_of(head, "Authorization"));
      back = home;
    }
    if (path_of(head) == "/back") {
      c.write(response(302, "", "Location: " + back + "\r\n"));
    } else {
      c.write(response(200, "other"));
    }
  });
  LoopbackServer server([&](Conn& c, const std::string& head) {
    {
      const std::lock_guard lock(m);
      seen.emplace_back("home " + path_of(head), header_of(head, "Authorization"));
    }
    if (path_of(head) == "/away") {
      c.write(response(302, "", "Location: " + other.url("/file.whl") + "\r\n"));
    } else {
      c.write(response(200, "home"));
    }
  });
  {
    const std::lock_guard lock(m);
    home = server.url("/simple/");
  }
  auto f = fetcher();
  const auto with_credentials = [&](const std::string& url) {
    FetchRequest req;
    req.url = url;
    req.credentials = handlers::FetchCredentials{server.url("/simple/"), "user", "s3cret"};
    return f->fetch(req);
  };
  ASSERT_TRUE(with_credentials(server.url("/simple/demo/")).ok());
  ASSERT_TRUE(with_credentials(server.url("/files/x-1.0-py3-none-any.whl")).ok());
  // A file the page links on another port, directly and through a redirect.
  ASSERT_TRUE(with_credentials(other.url("/files/x-1.1-py3-none-any.whl")).ok());
  ASSERT_TRUE(with_credentials(server.url("/away")).ok());
  // Another origin that redirects to theirs: sent there, and there only.
  ASSERT_TRUE(with_credentials(other.url("/back")).ok());
  // Credentials in a header are refused: the fetcher alone decides where they go.
  FetchRequest raw;
  raw.url = server.url("/simple/");
  raw.headers = {{"authorization", "Basic eDp5"}};
  const auto refused = f->fetch(raw);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, Errc::invalid);

  const std::lock_guard lock(m);
  const std::string expected = "Basic " + base64_encode("user:s3cret");
  using Seen = std::pair<std::string, std::optional<std::string>>;
  const std::vector<Seen> want{
      {"home /simple/demo/", expected},
      {"home /files/x-1.0-py3-none-any.whl", expected},
      {"other /files/x-1.1-py3-none-any.whl", std::nullopt},
      {"home /away", expected},
      {"other /file.whl", std::nullopt},
      {"other /back", std::nullopt},
      {"home /simple/", expected},
  };
  EXPECT_EQ(seen, want);
}

TEST(Fetcher, ConnectionRefused) {
  // A port that was free a moment ago, with nothing listening on it.
  std::uint16_t port = 0;
  {
    boost::asio::io_context io;
    test::tcp::acceptor a(io, test::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
    port = a.local_endpoint().port();
  }
  auto f = fetcher();
  const auto r = get(*f, "http://127.0.0.1:" + std::to_string(port) + "/simple/");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::unavailable);
  EXPECT_TRUE(contains(r.error().message, "cannot connect to 127.0.0.1:" + std::to_string(port)))
      << r.error().message;
  EXPECT_TRUE(contains(r.error().message, "refused")) << r.error().message;
}

TEST(Fetcher, UnknownHostAndBadUrls) {
  auto f = fetcher();
  const auto unknown = get(*f, "http://no-such-host.invalid/simple/");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code, Errc::unavailable);
  EXPECT_TRUE(contains(unknown.error().message, "cannot resolve host name no-such-host.invalid"))
      << unknown.error().message;
  FetchRequest split;
  split.url = "http://127.0.0.1:1/";
  split.headers = {{"If-None-Match", "\"x\"\r\nX-Injected: 1"}};
  const auto refused = f->fetch(split);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, Errc::invalid);
  EXPECT_TRUE(contains(refused.error().message, "If-None-Match")) << refused.error().message;
  for (const auto* bad : {"ftp://h/", "/simple/", "http://h:99999/"}) {
    const auto r = get(*f, bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, Errc::invalid) << bad;
  }
}

TEST(Fetcher, AServerThatNeverAnswersTimesOut) {
  LoopbackServer* self = nullptr;
  LoopbackServer server([&](Conn&, const std::string&) { self->wait_until_stopped(); });
  self = &server;
  FetcherConfig config;
  config.read_timeout = std::chrono::milliseconds(300);
  auto f = fetcher(config);
  const auto r = get(*f, server.url("/simple/"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::unavailable);
  EXPECT_TRUE(contains(r.error().message, "timed out waiting for an answer (300ms)"))
      << r.error().message;
  EXPECT_TRUE(contains(r.error().message, server.url("/simple/"))) << r.error().message;
}

TEST(Fetcher, ABodyThatStopsComingTimesOut) {
  LoopbackServer* self = nullptr;
  LoopbackServer server([&](Conn& c, const std::string&) {
    c.write("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhalf");
    self->wait_until_stopped();
  });
  self = &server;
  FetcherConfig config;
  config.read_timeout = std::chrono::milliseconds(300);
  auto f = fetcher(config);
  const auto r = get(*f, server.url("/file.whl"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::unavailable);
  EXPECT_TRUE(contains(r.error().message, "timed out waiting for the body")) << r.error().message;
}

/// Serves a body of 100000 bytes one byte at a time, a little apart, until the client goes.
void trickle(Conn& c) {
  if (!c.write("HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")) return;
  for (int i = 0; i < 100'000; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (!c.write("x")) return;
  }
}

TEST(Fetcher, TheDeadlineEndsAFetchThatTrickles) {
  // Each byte comes well within the idle limit: only the deadline of the whole fetch ends it.
  LoopbackServer server([&](Conn& c, const std::string&) { trickle(c); });
  auto f = fetcher();
  for (const bool with_sink : {false, true}) {
    FetchRequest req;
    req.url = server.url("/simple/slow/");
    req.deadline = std::chrono::milliseconds(400);
    std::size_t sunk = 0;
    if (with_sink) {
      req.sink = [&](std::string_view chunk) -> Status {
        sunk += chunk.size();
        return ok_status();
      };
    }
    const auto r = f->fetch(req);
    ASSERT_FALSE(r.ok()) << with_sink;
    EXPECT_EQ(r.error().code, Errc::unavailable);
    EXPECT_TRUE(contains(
        r.error().message,
        server.url("/simple/slow/") + ": deadline passed: the fetch did not end within 400ms"))
        << r.error().message;
    EXPECT_LT(sunk, 100'000U);
  }
}

TEST(Fetcher, TheDeadlineCoversRedirectsAndConnecting) {
  // The first answer is a redirect to a server that never answers: the deadline, shorter than
  // the idle limit, is what ends the fetch.
  LoopbackServer* self = nullptr;
  LoopbackServer silent([&](Conn&, const std::string&) { self->wait_until_stopped(); });
  self = &silent;
  LoopbackServer server([&](Conn& c, const std::string&) {
    c.write(response(302, "", "Location: " + silent.url("/simple/x/") + "\r\n"));
  });
  auto f = fetcher();
  FetchRequest req;
  req.url = server.url("/simple/x/");
  req.deadline = std::chrono::milliseconds(300);
  const auto r = f->fetch(req);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.error().message, "deadline passed")) << r.error().message;
  EXPECT_TRUE(contains(r.error().message, silent.url("/simple/x/"))) << r.error().message;
}

TEST(Fetcher, WithoutADeadlineTheMinimumRateEndsAFetchThatTrickles) {
  LoopbackServer server([&](Conn& c, const std::string&) { trickle(c); });
  FetcherConfig config;
  config.min_rate = 1000;
  config.rate_window = std::chrono::milliseconds(200);
  auto f = fetcher(config);
  FetchRequest req;
  req.url = server.url("/files/big.whl");
  req.deadline = {};
  req.sink = [](std::string_view) { return ok_status(); };
  const auto r = f->fetch(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::unavailable);
  EXPECT_TRUE(contains(r.error().message, server.url("/files/big.whl"))) << r.error().message;
  EXPECT_TRUE(contains(r.error().message, "below the minimum of 1000 bytes/s"))
      << r.error().message;
}

TEST(Fetcher, AKeptConnectionIsUsedAgain) {
  LoopbackServer server(
      [&](Conn& c, const std::string& head) { c.write(response(200, path_of(head))); }, nullptr,
      /*keep_alive=*/true);
  auto f = fetcher();
  for (const auto* path : {"/a", "/b", "/c"}) {
    const auto r = get(*f, server.url(path));
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->body, path);
  }
  EXPECT_EQ(server.requests(), 3);
  EXPECT_EQ(server.connections(), 1);
  EXPECT_EQ(f->connections_opened(), 1U);
}

TEST(Fetcher, KeepingConnectionsCanBeTurnedOff) {
  std::mutex m;
  std::vector<std::string> connection_headers;
  LoopbackServer server(
      [&](Conn& c, const std::string& head) {
        {
          const std::lock_guard lock(m);
          connection_headers.push_back(header_of(head, "Connection").value_or(""));
        }
        c.write(response(200, "x", "Connection: close\r\n"));
        c.close();
      },
      nullptr, /*keep_alive=*/true);
  FetcherConfig config;
  config.idle_per_origin = 0;
  auto f = fetcher(config);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(get(*f, server.url("/x")).ok());
  EXPECT_EQ(server.connections(), 2);
  EXPECT_EQ(f->connections_opened(), 2U);
  const std::lock_guard lock(m);
  EXPECT_EQ(connection_headers, (std::vector<std::string>{"close", "close"}));
}

TEST(Fetcher, AConnectionTheServerClosesIsNotKept) {
  // "Connection: close" from the server, an HTTP/1.0 answer, and a body that ends with the
  // connection: none of these connections is used again, even while the server keeps it open.
  for (const std::string answer :
       {"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx",
        "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx"}) {
    LoopbackServer server([&](Conn& c, const std::string&) { c.write(answer); }, nullptr,
                          /*keep_alive=*/true);
    auto f = fetcher();
    for (int i = 0; i < 2; ++i) {
      const auto r = get(*f, server.url("/x"));
      ASSERT_TRUE(r.ok()) << r.error().message;
      EXPECT_EQ(r->body, "x");
    }
    EXPECT_EQ(server.connections(), 2) << answer;
  }
}

TEST(Fetcher, AKeptConnectionClosedByTheServerIsReplaced) {
  // The server closes each connection once it has answered (without saying so first).
  LoopbackServer server(
      [&](Conn& c, const std::string& head) {
        c.write(response(200, path_of(head)));
        c.close();
      },
      nullptr, /*keep_alive=*/true);
  auto f = fetcher();
  for (const auto* path : {"/a", "/b", "/c"}) {
    const auto r = get(*f, server.url(path));
    ASSERT_TRUE(r.ok()) << path << ": " << r.error().message;
    EXPECT_EQ(r->body, path);
  }
  EXPECT_EQ(server.connections(), 3);
  EXPECT_EQ(server.requests(), 3);
}

TEST(Fetcher, ARequestOnAKeptConnectionThatGetsNoAnswerIsSentOnceMoreOnANewOne) {
  // The server answers the first request of each connection and closes the connection
  // without an answer when a second request comes on it (as a server does whose idle limit
  // passes just as a request arrives).
  LoopbackServer server(
      [&](Conn& c, const std::string& head) {
        thread_local int served_on_this_connection = 0;
        if (served_on_this_connection++ > 0) return c.close();
        c.write(response(200, path_of(head)));
      },
      nullptr, /*keep_alive=*/true);
  auto f = fetcher();
  const auto first = get(*f, server.url("/first"));
  ASSERT_TRUE(first.ok()) << first.error().message;
  const auto second = get(*f, server.url("/second"));
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_EQ(second->body, "/second");
  // The second request went on the kept connection (no answer), then on a new one.
  EXPECT_EQ(server.requests(), 3);
  EXPECT_EQ(server.connections(), 2);
}

TEST(Fetcher, ConnectionsAreKeptPerOrigin) {
  const auto handler = [](Conn& c, const std::string& head) {
    c.write(response(200, path_of(head)));
  };
  LoopbackServer one(handler, nullptr, /*keep_alive=*/true);
  LoopbackServer two(handler, nullptr, /*keep_alive=*/true);
  auto f = fetcher();
  const auto by_name = "http://localhost:" + std::to_string(one.port());
  for (const auto& url : {one.url("/1"), two.url("/2"), one.url("/3"), by_name + "/4",
                          two.url("/5"), by_name + "/6"}) {
    const auto r = get(*f, url);
    ASSERT_TRUE(r.ok()) << url << ": " << r.error().message;
  }
  // Another port is another origin, and so is another host name for the same server.
  EXPECT_EQ(one.requests(), 4);
  EXPECT_EQ(one.connections(), 2);
  EXPECT_EQ(two.requests(), 2);
  EXPECT_EQ(two.connections(), 1);
  EXPECT_EQ(f->connections_opened(), 3U);
}

TEST(Fetcher, AConnectionIdleTooLongIsNotUsedAgain) {
  LoopbackServer server([&](Conn& c, const std::string&) { c.write(response(200, "x")); }, nullptr,
                        /*keep_alive=*/true);
  FetcherConfig config;
  config.idle_timeout = std::chrono::milliseconds(50);
  auto f = fetcher(config);
  ASSERT_TRUE(get(*f, server.url("/x")).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_TRUE(get(*f, server.url("/x")).ok());
  EXPECT_EQ(server.connections(), 2);
}

TEST(Fetcher, AnAnswerNotReadToTheEndClosesItsConnection) {
  // A redirect's body is not read: its connection cannot carry another request.
  LoopbackServer server(
      [&](Conn& c, const std::string& head) {
        if (path_of(head) == "/old") {
          c.write(response(301, std::string(1000, 'r'), "Location: /new\r\n"));
        } else {
          c.write(response(200, "new"));
        }
      },
      nullptr, /*keep_alive=*/true);
  auto f = fetcher();
  const auto r = get(*f, server.url("/old"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->body, "new");
  EXPECT_EQ(server.connections(), 2);
  // The second connection, read to its end, is kept.
  ASSERT_TRUE(get(*f, server.url("/new")).ok());
  EXPECT_EQ(server.connections(), 2);
}

TEST(Fetcher, TheConcurrencyLimitIsHonoured) {
  std::promise<void> release;
  auto released = release.get_future().share();
  std::promise<void> first_arrived;
  LoopbackServer server([&](Conn& c, const std::string& head) {
    if (path_of(head) == "/slow") {
      first_arrived.set_value();
      released.wait();
    }
    c.write(response(200, path_of(head)));
  });
  FetcherConfig config;
  config.max_concurrent = 1;
  config.queue_timeout = std::chrono::milliseconds(200);
  auto f = fetcher(config);
  auto slow = std::async(std::launch::async, [&] { return get(*f, server.url("/slow")); });
  first_arrived.get_future().wait();
  // The second waits for the place, and gives up when none frees within queue_timeout.
  const auto refused = get(*f, server.url("/fast"));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, Errc::unavailable);
  EXPECT_TRUE(contains(refused.error().message, "too many upstream fetches (1 in progress)"))
      << refused.error().message;
  EXPECT_EQ(server.requests(), 1);
  release.set_value();
  const auto first = slow.get();
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_EQ(first->body, "/slow");
  const auto later = get(*f, server.url("/fast"));
  ASSERT_TRUE(later.ok()) << later.error().message;
  EXPECT_EQ(later->body, "/fast");
}

TEST(Fetcher, AWaitingFetchGoesOnWhenAPlaceFrees) {
  std::promise<void> release;
  auto released = release.get_future().share();
  std::promise<void> first_arrived;
  LoopbackServer server([&](Conn& c, const std::string& head) {
    if (path_of(head) == "/slow") {
      first_arrived.set_value();
      released.wait();
    }
    c.write(response(200, path_of(head)));
  });
  FetcherConfig config;
  config.max_concurrent = 1;
  config.queue_timeout = std::chrono::seconds(60);
  auto f = fetcher(config);
  auto slow = std::async(std::launch::async, [&] { return get(*f, server.url("/slow")); });
  first_arrived.get_future().wait();
  std::atomic<bool> second_done{false};
  auto waiting = std::async(std::launch::async, [&] {
    auto r = get(*f, server.url("/second"));
    second_done = true;
    return r;
  });
  // While the first holds the one place, the second is not sent.
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  EXPECT_EQ(server.requests(), 1);
  EXPECT_FALSE(second_done);
  release.set_value();
  ASSERT_TRUE(slow.get().ok());
  const auto second = waiting.get();
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_EQ(second->body, "/second");
  EXPECT_EQ(server.requests(), 2);
}

TEST(Fetcher, ManyCallersAtOnceEachGetTheirOwnAnswer) {
  LoopbackServer server([&](Conn& c, const std::string& head) {
    const auto path = path_of(head);
    std::string body;
    for (int i = 0; i < 2000; ++i) body += path;
    c.write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(body, 3000));
  });
  FetcherConfig config;
  config.max_concurrent = 3;
  config.queue_timeout = std::chrono::seconds(60);
  auto f = fetcher(config);
  std::vector<std::future<int>> callers;
  for (int t = 0; t < 8; ++t) {
    callers.push_back(std::async(std::launch::async, [&, t] {
      int good = 0;
      for (int i = 0; i < 10; ++i) {
        const auto path = "/t" + std::to_string(t) + "/" + std::to_string(i);
        std::string expected;
        for (int k = 0; k < 2000; ++k) expected += path;
        FetchRequest req;
        req.url = server.url(path);
        std::string got;
        if (i % 2 == 0) {
          req.sink = [&](std::string_view chunk) -> Status {
            got += chunk;
            return ok_status();
          };
        }
        const auto r = f->fetch(req);
        if (r.ok() && (i % 2 == 0 ? got : r->body) == expected) ++good;
      }
      return good;
    }));
  }
  for (auto& c : callers) EXPECT_EQ(c.get(), 10);
  EXPECT_EQ(server.requests(), 80);
}

TEST(Fetcher, ABadCaFileIsRefused) {
  FetcherConfig config;
  config.ca_file = "/nonexistent/ca.pem";
  const auto missing = make_fetcher(config);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, Errc::invalid);
  EXPECT_TRUE(contains(missing.error().message, "/nonexistent/ca.pem"));
  const auto dir = fs::temp_directory_path() / ("wf-fetcher-ca-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "junk.pem") << "not a certificate\n";
  config.ca_file = (dir / "junk.pem").string();
  const auto junk = make_fetcher(config);
  fs::remove_all(dir);
  ASSERT_FALSE(junk.ok());
  EXPECT_EQ(junk.error().code, Errc::invalid);
  EXPECT_TRUE(contains(junk.error().message, "junk.pem")) << junk.error().message;
}

// --- TLS, with a CA and server certificates made for the test by the openssl command. ---

class FetcherTls : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("wf-fetcher-tls-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    std::ofstream(dir_ / "good.ext") << "subjectAltName=IP:127.0.0.1,DNS:localhost\n";
    std::ofstream(dir_ / "wrong.ext") << "subjectAltName=DNS:elsewhere.invalid\n";
    const std::string d = dir_.string();
    const std::string key = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    std::string script = "set -e; cd '" + d + "'; " + "openssl req -x509" + key +
                         " -keyout ca.key -out ca.pem -days 2 -subj /CN=wf-test-ca; ";
    for (const std::string leaf : {"good", "wrong"}) {
      script += "openssl req" + key + " -keyout " + leaf + ".key -out " + leaf +
                ".csr -subj /CN=" + leaf + "; openssl x509 -req -in " + leaf +
                ".csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -out " + leaf +
                ".pem -extfile " + leaf + ".ext; ";
    }
    const std::string command = "sh -c \"" + script + "\" >'" + d + "/openssl.log' 2>&1";
    ASSERT_EQ(std::system(command.c_str()), 0) << "openssl failed; see " << d << "/openssl.log";
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static std::unique_ptr<test::ssl::context> server_tls(const std::string& leaf) {
    auto ctx = std::make_unique<test::ssl::context>(test::ssl::context::tls_server);
    ctx->use_certificate_chain_file((dir_ / (leaf + ".pem")).string());
    ctx->use_private_key_file((dir_ / (leaf + ".key")).string(), test::ssl::context::pem);
    return ctx;
  }
  static std::string ca_file() { return (dir_ / "ca.pem").string(); }

  static fs::path dir_;
};
fs::path FetcherTls::dir_;

TEST_F(FetcherTls, AnUntrustedCertificateIsRefused) {
  auto tls = server_tls("good");
  LoopbackServer server([&](Conn& c, const std::string&) { c.write(response(200, "x")); },
                        tls.get());
  auto f = fetcher();  // the system's store alone
  const auto r = get(*f, server.url("/simple/"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::unavailable);
  EXPECT_TRUE(contains(r.error().message, "certificate verify failed")) << r.error().message;
  EXPECT_TRUE(contains(r.error().message, "127.0.0.1")) << r.error().message;
  EXPECT_EQ(server.requests(), 0);
}

TEST_F(FetcherTls, ACertificateOfTheExtraCaIsAccepted) {
  auto tls = server_tls("good");
  const auto body = body_of(150'000);
  LoopbackServer server(
      [&](Conn& c, const std::string& head) {
        c.write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(body, 9000));
        (void)head;
      },
      tls.get());
  FetcherConfig config;
  config.ca_file = ca_file();
  auto f = fetcher(config);
  const auto r = get(*f, server.url("/simple/"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, body);
  // By name too (SNI and the DNS name of the certificate).
  const auto named = get(*f, "https://localhost:" + std::to_string(server.port()) + "/simple/");
  ASSERT_TRUE(named.ok()) << named.error().message;
  EXPECT_EQ(named->body, body);
}

TEST_F(FetcherTls, AHostNameMismatchIsRefused) {
  auto tls = server_tls("wrong");
  LoopbackServer server([&](Conn& c, const std::string&) { c.write(response(200, "x")); },
                        tls.get());
  FetcherConfig config;
  config.ca_file = ca_file();
  auto f = fetcher(config);
  for (const auto& url :
       {server.url("/simple/"), "https://localhost:" + std::to_string(server.port()) + "/"}) {
    const auto r = get(*f, url);
    ASSERT_FALSE(r.ok()) << url;
    EXPECT_EQ(r.error().code, Errc::unavailable);
    EXPECT_TRUE(contains(r.error().message, "certificate verify failed")) << r.error().message;
    EXPECT_TRUE(contains(r.error().message, "mismatch")) << r.error().message;
  }
  EXPECT_EQ(server.requests(), 0);
}

TEST_F(FetcherTls, ARedirectFromHttpsToHttpIsRefused) {
  LoopbackServer plain([&](Conn& c, const std::string&) { c.write(response(200, "plain")); });
  auto tls = server_tls("good");
  LoopbackServer server(
      [&](Conn& c, const std::string&) {
        c.write(response(302, "", "Location: " + plain.url("/simple/") + "\r\n"));
      },
      tls.get());
  FetcherConfig config;
  config.ca_file = ca_file();
  auto f = fetcher(config);
  const auto r = get(*f, server.url("/simple/"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::unavailable);
  EXPECT_TRUE(contains(r.error().message, "redirect from https to http refused"))
      << r.error().message;
  EXPECT_EQ(plain.requests(), 0);
}

TEST_F(FetcherTls, AKeptTlsConnectionIsUsedAgain) {
  auto tls = server_tls("good");
  LoopbackServer server(
      [&](Conn& c, const std::string& head) { c.write(response(200, path_of(head))); }, tls.get(),
      /*keep_alive=*/true);
  FetcherConfig config;
  config.ca_file = ca_file();
  auto f = fetcher(config);
  for (const auto* path : {"/a", "/b", "/c"}) {
    const auto r = get(*f, server.url(path));
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->body, path);
  }
  EXPECT_EQ(server.connections(), 1);
  EXPECT_EQ(f->connections_opened(), 1U);
}

TEST_F(FetcherTls, AKeptTlsConnectionClosedByTheServerIsReplaced) {
  auto tls = server_tls("good");
  LoopbackServer server(
      [&](Conn& c, const std::string& head) {
        c.write(response(200, path_of(head)));
        c.close();
      },
      tls.get(), /*keep_alive=*/true);
  FetcherConfig config;
  config.ca_file = ca_file();
  auto f = fetcher(config);
  for (const auto* path : {"/a", "/b"}) {
    const auto r = get(*f, server.url(path));
    ASSERT_TRUE(r.ok()) << path << ": " << r.error().message;
    EXPECT_EQ(r->body, path);
  }
  EXPECT_EQ(server.connections(), 2);
}

}  // namespace
}  // namespace wf::http
