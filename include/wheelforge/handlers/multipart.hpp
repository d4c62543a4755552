#pragma once
// Streaming multipart/form-data (docs/formats.md, "multipart/form-data"), as sent by twine,
// poetry and pdm to `POST /legacy/`. Pure: bytes in, callbacks and collected fields out. The body
// arrives in chunks of any size; file parts are handed on piece by piece and never held whole, so a
// several-GB wheel costs no more memory than one chunk plus a boundary.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wheelforge/util/result.hpp"

namespace wf::handlers {

/// The boundary of a `multipart/form-data` Content-Type header value (type and parameter names
/// are case-insensitive; the boundary may be a token or a quoted string).
/// Errc::invalid when the type is not multipart/form-data ("expected multipart/form-data"),
/// the boundary parameter is absent ("missing boundary") or repeated, or the boundary is not
/// 1..70 characters of the boundary alphabet.
[[nodiscard]] Result<std::string> boundary_from_content_type(std::string_view content_type);

/// Receives the parts that carry a `filename` parameter. Any error returned from a callback
/// stops parsing and is returned from MultipartParser::feed().
class MultipartSink {
 public:
  virtual ~MultipartSink() = default;
  /// A file part begins. filename is the decoded `filename` parameter (possibly empty).
  virtual Status on_file_start(std::string_view field_name, std::string_view filename) = 0;
  /// The next bytes of the current file part; never empty.
  virtual Status on_file_data(std::string_view bytes) = 0;
  /// The current file part ended at a boundary. Not called when the body is truncated or
  /// malformed: then feed() or finish() fails and whatever the sink wrote must be discarded.
  virtual Status on_file_end() = 0;
};

struct MultipartLimits {
  /// Total bytes of all non-file fields, names and values together.
  std::size_t max_field_bytes = std::size_t{1} << 20U;
  std::size_t max_parts = 1000;
  /// Bytes of the header block of one part.
  std::size_t max_header_bytes = 8 * 1024;
};

/// Incremental parser of one multipart/form-data body. Call feed() for each chunk as it
/// arrives, then finish() once. After any error every later call returns that same error.
/// Not thread-safe; keeps no reference to the chunks it was fed.
class MultipartParser {
 public:
  /// boundary: as returned by boundary_from_content_type(). An invalid boundary is reported by
  /// the first feed() or finish().
  explicit MultipartParser(const std::string& boundary, MultipartLimits limits = {});

  /// Consumes the next chunk of the body (any size, split anywhere). Text before the first
  /// boundary and after the closing boundary is ignored (the preamble and the epilogue).
  /// Errors: Errc::invalid for malformed boundary lines or part headers, a part without a
  /// form-data Content-Disposition or without a name, or more than max_parts parts;
  /// Errc::too_large when the non-file fields exceed max_field_bytes; any sink error as is.
  [[nodiscard]] Status feed(std::string_view chunk, MultipartSink& sink);

  /// Declares the end of the body. Errc::invalid ("truncated multipart body: ...") when the
  /// closing boundary `--boundary--` has not been seen.
  [[nodiscard]] Status finish();

  /// The non-file fields completed so far, in body order, repeated names kept.
  [[nodiscard]] const std::vector<std::pair<std::string, std::string>>& fields() const {
    return fields_;
  }
  /// The value of the first field with this exact name, or nullopt.
  [[nodiscard]] std::optional<std::string_view> field(std::string_view name) const;

 private:
  enum class State { preamble, boundary_line, headers, body, epilogue, failed };
  enum class LineState { start, dash, padding, cr };

  Status fail(Error error);
  Status scan_for_delimiter(std::string_view chunk, std::size_t& pos, MultipartSink& sink);
  Status emit(std::string_view bytes, MultipartSink& sink);
  Status end_part(MultipartSink& sink);
  Status boundary_line_byte(char c);
  Status headers_bytes(std::string_view chunk, std::size_t& pos, MultipartSink& sink);
  Status start_part(std::string_view header_block, MultipartSink& sink);
  [[nodiscard]] std::string part_label() const;

  std::string delimiter_;  // CRLF "--" boundary
  MultipartLimits limits_;
  State state_ = State::preamble;
  std::optional<Error> error_;

  // A proper prefix of delimiter_ seen at the end of the previous chunk; its bytes are
  // either the start of the delimiter or data, which the next chunk decides.
  std::string held_;
  LineState line_state_ = LineState::start;
  std::size_t padding_bytes_ = 0;
  std::string header_buf_;

  std::size_t part_count_ = 0;
  bool part_is_file_ = false;
  std::string part_name_;
  std::string field_value_;
  std::size_t field_bytes_ = 0;
  std::vector<std::pair<std::string, std::string>> fields_;
};

}  // namespace wf::handlers
