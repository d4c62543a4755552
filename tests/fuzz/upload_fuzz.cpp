// The upload routes' head checks and the form that a twine upload finishes with, on arbitrary
// input: plan_upload (PUT /upload/<name>), plan_form (POST /legacy/), and LegacyUpload fed the
// body in chunks into a real temp file, then finished. (The ingest that follows is the archive
// target's: it reads the file the form wrote.)
//
// Input: one flags byte (bits 0-1: credentials none, upload, read, limited token; bits 2-7:
// where the body is cut into chunks), then lines ('\n'): the file name of the PUT target, the
// declared Content-Length (digits; empty: chunked), the Content-Type; the rest is the body.
// Checked: every refusal has the code its contract names; a plan keeps the name it was given;
// a form that finishes names a file whose part was complete; nothing is left in the store's
// temp directory once the upload is dropped.

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "fuzz_tokens.hpp"
#include "wheelforge/auth/tokens.hpp"
#include "wheelforge/handlers/legacy_upload.hpp"
#include "wheelforge/handlers/upload.hpp"
#include "wheelforge/util/strings.hpp"

namespace {

namespace fs = std::filesystem;
using wf::Errc;
using wf::fuzz::kLimited;
using wf::fuzz::kRead;
using wf::fuzz::kUpload;

constexpr std::uint64_t kMaxFile = 1 << 20;

fs::path work_dir() {
  return fs::temp_directory_path() / ("wf-fuzz-upload-" + std::to_string(::getpid()));
}

struct World {
  std::unique_ptr<wf::store::BlobStore> store;
  std::shared_ptr<const wf::snapshot::Snapshot> snapshot;
};

World& world() {
  static World* w = [] {
    auto* made = new World;
    auto store = wf::store::BlobStore::open(work_dir());
    WF_FUZZ_CHECK(store.ok());
    made->store = std::move(*store);
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(work_dir(), ec);
    });
    wf::catalog::Contents c;
    c.generation = 1;
    // A project claimed by the upload token, one by somebody else.
    c.projects.push_back(wf::core::ProjectRecord{"demo", "demo", 1, {}});
    c.projects.push_back(wf::core::ProjectRecord{
        "theirs", "theirs", 1, wf::core::ProjectClaim{wf::core::ClaimKind::token, 99}});
    wf::fuzz::add_tokens(c, false);
    made->snapshot = wf::snapshot::Snapshot::build(std::move(c));
    return made;
  }();
  return *w;
}

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

bool one_of(Errc code, std::initializer_list<Errc> allowed) {
  for (const Errc a : allowed) {
    if (code == a) return true;
  }
  return false;
}

std::size_t temp_files() {
  std::size_t n = 0;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(work_dir() / "tmp", ec)) {
    if (e.is_regular_file() && e.path().filename().string().starts_with("upload-")) ++n;
  }
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const unsigned flags = data[0];
  const auto lines = split_lines(wf::fuzz::as_text(data + 1, size - 1), 4);
  auto line = [&](std::size_t i) { return i < lines.size() ? lines[i] : std::string_view(); };
  World& w = world();

  wf::handlers::Request req;
  req.method = wf::handlers::Method::put;
  req.target = "/upload/" + wf::percent_encode_path(line(0));
  auto parsed = wf::handlers::parse_target(req.target);
  if (!parsed) return 0;
  req.segments = std::move(parsed->first);
  const std::string_view tokens[] = {{}, kUpload, kRead, kLimited};
  if (const auto token = tokens[flags & 3U]; !token.empty()) {
    req.headers.emplace_back("authorization",
                             "Basic " + wf::base64_encode("__token__:" + std::string(token)));
  }
  req.headers.emplace_back("content-type", std::string(line(2)));
  const auto length = wf::parse_u64(line(1));

  auto plan = wf::handlers::plan_upload(req, length, kMaxFile, *w.snapshot);
  if (plan) {
    WF_FUZZ_CHECK(plan->filename == line(0));
    WF_FUZZ_CHECK(!length || *length <= kMaxFile);
  } else {
    WF_FUZZ_CHECK(one_of(plan.error().code,
                         {Errc::invalid, Errc::unauthorized, Errc::forbidden, Errc::too_large}));
  }

  auto boundary = wf::handlers::plan_form(req, length, kMaxFile);
  if (!boundary) {
    WF_FUZZ_CHECK(one_of(boundary.error().code, {Errc::invalid, Errc::too_large}));
    return 0;
  }
  WF_FUZZ_CHECK(!boundary->empty() && boundary->size() <= 70);
  {
    auto temp = w.store->create_temp();
    WF_FUZZ_CHECK(temp.ok());
    wf::handlers::LegacyUpload form(*boundary, std::move(*temp));
    const std::string_view body = line(3);
    const std::size_t step = 1 + (flags >> 2U) * 7;
    bool fed = true;
    for (std::size_t at = 0; at < body.size() && fed; at += step) {
      auto st = form.feed(body.substr(at, step));
      if (!st) {
        WF_FUZZ_CHECK(one_of(st.error().code, {Errc::invalid, Errc::too_large, Errc::io,
                                               Errc::storage_full, Errc::unavailable}));
        fed = false;
      }
    }
    if (fed) {
      auto name = form.finish();
      if (name) {
        WF_FUZZ_CHECK(form.received_filename() == *name);
      } else {
        WF_FUZZ_CHECK(one_of(name.error().code, {Errc::invalid, Errc::gone, Errc::too_large,
                                                 Errc::io, Errc::storage_full, Errc::unavailable}));
      }
    }
  }
  // The temp file went with the form.
  WF_FUZZ_CHECK(temp_files() == 0);
  return 0;
}
