// The read side of the HTTP layer on arbitrary requests: parse_target, parse_range,
// etag_matches and GET requests through the route table (respond) over a small in-memory
// snapshot (two projects, wheels with and
// without variant labels, an sdist, a yanked file).
//
// Input lines ('\n'): request target, Accept, Range, If-None-Match, Accept-Encoding, If-Range,
// Host. Bytes the HTTP transport never lets through (controls other than HTAB in header values,
// controls and spaces in the target) end the run early, so that the checks below hold for
// what can really reach the handlers: response header values carry no CR, LF or NUL, redirects
// stay on this server, byte ranges lie inside the file, 304 has no body.

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "handlers/read.hpp"
#include "wheelforge/core/variant.hpp"
#include "wheelforge/handlers/routes.hpp"

namespace {

using wf::handlers::Response;

std::vector<std::string_view> split_lines(std::string_view s) {
  std::vector<std::string_view> out;
  while (true) {
    const auto at = s.find('\n');
    out.push_back(s.substr(0, at));
    if (at == std::string_view::npos) return out;
    s.remove_prefix(at + 1);
  }
}

wf::core::FileRecord wheel(std::string project, std::string version, std::string filename,
                           char hash, std::uint64_t size) {
  wf::core::FileRecord f;
  f.id = hash;
  f.filename = std::move(filename);
  f.project = std::move(project);
  f.version = std::move(version);
  f.kind = wf::core::DistKind::wheel;
  f.sha256 = std::string(64, hash);
  f.size = size;
  f.upload_time = 1700000000000000 + hash;
  f.metadata_sha256 = std::string(64, static_cast<char>(hash + 1));
  f.metadata_size = 50;
  f.tags = wf::core::WheelTags{std::nullopt, "cp312", "cp312", "linux_x86_64", std::nullopt};
  if (const auto plus = f.version.find('+'); plus != std::string::npos) {
    f.hints = wf::core::parse_local_label(std::string_view(f.version).substr(plus + 1));
  }
  return f;
}

wf::catalog::Contents contents() {
  wf::catalog::Contents c;
  c.generation = 3;
  c.projects.push_back(wf::core::ProjectRecord{"demo", "Demo", 1, {}});
  c.projects.push_back(wf::core::ProjectRecord{"flash-attn", "flash_attn", 2, {}});
  auto sdist = wheel("demo", "1.0", "demo-1.0.tar.gz", '0', 300);
  sdist.kind = wf::core::DistKind::sdist;
  sdist.tags = {};
  sdist.metadata_sha256.clear();
  sdist.metadata_size = 0;
  c.files.push_back(sdist);
  auto generic = wheel("demo", "1.0", "demo-1.0-py3-none-any.whl", '2', 0);
  generic.requires_python = ">=3.9";
  c.files.push_back(generic);
  auto attested = wheel("flash-attn", "2.8.3+cu126torch2.7",
                        "flash_attn-2.8.3+cu126torch2.7-cp312-cp312-linux_x86_64.whl", 'a', 1000);
  attested.provenance_sha256 = std::string(64, 'f');
  attested.provenance_size = 700;
  c.files.push_back(attested);
  c.files.push_back(wheel("flash-attn", "2.8.3+cu128torch2.8cxx11abitrue",
                          "flash_attn-2.8.3+cu128torch2.8cxx11abitrue-cp312-cp312-linux_x86_64.whl",
                          'c', 2000));
  auto yanked =
      wheel("flash-attn", "2.8.2+cpu", "flash_attn-2.8.2+cpu-cp312-cp312-linux_x86_64.whl", 'e', 1);
  yanked.yanked = "broken";
  c.files.push_back(yanked);
  return c;
}

wf::store::BlobStore& store() {
  static const std::unique_ptr<wf::store::BlobStore> s = [] {
    const auto dir = std::filesystem::temp_directory_path() /
                     ("wf-fuzz-http-read-" + std::to_string(::getpid()));
    auto opened = wf::store::BlobStore::open(dir);
    WF_FUZZ_CHECK(opened.ok());
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(std::filesystem::temp_directory_path() /
                                      ("wf-fuzz-http-read-" + std::to_string(::getpid())),
                                  ec);
    });
    return std::move(opened).value();
  }();
  return *s;
}

bool transport_allows_target(std::string_view s) {
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7F) return false;
  }
  return true;
}

bool transport_allows_value(std::string_view s) {
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7F) return false;
  }
  return true;
}

void check_response(const Response& r, std::uint64_t max_file_size) {
  WF_FUZZ_CHECK(r.status >= 200 && r.status <= 599);
  for (const auto& [name, value] : r.headers) {
    WF_FUZZ_CHECK(!name.empty());
    WF_FUZZ_CHECK(value.find_first_of(std::string_view("\r\n\0", 3)) == std::string::npos);
  }
  if (r.status == 301) {
    const auto location = r.header("Location");
    WF_FUZZ_CHECK(location.starts_with('/'));
    // "//host" and "/\host" are read by browsers and clients as another server.
    WF_FUZZ_CHECK(!location.starts_with("//") && !location.starts_with("/\\"));
  }
  if (r.status == 304) {
    const auto* s = std::get_if<std::string>(&r.body);
    WF_FUZZ_CHECK(s != nullptr && s->empty());
  }
  if (const auto* range = std::get_if<wf::handlers::FileRange>(&r.body)) {
    WF_FUZZ_CHECK(range->offset <= max_file_size);
    WF_FUZZ_CHECK(range->length <= max_file_size - range->offset);
    if (r.status == 206) WF_FUZZ_CHECK(range->length > 0);
  }
}

void check_range(std::string_view header, std::uint64_t size) {
  const auto r = wf::handlers::parse_range(header, size);
  if (!r) return;
  if (r->satisfiable) {
    WF_FUZZ_CHECK(r->length > 0);
    WF_FUZZ_CHECK(r->offset < size);
    WF_FUZZ_CHECK(r->length <= size - r->offset);
  } else {
    WF_FUZZ_CHECK(r->length == 0 && r->offset == size);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto lines = split_lines(wf::fuzz::as_text(data, size));
  auto line = [&](std::size_t i) { return i < lines.size() ? lines[i] : std::string_view(); };

  for (const std::uint64_t file_size :
       {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{1000}, UINT64_MAX}) {
    check_range(line(2), file_size);
  }
  (void)wf::handlers::etag_matches(line(3), "\"etag\"");

  const std::string_view target = line(0);
  auto parsed = wf::handlers::parse_target(target);
  if (!parsed) {
    WF_FUZZ_CHECK(parsed.error().code == wf::Errc::invalid);
    return 0;
  }
  // parse_target promises to reject NUL bytes, raw or escaped.
  for (const auto& segment : parsed->first) WF_FUZZ_CHECK(segment.find('\0') == std::string::npos);
  WF_FUZZ_CHECK(parsed->second.find('\0') == std::string::npos);

  if (!transport_allows_target(target)) return 0;
  for (std::size_t i = 1; i < 7; ++i) {
    if (!transport_allows_value(line(i))) return 0;
  }

  wf::handlers::Request req;
  req.method = wf::handlers::Method::get;
  req.target = std::string(target);
  req.segments = std::move(parsed->first);
  req.query = std::move(parsed->second);
  static constexpr std::string_view kHeaders[] = {"accept",          "range",    "if-none-match",
                                                  "accept-encoding", "if-range", "host"};
  for (std::size_t i = 0; i < std::size(kHeaders); ++i) {
    if (!line(i + 1).empty()) req.headers.emplace_back(kHeaders[i], line(i + 1));
  }

  // A fresh snapshot per input keeps runs reproducible (pages are cached per snapshot).
  const auto snap = wf::snapshot::Snapshot::build(contents());
  wf::handlers::Environment env;
  env.services.store = &store();
  wf::handlers::Context ctx(*snap, env);
  check_response(wf::handlers::respond(req, ctx), 2000);
  return 0;
}
