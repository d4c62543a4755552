#include "wheelforge/render/simple.hpp"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <climits>
#include <cstdint>
#include <new>
#include <stdexcept>

#include "render/json_text.hpp"
#include "wheelforge/util/strings.hpp"
#include "wheelforge/util/time.hpp"

namespace wf::render {
namespace {

// JSON pages are written by appending, like the HTML ones: building a json tree for a project
// with a thousand files costs several milliseconds, most of it in per-character escaping of
// strings that need none. Keys come out in a fixed order, so pages stay byte-stable for ETags.
using detail::Json;

constexpr std::string_view kHtmlHead =
    "<!DOCTYPE html>\n<html><head><meta name=\"pypi:repository-version\" content=\"1.1\">";
constexpr std::string_view kHtmlTail = "</body></html>\n";

// Names, hashes and URLs almost never need escaping; checking first avoids one allocation
// per attribute on pages with thousands of files.
void append_escaped(std::string& out, std::string_view s) {
  // A plain loop: find_first_of calls memchr once per character, several times slower.
  const bool plain = std::none_of(s.begin(), s.end(), [](char c) {
    return c == '&' || c == '<' || c == '>' || c == '"' || c == '\'';
  });
  if (plain) {
    out += s;
  } else {
    out += html_escape(s);
  }
}

void append_file_url(std::string& out, const core::FileRecord& file) {
  if (file.upstream.empty()) {
    out += "/files/";
  } else {
    out += "/upstream/";
    out += file.upstream;
    out += '/';
  }
  out += file.sha256;
  out += '/';
  out += percent_encode_path(file.filename);
}

bool has_provenance(const core::FileRecord& file) {
  return file.upstream.empty() && !file.provenance_sha256.empty();
}

// Root-relative like the file URLs, so that it resolves from /simple/ and from every view's
// pages alike (the Integrity API's path: docs/packaging.md, "Provenance").
void append_provenance_url(std::string& out, const core::FileRecord& file) {
  out += "/integrity/";
  out += percent_encode_path(file.project);
  out += '/';
  out += percent_encode_path(file.version);
  out += '/';
  out += percent_encode_path(file.filename);
  out += "/provenance";
}

void append_json_string(std::string& out, std::string_view s) {
  const bool plain = std::all_of(
      s.begin(), s.end(), [](char c) { return c >= 0x20 && c < 0x7F && c != '"' && c != '\\'; });
  if (plain) {
    out += '"';
    out += s;
    out += '"';
    return;
  }
  // nlohmann does the escaping and UTF-8 validation; a stray non-UTF-8 byte in a stored field
  // must degrade to U+FFFD rather than throw and turn a listing into a 500.
  out += Json(s).dump(-1, ' ', false, Json::error_handler_t::replace);
}

void append_json_number(std::string& out, std::uint64_t n) {
  std::array<char, 24> buf{};
  const auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), n);
  out.append(buf.data(), end);
}

bool is_html(core::PageFormat format) {
  return format != core::PageFormat::json_v1;
}

std::string render_root_html(std::span<const std::string> project_names, std::string_view prefix) {
  std::string out;
  out.reserve(kHtmlHead.size() + 128 + project_names.size() * (prefix.size() + 48));
  out += kHtmlHead;
  out += "<title>Simple index</title></head><body><h1>Simple index</h1>\n";
  for (const std::string& name : project_names) {
    out += "<a href=\"";
    append_escaped(out, prefix);
    append_escaped(out, name);
    out += "/\">";
    append_escaped(out, name);
    out += "</a><br/>\n";
  }
  out += kHtmlTail;
  return out;
}

std::string render_root_json(std::span<const std::string> project_names) {
  std::string out;
  out.reserve(64 + project_names.size() * 40);
  out += R"({"meta":{"api-version":"1.1"},"projects":[)";
  for (std::size_t i = 0; i < project_names.size(); ++i) {
    out += (i > 0) ? R"(,{"name":)" : R"({"name":)";
    append_json_string(out, project_names[i]);
    out += '}';
  }
  out += "]}";
  return out;
}

void append_file_anchor(std::string& out, const core::FileRecord& file) {
  out += "<a href=\"";
  append_file_url(out, file);
  out += "#sha256=";
  append_escaped(out, file.sha256);
  out += '"';
  if (file.requires_python) {
    out += " data-requires-python=\"";
    append_escaped(out, *file.requires_python);
    out += '"';
  }
  if (!file.metadata_sha256.empty()) {
    // pip before 23.2 reads only the old spelling, later clients the new one (docs/packaging.md,
    // "Metadata files").
    for (const std::string_view attr :
         {" data-core-metadata=\"sha256=", " data-dist-info-metadata=\"sha256="}) {
      out += attr;
      append_escaped(out, file.metadata_sha256);
      out += '"';
    }
  }
  if (file.yanked) {
    // pip treats a bare data-yanked attribute as not yanked, so the value is always written
    // (docs/clients.md, "pip").
    out += " data-yanked=\"";
    append_escaped(out, *file.yanked);
    out += '"';
  }
  if (has_provenance(file)) {
    // PEP 740: the URL of the file's provenance object (docs/packaging.md, "Provenance").
    out += " data-provenance=\"";
    append_provenance_url(out, file);  // percent-encoded: nothing in it needs HTML escaping
    out += '"';
  }
  out += '>';
  append_escaped(out, file.filename);
  out += "</a><br/>\n";
}

std::string render_project_html(const ProjectPage& page) {
  std::string out;
  out.reserve(kHtmlHead.size() + 128 + 2 * page.name.size() + page.files.size() * 512);
  out += kHtmlHead;
  out += "<title>Links for ";
  append_escaped(out, page.name);
  out += "</title></head><body><h1>Links for ";
  append_escaped(out, page.name);
  out += "</h1>\n";
  for (const auto& stale : page.stale) {
    // Upstream names are [a-z0-9-]: nothing in them can end the comment.
    out += "<!-- upstream ";
    out += stale.name;
    out += ": its files are listed from a cached page ";
    append_json_number(out,
                       static_cast<std::uint64_t>(std::max<std::int64_t>(0, stale.age_seconds)));
    out += " s old; the upstream could not be reached -->\n";
  }
  for (const core::FileRecord* file : page.files) append_file_anchor(out, *file);
  for (const ExtraLink& extra : page.extras) {
    out += "<a href=\"";
    append_escaped(out, extra.url);
    out += "#sha256=";
    append_escaped(out, extra.sha256);
    out += "\">";
    append_escaped(out, extra.filename);
    out += "</a><br/>\n";
  }
  out += kHtmlTail;
  return out;
}

void append_file_json(std::string& out, const core::FileRecord& file) {
  out += R"({"filename":)";
  append_json_string(out, file.filename);
  out += R"(,"url":)";
  append_json_string(out, file_url(file));
  out += R"(,"hashes":{"sha256":)";
  append_json_string(out, file.sha256);
  out += '}';
  if (file.requires_python) {
    out += R"(,"requires-python":)";
    append_json_string(out, *file.requires_python);
  }
  // Only the new key: pip before 23.2 fails on "dist-info-metadata" in JSON (docs/packaging.md,
  // "Metadata files").
  if (file.metadata_sha256.empty()) {
    out += R"(,"core-metadata":false)";
  } else {
    out += R"(,"core-metadata":{"sha256":)";
    append_json_string(out, file.metadata_sha256);
    out += '}';
  }
  if (!file.yanked) {
    out += R"(,"yanked":false)";
  } else if (file.yanked->empty()) {
    out += R"(,"yanked":true)";
  } else {
    out += R"(,"yanked":)";
    append_json_string(out, *file.yanked);
  }
  // An upstream file's size and upload time are known only when its index gave them.
  if (file.upstream.empty() || file.size != 0) {
    out += R"(,"size":)";
    append_json_number(out, file.size);
  }
  if (file.upstream.empty() || file.upload_time != 0) {
    out += R"(,"upload-time":)";
    append_json_string(out, iso8601_micros(file.upload_time));
  }
  if (has_provenance(file)) {
    out += R"(,"provenance":")";
    append_provenance_url(out, file);  // percent-encoded: nothing in it needs JSON escaping
    out += '"';
  }
  out += '}';
}

std::string render_project_json(const ProjectPage& page) {
  std::string out;
  out.reserve(128 + page.name.size() + page.versions.size() * 24 + page.files.size() * 512);
  out += R"({"meta":{"api-version":"1.1")";
  if (!page.stale.empty()) {
    // Keys of a server's own start with '_' (PEP 691, "Project detail").
    out += R"(,"_stale-upstreams":[)";
    for (std::size_t i = 0; i < page.stale.size(); ++i) {
      if (i > 0) out += ',';
      out += R"({"name":)";
      append_json_string(out, page.stale[i].name);
      out += R"(,"age-seconds":)";
      append_json_number(
          out, static_cast<std::uint64_t>(std::max<std::int64_t>(0, page.stale[i].age_seconds)));
      out += '}';
    }
    out += ']';
  }
  out += R"(},"name":)";
  append_json_string(out, page.name);
  out += R"(,"versions":[)";
  for (std::size_t i = 0; i < page.versions.size(); ++i) {
    if (i > 0) out += ',';
    append_json_string(out, page.versions[i]);
  }
  out += R"(],"files":[)";
  for (std::size_t i = 0; i < page.files.size(); ++i) {
    if (i > 0) out += ',';
    append_file_json(out, *page.files[i]);
  }
  for (std::size_t i = 0; i < page.extras.size(); ++i) {
    const ExtraLink& extra = page.extras[i];
    if (i > 0 || !page.files.empty()) out += ',';
    out += R"({"filename":)";
    append_json_string(out, extra.filename);
    out += R"(,"url":)";
    append_json_string(out, extra.url);
    out += R"(,"hashes":{"sha256":)";
    append_json_string(out, extra.sha256);
    out += R"(},"yanked":false,"size":)";
    append_json_number(out, extra.size);
    out += '}';
  }
  out += "]}";
  return out;
}

// Owns a deflate stream so that every exit path releases zlib's state.
class Deflater {
 public:
  explicit Deflater(int level) {
    // 15 + 16: largest window, gzip wrapper instead of the zlib one.
    const int rc = deflateInit2(&stream_, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
    if (rc == Z_MEM_ERROR) throw std::bad_alloc();
    if (rc != Z_OK) throw std::logic_error("deflateInit2 rejected its parameters");
  }
  ~Deflater() { deflateEnd(&stream_); }
  Deflater(const Deflater&) = delete;
  Deflater& operator=(const Deflater&) = delete;

  z_stream& stream() { return stream_; }

 private:
  z_stream stream_{};
};

}  // namespace

std::string file_url(const core::FileRecord& file) {
  std::string url;
  url.reserve(80 + file.filename.size());
  append_file_url(url, file);
  return url;
}

std::string provenance_url(const core::FileRecord& file) {
  std::string url;
  if (!has_provenance(file)) return url;
  url.reserve(48 + file.project.size() + file.version.size() + file.filename.size());
  append_provenance_url(url, file);
  return url;
}

std::string render_root(core::PageFormat format, std::span<const std::string> project_names,
                        std::string_view prefix) {
  return is_html(format) ? render_root_html(project_names, prefix)
                         : render_root_json(project_names);
}

std::string render_project(core::PageFormat format, const ProjectPage& page) {
  return is_html(format) ? render_project_html(page) : render_project_json(page);
}

std::string gzip(std::string_view bytes, int level) {
  Deflater deflater(std::clamp(level, 1, 9));
  z_stream& zs = deflater.stream();

  std::string out;
  out.resize(deflateBound(&zs, static_cast<uLong>(bytes.size())));
  std::size_t in_pos = 0;
  std::size_t out_pos = 0;
  // zlib counts in uInt, so inputs and outputs beyond 4 GiB are fed in slices.
  constexpr std::size_t kMaxSlice = UINT_MAX;
  for (;;) {
    if (zs.avail_in == 0 && in_pos < bytes.size()) {
      const std::size_t slice = std::min(bytes.size() - in_pos, kMaxSlice);
      // zlib's next_in is non-const only for historical reasons; it never writes the input.
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data() + in_pos));
      zs.avail_in = static_cast<uInt>(slice);
      in_pos += slice;
    }
    if (out_pos == out.size()) out.resize(out.size() * 2 + 64);
    const std::size_t room = std::min(out.size() - out_pos, kMaxSlice);
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + out_pos);
    zs.avail_out = static_cast<uInt>(room);
    const int flush = (in_pos == bytes.size()) ? Z_FINISH : Z_NO_FLUSH;
    const int rc = deflate(&zs, flush);
    out_pos += room - zs.avail_out;
    if (rc == Z_STREAM_END) break;
    if (rc != Z_OK && rc != Z_BUF_ERROR) throw std::logic_error("deflate failed");
  }
  out.resize(out_pos);
  return out;
}

}  // namespace wf::render
