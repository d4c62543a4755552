// MultipartParser and boundary_from_content_type on arbitrary bytes.
//
// Input: byte 0 holds flags (bits 0-2: how many chunk sizes follow, bit 3: small limits); then
// that many bytes of chunk sizes (used in turn, cyclically); then a Content-Type value up to
// the first '\n'; the rest is the body. When the Content-Type yields no boundary, the body is
// parsed with the boundary "fuzzb".
//
// The body is parsed whole, in the chunks the input describes and one byte at a time. The
// parser promises that chunks may be split anywhere, so all three must see the same events
// (file starts, file bytes, file ends), the same fields and the same outcome.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fuzz_check.hpp"
#include "wheelforge/handlers/multipart.hpp"

namespace {

using wf::handlers::MultipartLimits;
using wf::handlers::MultipartParser;

// Records what the parser reports, joining adjacent data callbacks, and checks the callback
// order the interface promises.
class RecordingSink final : public wf::handlers::MultipartSink {
 public:
  wf::Status on_file_start(std::string_view field_name, std::string_view filename) override {
    WF_FUZZ_CHECK(!in_file_);
    WF_FUZZ_CHECK(!field_name.empty());
    in_file_ = true;
    events_.emplace_back('S', std::string(field_name) + '\0' + std::string(filename));
    // A sink error must stop parsing and come back from feed() unchanged.
    if (filename == "reject") return wf::make_error(wf::Errc::conflict, "sink rejects");
    return wf::ok_status();
  }
  wf::Status on_file_data(std::string_view bytes) override {
    WF_FUZZ_CHECK(in_file_);
    WF_FUZZ_CHECK(!bytes.empty());
    if (events_.empty() || events_.back().first != 'D') events_.emplace_back('D', "");
    events_.back().second.append(bytes);
    return wf::ok_status();
  }
  wf::Status on_file_end() override {
    WF_FUZZ_CHECK(in_file_);
    in_file_ = false;
    events_.emplace_back('E', "");
    return wf::ok_status();
  }

  [[nodiscard]] const std::vector<std::pair<char, std::string>>& events() const { return events_; }

 private:
  bool in_file_ = false;
  std::vector<std::pair<char, std::string>> events_;
};

struct Outcome {
  bool ok = false;
  wf::Errc code = wf::Errc::internal;
  std::string message;
  std::vector<std::pair<char, std::string>> events;
  std::vector<std::pair<std::string, std::string>> fields;
};

Outcome parse(const std::string& boundary, const MultipartLimits& limits, std::string_view body,
              const std::vector<std::size_t>& sizes) {
  MultipartParser parser(boundary, limits);
  RecordingSink sink;
  Outcome out;
  wf::Status status = wf::ok_status();
  std::size_t pos = 0;
  std::size_t k = 0;
  while (pos < body.size()) {
    const std::size_t n = sizes.empty() ? body.size() : sizes[k++ % sizes.size()];
    status = parser.feed(body.substr(pos, n), sink);
    pos += std::min(n, body.size() - pos);
    if (!status) break;
  }
  if (status) status = parser.finish();
  if (!status) {
    // Every later call repeats the first error.
    const auto again = parser.finish();
    WF_FUZZ_CHECK(!again.ok() && again.error().message == status.error().message);
    const auto fed = parser.feed("x", sink);
    WF_FUZZ_CHECK(!fed.ok() && fed.error().message == status.error().message);
  }
  out.ok = status.ok();
  if (!out.ok) {
    out.code = status.error().code;
    out.message = status.error().message;
    WF_FUZZ_CHECK(!out.message.empty());
  }
  out.events = sink.events();
  out.fields = parser.fields();
  for (const auto& [name, value] : out.fields) {
    WF_FUZZ_CHECK(!name.empty());
    const auto first = parser.field(name);
    WF_FUZZ_CHECK(first.has_value());
  }
  return out;
}

// Events up to an error may legitimately differ in how much file data was handed on before
// the error was found; a successful parse must agree exactly.
void check_same(const Outcome& a, const Outcome& b) {
  WF_FUZZ_CHECK(a.ok == b.ok);
  if (a.ok) {
    WF_FUZZ_CHECK(a.events == b.events);
    WF_FUZZ_CHECK(a.fields == b.fields);
  } else {
    WF_FUZZ_CHECK(a.code == b.code);
    WF_FUZZ_CHECK(a.message == b.message);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t flags = data[0];
  std::string_view rest = wf::fuzz::as_text(data + 1, size - 1);
  const std::size_t count = std::min<std::size_t>(flags & 7U, rest.size());
  std::vector<std::size_t> sizes;
  for (std::size_t i = 0; i < count; ++i) {
    // Chunk sizes 0..255; an empty chunk is a legal call too.
    sizes.push_back(static_cast<unsigned char>(rest[i]));
  }
  rest.remove_prefix(count);
  // Avoid a chunk cycle of only empty chunks.
  bool all_empty = !sizes.empty();
  for (const auto s : sizes) all_empty = all_empty && s == 0;
  if (all_empty) sizes.push_back(1);

  const auto nl = rest.find('\n');
  const std::string_view content_type = rest.substr(0, nl);
  const std::string_view body =
      nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);

  std::string boundary = "fuzzb";
  if (auto parsed = wf::handlers::boundary_from_content_type(content_type)) {
    WF_FUZZ_CHECK(!parsed->empty() && parsed->size() <= 70);
    boundary = std::move(parsed).value();
  } else {
    WF_FUZZ_CHECK(parsed.error().code == wf::Errc::invalid);
  }

  MultipartLimits limits;
  if ((flags & 8U) != 0) {
    limits.max_field_bytes = 64;
    limits.max_parts = 4;
    limits.max_header_bytes = 96;
  }

  const Outcome whole = parse(boundary, limits, body, {});
  const Outcome chunked =
      parse(boundary, limits, body, sizes.empty() ? std::vector<std::size_t>{7} : sizes);
  check_same(whole, chunked);
  if (body.size() <= 4096) check_same(whole, parse(boundary, limits, body, {1}));
  return 0;
}
