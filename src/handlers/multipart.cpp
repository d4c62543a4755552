#include "wheelforge/handlers/multipart.hpp"

#include <algorithm>

#include "wheelforge/util/strings.hpp"

namespace wf::handlers {
namespace {

constexpr std::size_t kMaxBoundaryLength = 70;

bool is_ows(char c) {
  return c == ' ' || c == '\t';
}

// The boundary alphabet (bchars). Restricting it also guarantees that the delimiter holds no CR
// besides its first byte, which the scanner relies on.
bool is_boundary_char(char c) {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  return std::string_view("'()+_,-./:=? ").find(c) != std::string_view::npos;
}

std::optional<std::string> boundary_problem(std::string_view boundary) {
  if (boundary.empty() || boundary.size() > kMaxBoundaryLength) {
    return "multipart boundary must be 1 to 70 characters long";
  }
  if (!std::all_of(boundary.begin(), boundary.end(), is_boundary_char) || boundary.back() == ' ') {
    return "multipart boundary contains characters outside RFC 2046's alphabet";
  }
  return std::nullopt;
}

bool is_token_char(char c) {
  if (c <= ' ' || c >= 127) return false;
  return std::string_view("()<>@,;:\\\"/[]?={}").find(c) == std::string_view::npos;
}

// Header values from clients may carry UTF-8 but never control characters.
bool is_header_text(char c) {
  const auto u = static_cast<unsigned char>(c);
  return c == '\t' || (u >= 0x20 && u != 0x7f);
}

using Parameters = std::vector<std::pair<std::string, std::string>>;

// The `; name=value` list after a media type or disposition type. Names are lower-cased;
// values may be tokens or quoted strings with backslash escapes. Unquoted values accept any
// visible ASCII besides ';' and '"' because clients do not always quote tspecials.
Result<Parameters> parse_parameters(std::string_view s) {
  Parameters out;
  std::size_t i = 0;
  auto skip_ows = [&] {
    while (i < s.size() && is_ows(s[i])) ++i;
  };
  while (true) {
    skip_ows();
    if (i == s.size()) return out;
    if (s[i] != ';') return make_error(Errc::invalid, "expected ';' between parameters");
    ++i;
    skip_ows();
    if (i == s.size()) return out;
    if (s[i] == ';') continue;

    const std::size_t name_start = i;
    while (i < s.size() && is_token_char(s[i])) ++i;
    if (i == name_start) return make_error(Errc::invalid, "malformed parameter name");
    std::string name = to_lower(s.substr(name_start, i - name_start));
    skip_ows();
    if (i == s.size() || s[i] != '=') {
      return make_error(Errc::invalid, "parameter '" + name + "' has no value");
    }
    ++i;
    skip_ows();

    std::string value;
    if (i < s.size() && s[i] == '"') {
      ++i;
      bool closed = false;
      while (i < s.size()) {
        const char c = s[i++];
        if (c == '"') {
          closed = true;
          break;
        }
        if (c == '\\') {
          if (i == s.size()) break;
          value.push_back(s[i++]);
        } else {
          value.push_back(c);
        }
      }
      if (!closed) {
        return make_error(Errc::invalid, "unterminated quoted value of parameter '" + name + "'");
      }
    } else {
      const std::size_t value_start = i;
      while (i < s.size() && s[i] > ' ' && s[i] < 127 && s[i] != ';' && s[i] != '"') ++i;
      if (i == value_start) {
        return make_error(Errc::invalid, "parameter '" + name + "' has no value");
      }
      value = std::string(s.substr(value_start, i - value_start));
    }
    out.emplace_back(std::move(name), std::move(value));
  }
}

// The first value of a parameter; an error when it is given twice, since two values that
// disagree are exactly what lets two parsers see different forms.
Result<std::optional<std::string>> single_parameter(const Parameters& params,
                                                    std::string_view name) {
  std::optional<std::string> found;
  for (const auto& [key, value] : params) {
    if (key != name) continue;
    if (found) return make_error(Errc::invalid, "repeated parameter '" + std::string(name) + "'");
    found = value;
  }
  return found;
}

struct HeaderLine {
  std::string name;
  std::string value;
};

// header_block: the part's header lines, each ending in CRLF, without the blank line.
Result<std::vector<HeaderLine>> parse_header_block(std::string_view header_block) {
  std::vector<HeaderLine> headers;
  std::size_t pos = 0;
  while (pos < header_block.size()) {
    const std::size_t eol = header_block.find("\r\n", pos);
    const std::string_view line = header_block.substr(pos, eol - pos);
    pos = eol + 2;
    if (!std::all_of(line.begin(), line.end(), is_header_text)) {
      return make_error(Errc::invalid, "control character in a header line");
    }
    if (!line.empty() && is_ows(line.front())) {
      // obs-fold: a continuation of the previous header's value.
      if (headers.empty()) return make_error(Errc::invalid, "header block starts with a space");
      headers.back().value += ' ';
      headers.back().value += trim(line);
      continue;
    }
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos)
      return make_error(Errc::invalid, "header line without ':'");
    const std::string_view name = line.substr(0, colon);
    if (name.empty() || !std::all_of(name.begin(), name.end(), is_token_char)) {
      return make_error(Errc::invalid, "malformed header name");
    }
    headers.push_back({to_lower(name), std::string(trim(line.substr(colon + 1)))});
  }
  return headers;
}

struct Disposition {
  std::string name;
  std::optional<std::string> filename;
};

Result<Disposition> parse_disposition(std::string_view value) {
  const std::size_t semi = value.find(';');
  const std::string_view type = trim(value.substr(0, semi));
  if (!iequals(type, "form-data")) {
    return make_error(Errc::invalid, "Content-Disposition is not form-data");
  }
  auto params = parse_parameters(semi == std::string_view::npos ? "" : value.substr(semi));
  if (!params) return params.error();
  auto name = single_parameter(*params, "name");
  if (!name) return name.error();
  if (!name->has_value() || (*name)->empty()) {
    return make_error(Errc::invalid, "Content-Disposition has no name");
  }
  // `filename*` (the extended-parameter encoding) is a different parameter name and
  // deliberately ignored: form-data forbids it and none of the upload clients sends it.
  auto filename = single_parameter(*params, "filename");
  if (!filename) return filename.error();
  return Disposition{std::move(**name), std::move(*filename)};
}

}  // namespace

Result<std::string> boundary_from_content_type(std::string_view content_type) {
  const std::size_t semi = content_type.find(';');
  if (!iequals(trim(content_type.substr(0, semi)), "multipart/form-data")) {
    return make_error(Errc::invalid, "expected multipart/form-data");
  }
  if (semi == std::string_view::npos) return make_error(Errc::invalid, "missing boundary");
  auto params = parse_parameters(content_type.substr(semi));
  if (!params) {
    return make_error(Errc::invalid, "malformed Content-Type: " + params.error().message);
  }
  auto boundary = single_parameter(*params, "boundary");
  if (!boundary) {
    return make_error(Errc::invalid, "malformed Content-Type: " + boundary.error().message);
  }
  if (!boundary->has_value()) return make_error(Errc::invalid, "missing boundary");
  if (auto problem = boundary_problem(**boundary)) return make_error(Errc::invalid, *problem);
  return std::move(**boundary);
}

MultipartParser::MultipartParser(const std::string& boundary, MultipartLimits limits)
    : delimiter_("\r\n--" + boundary), limits_(limits) {
  if (auto problem = boundary_problem(boundary)) {
    state_ = State::failed;
    error_ = make_error(Errc::invalid, *problem);
  }
  // The first delimiter may open the body without a preceding line break; a CRLF
  // assumed before the first byte lets one scanner serve both cases.
  held_ = "\r\n";
}

std::optional<std::string_view> MultipartParser::field(std::string_view name) const {
  for (const auto& [key, value] : fields_) {
    if (key == name) return std::string_view(value);
  }
  return std::nullopt;
}

Status MultipartParser::fail(Error error) {
  state_ = State::failed;
  error_ = std::move(error);
  return *error_;
}

std::string MultipartParser::part_label() const {
  std::string label = "part " + std::to_string(part_count_);
  if (!part_name_.empty()) label += " ('" + sanitize_for_log(part_name_, 80) + "')";
  return label;
}

Status MultipartParser::feed(std::string_view chunk, MultipartSink& sink) {
  std::size_t pos = 0;
  while (pos < chunk.size()) {
    Status step = ok_status();
    switch (state_) {
      case State::failed:
        return *error_;
      case State::epilogue:
        return ok_status();
      case State::preamble:
      case State::body:
        step = scan_for_delimiter(chunk, pos, sink);
        break;
      case State::boundary_line:
        step = boundary_line_byte(chunk[pos++]);
        break;
      case State::headers:
        step = headers_bytes(chunk, pos, sink);
        break;
    }
    if (!step) return fail(step.error());
  }
  if (state_ == State::failed) return *error_;
  return ok_status();
}

Status MultipartParser::finish() {
  switch (state_) {
    case State::failed:
      return *error_;
    case State::epilogue:
      return ok_status();
    case State::preamble:
      return fail(make_error(Errc::invalid, "truncated multipart body: no boundary found"));
    case State::boundary_line:
      return fail(make_error(Errc::invalid, "truncated multipart body: inside a boundary line"));
    case State::headers:
      return fail(make_error(Errc::invalid,
                             "truncated multipart body: inside the headers of " + part_label()));
    case State::body:
      return fail(make_error(
          Errc::invalid, "truncated multipart body: " + part_label() + " has no closing boundary"));
  }
  return ok_status();
}

Status MultipartParser::scan_for_delimiter(std::string_view chunk, std::size_t& pos,
                                           MultipartSink& sink) {
  const std::string_view delimiter = delimiter_;
  bool found = false;

  if (!held_.empty()) {
    const std::size_t have = held_.size();
    const std::size_t n = std::min(delimiter.size() - have, chunk.size() - pos);
    if (chunk.substr(pos, n) == delimiter.substr(have, n)) {
      pos += n;
      if (have + n < delimiter.size()) {
        held_.append(chunk.substr(pos - n, n));
        return ok_status();
      }
      held_.clear();
      found = true;
    } else {
      // held_ starts with the delimiter's only CR, so no delimiter can start inside it: all of
      // it is data, and the chunk is scanned from where it was.
      std::string data = std::move(held_);
      held_.clear();
      if (auto s = emit(data, sink); !s) return s;
    }
  }

  if (!found) {
    const std::size_t data_start = pos;
    std::size_t search = pos;
    while (true) {
      const std::size_t cr = chunk.find('\r', search);
      if (cr == std::string_view::npos) {
        pos = chunk.size();
        return emit(chunk.substr(data_start), sink);
      }
      const std::size_t n = std::min(delimiter.size(), chunk.size() - cr);
      if (chunk.substr(cr, n) == delimiter.substr(0, n)) {
        if (auto s = emit(chunk.substr(data_start, cr - data_start), sink); !s) return s;
        if (n < delimiter.size()) {
          held_ = std::string(chunk.substr(cr));
          pos = chunk.size();
          return ok_status();
        }
        pos = cr + n;
        break;
      }
      search = cr + 1;
    }
  }

  if (state_ == State::body) {
    if (auto s = end_part(sink); !s) return s;
  }
  state_ = State::boundary_line;
  line_state_ = LineState::start;
  padding_bytes_ = 0;
  return ok_status();
}

Status MultipartParser::emit(std::string_view bytes, MultipartSink& sink) {
  if (state_ != State::body || bytes.empty()) return ok_status();
  if (part_is_file_) return sink.on_file_data(bytes);
  field_bytes_ += bytes.size();
  if (field_bytes_ > limits_.max_field_bytes) {
    return make_error(Errc::too_large, "form fields exceed " +
                                           std::to_string(limits_.max_field_bytes) + " bytes (at " +
                                           part_label() + ")");
  }
  field_value_.append(bytes);
  return ok_status();
}

Status MultipartParser::end_part(MultipartSink& sink) {
  if (part_is_file_) {
    part_is_file_ = false;
    part_name_.clear();
    return sink.on_file_end();
  }
  fields_.emplace_back(std::move(part_name_), std::move(field_value_));
  part_name_.clear();
  field_value_.clear();
  return ok_status();
}

// The boundary is matched as a prefix of a line, so `--boundary` followed by anything
// but `--`, transport padding or CRLF is a broken body rather than data.
Status MultipartParser::boundary_line_byte(char c) {
  auto malformed = [] { return make_error(Errc::invalid, "malformed multipart boundary line"); };
  switch (line_state_) {
    case LineState::start:
      if (c == '-') {
        line_state_ = LineState::dash;
        return ok_status();
      }
      break;
    case LineState::dash:
      if (c != '-') return malformed();
      state_ = State::epilogue;
      return ok_status();
    case LineState::padding:
      break;
    case LineState::cr:
      if (c != '\n') return malformed();
      ++part_count_;
      if (part_count_ > limits_.max_parts) {
        return make_error(Errc::invalid, "too many multipart parts (more than " +
                                             std::to_string(limits_.max_parts) + ")");
      }
      state_ = State::headers;
      header_buf_ = "\r\n";
      return ok_status();
  }
  // Transport padding (whitespace before the CRLF), bounded like a header.
  if (is_ows(c)) {
    line_state_ = LineState::padding;
    if (++padding_bytes_ > limits_.max_header_bytes) return malformed();
    return ok_status();
  }
  if (c == '\r') {
    line_state_ = LineState::cr;
    return ok_status();
  }
  return malformed();
}

Status MultipartParser::headers_bytes(std::string_view chunk, std::size_t& pos,
                                      MultipartSink& sink) {
  // header_buf_ starts with an assumed CRLF so that an empty header block (the blank line
  // right after the boundary line) ends at the same CRLF CRLF as any other.
  const std::size_t limit = limits_.max_header_bytes + 2;
  const std::size_t old_size = header_buf_.size();
  const std::size_t take = std::min(limit - std::min(limit, old_size), chunk.size() - pos);
  header_buf_.append(chunk.substr(pos, take));

  const std::size_t end = header_buf_.find("\r\n\r\n", old_size >= 3 ? old_size - 3 : 0);
  if (end == std::string::npos) {
    pos += take;
    if (header_buf_.size() >= limit) {
      return make_error(Errc::invalid, "malformed part header: headers of " + part_label() +
                                           " exceed " + std::to_string(limits_.max_header_bytes) +
                                           " bytes");
    }
    return ok_status();
  }
  pos += end + 4 - old_size;
  const std::string block = header_buf_.substr(2, end);
  header_buf_.clear();
  return start_part(block, sink);
}

Status MultipartParser::start_part(std::string_view header_block, MultipartSink& sink) {
  auto headers = parse_header_block(header_block);
  if (!headers) {
    return make_error(Errc::invalid,
                      "malformed part header in " + part_label() + ": " + headers.error().message);
  }
  const HeaderLine* disposition = nullptr;
  for (const auto& h : *headers) {
    if (h.name != "content-disposition") continue;
    if (disposition != nullptr) {
      return make_error(Errc::invalid, "malformed part header in " + part_label() +
                                           ": repeated Content-Disposition");
    }
    disposition = &h;
  }
  if (disposition == nullptr) {
    return make_error(Errc::invalid,
                      "malformed part header in " + part_label() + ": missing Content-Disposition");
  }
  auto parsed = parse_disposition(disposition->value);
  if (!parsed) {
    return make_error(Errc::invalid,
                      "malformed part header in " + part_label() + ": " + parsed.error().message);
  }

  part_name_ = std::move(parsed->name);
  state_ = State::body;
  if (parsed->filename) {
    part_is_file_ = true;
    return sink.on_file_start(part_name_, *parsed->filename);
  }
  part_is_file_ = false;
  field_value_.clear();
  // Names count against the cap too, so that many small parts cannot grow memory unbounded.
  field_bytes_ += part_name_.size();
  if (field_bytes_ > limits_.max_field_bytes) {
    return make_error(Errc::too_large, "form fields exceed " +
                                           std::to_string(limits_.max_field_bytes) + " bytes (at " +
                                           part_label() + ")");
  }
  return ok_status();
}

}  // namespace wf::handlers
