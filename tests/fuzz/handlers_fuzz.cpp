// Arbitrary requests through the route table (respond) to the admin API and the web UI, over a
// small in-memory snapshot, a real SQLite catalog (empty of files: admin actions find nothing
// to change, so inputs stay independent) and no build runner; and the build request decoders
// (JSON and form) on the body.
//
// Input lines ('\n'): method (GET, HEAD, POST, PUT, DELETE, anything else; a trailing " private"
// makes the index private), target, credentials (A, U, R, L: Basic with the admin, upload, read
// or project-limited token; anything else as the Authorization value; empty: none), Cookie
// ("{session}" becomes an admin's session id), Origin, Host; the rest is the body ("{csrf}"
// becomes the caller's form token). Bytes the transport never lets through end the run early.
// Checked: statuses are 2xx-5xx, header values carry no CR, LF or NUL, 405 names its methods,
// 401 asks for Basic credentials (but the login form's refusal, a page: a Basic challenge there
// would make the browser open its own dialog), redirects stay on this server, session cookies are
// HttpOnly, and a decoded build request has its recipe and version.

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "fuzz_tokens.hpp"
#include "handlers/handlers.hpp"
#include "handlers/ui.hpp"
#include "wheelforge/auth/tokens.hpp"
#include "wheelforge/handlers/routes.hpp"
#include "wheelforge/render/builds.hpp"
#include "wheelforge/util/strings.hpp"

namespace {

namespace fs = std::filesystem;
using wf::fuzz::kAdmin;
using wf::fuzz::kLimited;
using wf::fuzz::kRead;
using wf::fuzz::kUpload;
using wf::handlers::Method;
using wf::handlers::Response;

std::vector<std::string_view> split_lines(std::string_view s, std::size_t max) {
  std::vector<std::string_view> out;
  while (out.size() + 1 < max) {
    const auto at = s.find('\n');
    if (at == std::string_view::npos) break;
    out.push_back(s.substr(0, at));
    s.remove_prefix(at + 1);
  }
  out.push_back(s);
  return out;
}

fs::path work_dir() {
  return fs::temp_directory_path() / ("wf-fuzz-handlers-" + std::to_string(::getpid()));
}

struct World {
  std::unique_ptr<wf::catalog::Catalog> catalog;
  std::unique_ptr<wf::store::BlobStore> store;
  std::shared_ptr<const wf::snapshot::Snapshot> snapshot;
  wf::handlers::ServerStatus status;
  wf::handlers::UiSessions sessions;
  std::string session;  // an admin's session id
};

World& world() {
  static World* w = [] {
    auto* made = new World;
    fs::create_directories(work_dir());
    auto catalog = wf::catalog::open_sqlite_catalog(work_dir() / "wheelforge.db");
    WF_FUZZ_CHECK(catalog.ok());
    made->catalog = std::move(*catalog);
    auto store = wf::store::BlobStore::open(work_dir());
    WF_FUZZ_CHECK(store.ok());
    made->store = std::move(*store);
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(work_dir(), ec);
    });
    wf::catalog::Contents c;
    c.generation = 1;
    c.projects.push_back(wf::core::ProjectRecord{"demo", "Demo", 1, {}});
    wf::core::FileRecord f;
    f.id = 1;
    f.filename = "demo-1.0-py3-none-any.whl";
    f.project = "demo";
    f.version = "1.0";
    f.sha256 = std::string(64, 'a');
    f.size = 10;
    f.tags = wf::core::WheelTags{std::nullopt, "py3", "none", "any", std::nullopt};
    c.files.push_back(f);
    wf::fuzz::add_tokens(c, true);
    made->snapshot = wf::snapshot::Snapshot::build(std::move(c));
    made->session = made->sessions.create(std::string(kAdmin));
    return made;
  }();
  return *w;
}

bool transport_allows(std::string_view s, bool target) {
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u == 0x7F || (u < 0x20 && (target || c != '\t')) || (target && u == 0x20)) return false;
  }
  return true;
}

Method method_of(std::string_view s) {
  if (s == "GET") return Method::get;
  if (s == "HEAD") return Method::head;
  if (s == "POST") return Method::post;
  if (s == "PUT") return Method::put;
  if (s == "DELETE") return Method::del;
  return Method::other;
}

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  for (auto at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

void check_response(const Response& r, bool login_form) {
  WF_FUZZ_CHECK(r.status >= 200 && r.status <= 599);
  for (const auto& [name, value] : r.headers) {
    WF_FUZZ_CHECK(!name.empty());
    WF_FUZZ_CHECK(value.find_first_of(std::string_view("\r\n\0", 3)) == std::string::npos);
  }
  if (r.status == 405) WF_FUZZ_CHECK(!r.header("Allow").empty());
  if (r.status == 401) {
    WF_FUZZ_CHECK(login_form ? r.header("WWW-Authenticate").empty()
                             : r.header("WWW-Authenticate").starts_with("Basic"));
  }
  if (r.status >= 300 && r.status < 400 && r.status != 304) {
    const auto location = r.header("Location");
    WF_FUZZ_CHECK(location.starts_with('/'));
    WF_FUZZ_CHECK(!location.starts_with("//") && !location.starts_with("/\\"));
  }
  if (const auto cookie = r.header("Set-Cookie"); !cookie.empty()) {
    WF_FUZZ_CHECK(cookie.find("HttpOnly") != std::string_view::npos);
  }
}

void check_build_request(const wf::Result<wf::core::BuildRequest>& r) {
  if (!r) {
    WF_FUZZ_CHECK(r.error().code == wf::Errc::invalid && !r.error().message.empty());
    return;
  }
  WF_FUZZ_CHECK(!r->recipe.empty() && !r->version.empty());
  WF_FUZZ_CHECK(wf::trim(r->recipe) == r->recipe && wf::trim(r->version) == r->version);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto lines = split_lines(wf::fuzz::as_text(data, size), 7);
  auto line = [&](std::size_t i) { return i < lines.size() ? lines[i] : std::string_view(); };
  World& w = world();

  // The build request decoders take any bytes.
  check_build_request(wf::render::parse_build_request(line(6)));
  check_build_request(wf::handlers::decode_build_form(wf::handlers::parse_form(line(6))));

  std::string_view first = line(0);
  const bool private_reads = first.ends_with(" private");
  if (private_reads) first.remove_suffix(std::string_view(" private").size());
  const std::string_view target = line(1);
  auto parsed = wf::handlers::parse_target(target);
  if (!parsed || !transport_allows(target, true)) return 0;
  for (std::size_t i = 2; i < 6; ++i) {
    if (!transport_allows(line(i), false)) return 0;
  }

  wf::handlers::Request req;
  req.method = method_of(first);
  req.target = std::string(target);
  req.segments = std::move(parsed->first);
  req.query = std::move(parsed->second);
  std::string credential;
  const std::string_view who = line(2);
  const std::string_view token = who == "A"   ? kAdmin
                                 : who == "U" ? kUpload
                                 : who == "R" ? kRead
                                 : who == "L" ? kLimited
                                              : std::string_view();
  if (!token.empty()) {
    req.headers.emplace_back("authorization",
                             "Basic " + wf::base64_encode("__token__:" + std::string(token)));
    credential = "token:" + std::string(token);
  } else if (!who.empty()) {
    req.headers.emplace_back("authorization", std::string(who));
  }
  if (!line(3).empty()) {
    const std::string cookie = replace_all(std::string(line(3)), "{session}", w.session);
    req.headers.emplace_back("cookie", cookie);
    if (credential.empty() && cookie.find(w.session) != std::string::npos) {
      credential = "session:" + w.session;
    }
  }
  if (!line(4).empty()) req.headers.emplace_back("origin", std::string(line(4)));
  if (!line(5).empty()) req.headers.emplace_back("host", std::string(line(5)));
  req.body = replace_all(std::string(line(6)), "{csrf}",
                         credential.empty() ? "" : w.sessions.form_token(credential));

  wf::handlers::Environment env;
  env.services.catalog = w.catalog.get();
  env.services.store = w.store.get();
  env.status = &w.status;
  env.ui_sessions = &w.sessions;
  env.private_reads = private_reads;
  wf::handlers::Context ctx(*w.snapshot, env);
  const wf::handlers::Route* route = wf::handlers::find_route(req.method, req.segments).route;
  check_response(wf::handlers::respond(req, ctx),
                 route != nullptr && route->handler == wf::handlers::handle_login);
  return 0;
}
