#include "wheelforge/handlers/multipart.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

namespace wf::handlers {
namespace {

using Fields = std::vector<std::pair<std::string, std::string>>;

struct FilePart {
  std::string name;
  std::string filename;
  std::string data;
  bool ended = false;
};

// Records what the parser hands on, and how big the pieces were.
class RecordingSink : public MultipartSink {
 public:
  Status on_file_start(std::string_view field_name, std::string_view filename) override {
    EXPECT_TRUE(files.empty() || files.back().ended) << "file started inside another";
    files.push_back({std::string(field_name), std::string(filename), "", false});
    return ok_status();
  }
  Status on_file_data(std::string_view bytes) override {
    EXPECT_FALSE(files.empty());
    EXPECT_FALSE(bytes.empty());
    if (files.empty()) return make_error(Errc::internal, "data without a file");
    files.back().data.append(bytes);
    largest_piece = std::max(largest_piece, bytes.size());
    ++pieces;
    if (fail_data_after != 0 && pieces >= fail_data_after) {
      return make_error(Errc::storage_full, "disk full");
    }
    return ok_status();
  }
  Status on_file_end() override {
    EXPECT_FALSE(files.empty());
    if (files.empty()) return make_error(Errc::internal, "end without a file");
    files.back().ended = true;
    return ok_status();
  }

  std::vector<FilePart> files;
  std::size_t largest_piece = 0;
  std::size_t pieces = 0;
  std::size_t fail_data_after = 0;
};

struct Outcome {
  std::optional<Error> error;  // from the first failing feed() or finish()
  Fields fields;
  std::vector<FilePart> files;
  std::size_t largest_piece = 0;
};

// Feeds body cut at the given offsets (ascending), then finishes.
Outcome parse_split(std::string_view body, const std::vector<std::size_t>& cuts,
                    std::string boundary, MultipartLimits limits = {}) {
  MultipartParser parser(std::move(boundary), limits);
  RecordingSink sink;
  Outcome out;
  std::size_t start = 0;
  auto feed = [&](std::string_view chunk) {
    if (out.error) return;
    auto s = parser.feed(chunk, sink);
    if (!s) out.error = s.error();
  };
  for (std::size_t cut : cuts) {
    feed(body.substr(start, cut - start));
    start = cut;
  }
  feed(body.substr(start));
  if (!out.error) {
    auto s = parser.finish();
    if (!s) out.error = s.error();
  }
  out.fields = parser.fields();
  out.files = sink.files;
  out.largest_piece = sink.largest_piece;
  return out;
}

Outcome parse_whole(std::string_view body, std::string boundary, MultipartLimits limits = {}) {
  return parse_split(body, {}, std::move(boundary), limits);
}

constexpr std::string_view kBoundary = "5d2f0b1e8c9a4736b1c2d3e4f5a6b7c8";

std::string field_part(std::string_view boundary, std::string_view name, std::string_view value) {
  return "--" + std::string(boundary) + "\r\nContent-Disposition: form-data; name=\"" +
         std::string(name) + "\"\r\n\r\n" + std::string(value) + "\r\n";
}

std::string file_part(std::string_view boundary, std::string_view name, std::string_view filename,
                      std::string_view content) {
  return "--" + std::string(boundary) + "\r\nContent-Disposition: form-data; name=\"" +
         std::string(name) + "\"; filename=\"" + std::string(filename) +
         "\"\r\nContent-Type: application/octet-stream\r\n\r\n" + std::string(content) + "\r\n";
}

std::string close_delimiter(std::string_view boundary) {
  return "--" + std::string(boundary) + "--\r\n";
}

// Wheel bytes that look as much like framing as they can without being a delimiter.
std::string tricky_content() {
  std::string c = "PK\x03\x04";
  for (int i = 0; i < 256; ++i) c.push_back(static_cast<char>(i));
  c += "\r\n\r\n--\r\n-- \r\n\r\r\n\n\r";
  c += "\r\n--";
  c += std::string(kBoundary.substr(0, 10));  // a delimiter prefix, then data
  c += "\r\n--";
  c += std::string(kBoundary.substr(0, kBoundary.size() - 1)) + "X";  // one byte short of one
  c += "--" + std::string(kBoundary) + "\r\n";  // a boundary not at a line start
  c += "\r\r\n-\r\n--";
  c += std::string(1, '\0') + "tail\r";  // ends in CR right before the real delimiter
  return c;
}

const Fields& twine_fields() {
  static const Fields fields = {
      {":action", "file_upload"},
      {"protocol_version", "1"},
      {"metadata_version", "2.1"},
      {"name", "demo-ext"},
      {"version", "1.0+cu121"},
      {"filetype", "bdist_wheel"},
      {"pyversion", "cp311"},
      {"summary", ""},
      {"description", "# demo\r\n\r\n--not a boundary--\r\n"},
      {"classifiers", "Programming Language :: Python :: 3"},
      {"classifiers", "Environment :: GPU :: NVIDIA CUDA :: 12"},
      {"classifiers", "License :: OSI Approved :: MIT License"},
      {"requires_dist", ""},
      {"md5_digest", "0123456789abcdef0123456789abcdef"},
      {"sha256_digest", std::string(64, 'a')},
      {"blake2_256_digest", std::string(64, 'b')},
  };
  return fields;
}

std::string upload_body(const Fields& fields) {
  std::string body;
  for (const auto& [name, value] : fields) body += field_part(kBoundary, name, value);
  body += file_part(kBoundary, "content", "demo_ext-1.0+cu121-cp311-cp311-linux_x86_64.whl",
                    tricky_content());
  body += close_delimiter(kBoundary);
  return body;
}

std::string twine_body() {
  return upload_body(twine_fields());
}

void expect_upload(const Outcome& out, const Fields& fields, const std::string& context) {
  ASSERT_FALSE(out.error) << context << ": " << out.error->message;
  EXPECT_EQ(out.fields, fields) << context;
  ASSERT_EQ(out.files.size(), 1U) << context;
  EXPECT_EQ(out.files[0].name, "content") << context;
  EXPECT_EQ(out.files[0].filename, "demo_ext-1.0+cu121-cp311-cp311-linux_x86_64.whl") << context;
  EXPECT_TRUE(out.files[0].data == tricky_content()) << context;
  EXPECT_TRUE(out.files[0].ended) << context;
}

void expect_twine_result(const Outcome& out, const std::string& context) {
  expect_upload(out, twine_fields(), context);
}

// ---------------------------------------------------------------------------------------------
// boundary_from_content_type

TEST(BoundaryFromContentType, AcceptsTokenAndQuotedBoundaries) {
  auto b = boundary_from_content_type("multipart/form-data; boundary=5d2f0b1e8c9a4736");
  ASSERT_TRUE(b);
  EXPECT_EQ(*b, "5d2f0b1e8c9a4736");

  b = boundary_from_content_type("Multipart/Form-Data;BOUNDARY=\"a b'()+_,-./:=?z\"");
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ(*b, "a b'()+_,-./:=?z");

  b = boundary_from_content_type("  multipart/form-data ; charset=utf-8 ;  boundary = xyz ; ");
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ(*b, "xyz");

  b = boundary_from_content_type("multipart/form-data; boundary=\"q\\\"\"");
  EXPECT_FALSE(b);  // an escaped quote is decoded, and '"' is no boundary character

  b = boundary_from_content_type("multipart/form-data; boundary=" + std::string(70, 'x'));
  EXPECT_TRUE(b);
}

TEST(BoundaryFromContentType, RejectsOtherTypes) {
  for (std::string_view ct :
       {"", "text/plain", "multipart/mixed; boundary=x", "application/x-www-form-urlencoded",
        "multipart/form-datax; boundary=x"}) {
    auto b = boundary_from_content_type(ct);
    ASSERT_FALSE(b) << ct;
    EXPECT_EQ(b.error().code, Errc::invalid);
    EXPECT_EQ(b.error().message, "expected multipart/form-data") << ct;
  }
}

TEST(BoundaryFromContentType, RejectsMissingOrBadBoundary) {
  for (std::string_view ct :
       {"multipart/form-data", "multipart/form-data;", "multipart/form-data; charset=utf-8"}) {
    auto b = boundary_from_content_type(ct);
    ASSERT_FALSE(b) << ct;
    EXPECT_EQ(b.error().message, "missing boundary") << ct;
  }
  const std::string too_long = "multipart/form-data; boundary=" + std::string(71, 'x');
  for (std::string_view ct :
       {std::string_view("multipart/form-data; boundary=\"\""), std::string_view(too_long),
        std::string_view("multipart/form-data; boundary=a;boundary=b"),
        std::string_view("multipart/form-data; boundary=\"unterminated"),
        std::string_view("multipart/form-data; boundary=\"ends with space \""),
        std::string_view("multipart/form-data; boundary=a*b"),
        std::string_view("multipart/form-data; boundary="),
        std::string_view("multipart/form-data boundary=x")}) {
    auto b = boundary_from_content_type(ct);
    ASSERT_FALSE(b) << ct;
    EXPECT_EQ(b.error().code, Errc::invalid) << ct;
  }
}

// ---------------------------------------------------------------------------------------------
// A twine-like upload, cut in every way

TEST(MultipartParser, TwineBodyWhole) {
  expect_twine_result(parse_whole(twine_body(), std::string(kBoundary)), "whole");
}

TEST(MultipartParser, TwineBodyByteByByte) {
  const std::string body = twine_body();
  std::vector<std::size_t> cuts;
  for (std::size_t i = 1; i < body.size(); ++i) cuts.push_back(i);
  const Outcome out = parse_split(body, cuts, std::string(kBoundary));
  expect_twine_result(out, "byte by byte");
  // Nothing is held back beyond what could still turn out to be a delimiter.
  EXPECT_LE(out.largest_piece, kBoundary.size() + 4);
}

TEST(MultipartParser, TwineBodyEveryTwoWaySplit) {
  const std::string body = twine_body();
  for (std::size_t i = 0; i <= body.size(); ++i) {
    expect_twine_result(parse_split(body, {i}, std::string(kBoundary)),
                        "split at " + std::to_string(i));
    if (HasFatalFailure()) return;
  }
}

TEST(MultipartParser, UploadBodyThreeWaySplits) {
  // A shorter form than twine's keeps the number of cut pairs affordable under sanitizers; the
  // framing (empty value, headers, tricky file bytes, close delimiter) is the same.
  const Fields fields = {{":action", "file_upload"}, {"summary", ""}, {"classifiers", "A :: B"}};
  const std::string body = upload_body(fields);
  // Second cuts close to the first, where a delimiter or header straddles three chunks, and a
  // few farther ones.
  const std::vector<std::size_t> gaps = {0, 1, 2, 3, 4, 5, 6, 7, 8, 13, 21, 34, 55, 89};
  for (std::size_t i = 0; i <= body.size(); ++i) {
    for (std::size_t gap : gaps) {
      const std::size_t j = std::min(body.size(), i + gap);
      expect_upload(parse_split(body, {i, j}, std::string(kBoundary)), fields,
                    "split at " + std::to_string(i) + "," + std::to_string(j));
      if (HasFatalFailure()) return;
    }
  }
}

TEST(MultipartParser, StreamsLargeFileInPiecesNoLargerThanAChunk) {
  const std::size_t chunk = 256 * 1024;
  std::string content(4 * 1024 * 1024 + 123, '\0');
  std::uint32_t x = 12345;
  for (auto& c : content) {
    x = x * 1103515245U + 12345U;
    c = static_cast<char>(x >> 24U);
  }
  const std::string body = field_part(kBoundary, ":action", "file_upload") +
                           file_part(kBoundary, "content", "big.whl", content) +
                           close_delimiter(kBoundary);

  MultipartParser parser{std::string(kBoundary)};
  RecordingSink sink;
  for (std::size_t pos = 0; pos < body.size(); pos += chunk) {
    ASSERT_TRUE(parser.feed(std::string_view(body).substr(pos, chunk), sink));
    if (pos == chunk) {
      // The file is handed on while the body is still arriving.
      ASSERT_EQ(sink.files.size(), 1U);
      EXPECT_GE(sink.files[0].data.size(), chunk);
    }
  }
  ASSERT_TRUE(parser.finish());
  ASSERT_EQ(sink.files.size(), 1U);
  EXPECT_TRUE(sink.files[0].data == content);
  EXPECT_LE(sink.largest_piece, chunk + kBoundary.size() + 4);
  EXPECT_EQ(parser.field(":action"), "file_upload");
}

// ---------------------------------------------------------------------------------------------
// Fields

TEST(MultipartParser, EmptyAndRepeatedFields) {
  const std::string body = field_part("b", "summary", "") + field_part("b", "classifiers", "A") +
                           field_part("b", "keywords", "") + field_part("b", "classifiers", "B") +
                           close_delimiter("b");
  MultipartParser parser("b");
  RecordingSink sink;
  ASSERT_TRUE(parser.feed(body, sink));
  ASSERT_TRUE(parser.finish());
  EXPECT_EQ(
      parser.fields(),
      (Fields{{"summary", ""}, {"classifiers", "A"}, {"keywords", ""}, {"classifiers", "B"}}));
  EXPECT_EQ(parser.field("classifiers"), "A");
  EXPECT_EQ(parser.field("summary"), "");
  EXPECT_EQ(parser.field("missing"), std::nullopt);
  EXPECT_TRUE(sink.files.empty());
}

TEST(MultipartParser, FieldValuesKeepCrLfAndBinary) {
  const std::string value = std::string("line1\r\nline2\r\n\r\n--xy-\0\xff", 21) + "\r";
  const Outcome out =
      parse_whole(field_part("xyz", "description", value) + close_delimiter("xyz"), "xyz");
  ASSERT_FALSE(out.error) << out.error->message;
  ASSERT_EQ(out.fields.size(), 1U);
  EXPECT_EQ(out.fields[0].second, value);
}

TEST(MultipartParser, QuotedBoundaryWithSpacesEndToEnd) {
  auto boundary =
      boundary_from_content_type("multipart/form-data; boundary=\"==:(weird) boundary+_,./?'x\"");
  ASSERT_TRUE(boundary);
  const std::string body = field_part(*boundary, "name", "demo") +
                           file_part(*boundary, "content", "x.whl", "abc") +
                           close_delimiter(*boundary);
  const Outcome out = parse_whole(body, *boundary);
  ASSERT_FALSE(out.error) << out.error->message;
  EXPECT_EQ(out.fields, (Fields{{"name", "demo"}}));
  ASSERT_EQ(out.files.size(), 1U);
  EXPECT_EQ(out.files[0].data, "abc");
}

TEST(MultipartParser, PreambleAndEpilogueAreIgnored) {
  const std::string body = "This is a preamble.\r\nxx--b not a delimiter\r\n--c\r\n-b\r\n" +
                           field_part("b", "a", "1") + close_delimiter("b") + "epilogue\r\n" +
                           field_part("b", "ignored", "2") + "--b--\r\n";
  const Outcome out = parse_whole(body, "b");
  ASSERT_FALSE(out.error) << out.error->message;
  EXPECT_EQ(out.fields, (Fields{{"a", "1"}}));
}

TEST(MultipartParser, CloseDelimiterWithoutTrailingCrlfAndTransportPadding) {
  const std::string body =
      "--b \t\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--b\t\r\n"
      "content-DISPOSITION:   Form-Data ;NAME=\"b\" \r\nX-Extra: y\r\n\r\n2\r\n--b--";
  const Outcome out = parse_whole(body, "b");
  ASSERT_FALSE(out.error) << out.error->message;
  EXPECT_EQ(out.fields, (Fields{{"a", "1"}, {"b", "2"}}));
}

// ---------------------------------------------------------------------------------------------
// Files

TEST(MultipartParser, TwoFilePartsAndAnEmptyFile) {
  const std::string body = file_part("b", "content", "one.whl", "first") +
                           field_part("b", "between", "x") + file_part("b", "content", "", "") +
                           close_delimiter("b");
  const Outcome out = parse_whole(body, "b");
  ASSERT_FALSE(out.error) << out.error->message;
  ASSERT_EQ(out.files.size(), 2U);
  EXPECT_EQ(out.files[0].filename, "one.whl");
  EXPECT_EQ(out.files[0].data, "first");
  EXPECT_TRUE(out.files[0].ended);
  EXPECT_EQ(out.files[1].filename, "");
  EXPECT_EQ(out.files[1].data, "");
  EXPECT_TRUE(out.files[1].ended);
  EXPECT_EQ(out.fields, (Fields{{"between", "x"}}));
}

TEST(MultipartParser, QuotedStringEscapesAndIgnoredFilenameStar) {
  const std::string body =
      "--b\r\nContent-Disposition: form-data; name=\"con\\\"tent\"; "
      "filename=\"C:\\\\dir\\\\a;b.whl\"; filename*=UTF-8''other.whl\r\n\r\nzz\r\n--b--";
  const Outcome out = parse_whole(body, "b");
  ASSERT_FALSE(out.error) << out.error->message;
  ASSERT_EQ(out.files.size(), 1U);
  EXPECT_EQ(out.files[0].name, "con\"tent");
  EXPECT_EQ(out.files[0].filename, "C:\\dir\\a;b.whl");
}

TEST(MultipartParser, FoldedHeaderLine) {
  const std::string body =
      "--b\r\nContent-Disposition: form-data;\r\n name=\"folded\"\r\n\r\nv\r\n--b--";
  const Outcome out = parse_whole(body, "b");
  ASSERT_FALSE(out.error) << out.error->message;
  EXPECT_EQ(out.fields, (Fields{{"folded", "v"}}));
}

// ---------------------------------------------------------------------------------------------
// Truncation and malformed bodies

TEST(MultipartParser, TruncatedAtEveryPointFailsInFinish) {
  const std::string body = twine_body();
  const std::size_t complete = body.size() - 2;  // the CRLF after "--boundary--" is optional
  for (std::size_t cut = 0; cut <= body.size(); ++cut) {
    const Outcome out = parse_whole(std::string_view(body).substr(0, cut), std::string(kBoundary));
    if (cut >= complete) {
      EXPECT_FALSE(out.error) << "cut at " << cut;
      continue;
    }
    ASSERT_TRUE(out.error) << "cut at " << cut;
    EXPECT_EQ(out.error->code, Errc::invalid);
    EXPECT_EQ(out.error->message.rfind("truncated multipart body: ", 0), 0U)
        << "cut at " << cut << ": " << out.error->message;
  }
}

TEST(MultipartParser, MissingFinalBoundary) {
  const Outcome out = parse_whole(
      field_part("b", "name", "demo") + file_part("b", "content", "x.whl", "data"), "b");
  ASSERT_TRUE(out.error);
  EXPECT_EQ(out.error->message,
            "truncated multipart body: part 2 ('content') has no closing boundary");
  ASSERT_EQ(out.files.size(), 1U);
  EXPECT_FALSE(out.files[0].ended);

  const Outcome no_boundary = parse_whole("just some text", "b");
  ASSERT_TRUE(no_boundary.error);
  EXPECT_EQ(no_boundary.error->message, "truncated multipart body: no boundary found");

  const Outcome empty = parse_whole("", "b");
  ASSERT_TRUE(empty.error);
}

TEST(MultipartParser, OversizeFields) {
  MultipartLimits limits;
  limits.max_field_bytes = 10;
  // name (4) + value (6) is exactly the limit.
  EXPECT_FALSE(
      parse_whole(field_part("b", "name", "123456") + close_delimiter("b"), "b", limits).error);
  const Outcome over =
      parse_whole(field_part("b", "name", "1234567") + close_delimiter("b"), "b", limits);
  ASSERT_TRUE(over.error);
  EXPECT_EQ(over.error->code, Errc::too_large);
  EXPECT_EQ(over.error->message, "form fields exceed 10 bytes (at part 1 ('name'))");
  // The cap is on all fields together, and names alone can exceed it.
  const Outcome total = parse_whole(
      field_part("b", "a", "12345") + field_part("b", "b", "12345") + close_delimiter("b"), "b",
      limits);
  ASSERT_TRUE(total.error);
  EXPECT_EQ(total.error->code, Errc::too_large);
  const Outcome long_name =
      parse_whole(field_part("b", "abcdefghijk", "") + close_delimiter("b"), "b", limits);
  ASSERT_TRUE(long_name.error);
  EXPECT_EQ(long_name.error->code, Errc::too_large);
  // File content does not count.
  EXPECT_FALSE(
      parse_whole(file_part("b", "content", "x.whl", std::string(1000, 'x')) + close_delimiter("b"),
                  "b", limits)
          .error);
}

TEST(MultipartParser, TooManyParts) {
  MultipartLimits limits;
  limits.max_parts = 3;
  std::string body;
  for (int i = 0; i < 3; ++i) body += field_part("b", "f", "v");
  EXPECT_FALSE(parse_whole(body + close_delimiter("b"), "b", limits).error);
  const Outcome out =
      parse_whole(body + field_part("b", "f", "v") + close_delimiter("b"), "b", limits);
  ASSERT_TRUE(out.error);
  EXPECT_EQ(out.error->code, Errc::invalid);
  EXPECT_EQ(out.error->message, "too many multipart parts (more than 3)");
}

TEST(MultipartParser, OversizeHeaderBlock) {
  MultipartLimits limits;
  limits.max_header_bytes = 64;
  // 42 + 15 + 5 + 2 = 64 header bytes, blank line included.
  const std::string header = "Content-Disposition: form-data; name=\"a\"\r\n";
  ASSERT_EQ(header.size(), 42U);
  const std::string fits = header + std::string(15, 'x') + ": y\r\n\r\n";
  ASSERT_EQ(fits.size(), 64U);
  EXPECT_FALSE(parse_whole("--b\r\n" + fits + "v\r\n--b--", "b", limits).error);
  const std::string one_more = header + std::string(16, 'x') + ": y\r\n\r\n";
  EXPECT_TRUE(parse_whole("--b\r\n" + one_more + "v\r\n--b--", "b", limits).error);
  const Outcome out = parse_whole(
      "--b\r\n" + header + std::string(100, 'x') + ": y\r\n\r\nv\r\n--b--", "b", limits);
  ASSERT_TRUE(out.error);
  EXPECT_EQ(out.error->message, "malformed part header: headers of part 1 exceed 64 bytes");
}

struct BadPart {
  std::string headers;
  std::string message;
};

TEST(MultipartParser, MalformedPartHeaders) {
  const std::vector<BadPart> cases = {
      {"Content-Disposition: form-data; filename=\"x.whl\"\r\n",
       "malformed part header in part 1: Content-Disposition has no name"},
      {"Content-Disposition: form-data; name=\"\"\r\n",
       "malformed part header in part 1: Content-Disposition has no name"},
      {"Content-Disposition: form-data\r\n",
       "malformed part header in part 1: Content-Disposition has no name"},
      {"Content-Disposition: attachment; name=\"a\"\r\n",
       "malformed part header in part 1: Content-Disposition is not form-data"},
      {"Content-Type: text/plain\r\n",
       "malformed part header in part 1: missing Content-Disposition"},
      {"", "malformed part header in part 1: missing Content-Disposition"},
      {"Content-Disposition form-data; name=\"a\"\r\n",
       "malformed part header in part 1: header line without ':'"},
      {"Content Disposition: form-data; name=\"a\"\r\n",
       "malformed part header in part 1: malformed header name"},
      {" Content-Disposition: form-data; name=\"a\"\r\n",
       "malformed part header in part 1: header block starts with a space"},
      {"Content-Disposition: form-data; name=\"a\x01\"\r\n",
       "malformed part header in part 1: control character in a header line"},
      {"Content-Disposition: form-data; name=\"a\r\n",
       "malformed part header in part 1: unterminated quoted value of parameter 'name'"},
      {"Content-Disposition: form-data; name=\"a\"; name=\"b\"\r\n",
       "malformed part header in part 1: repeated parameter 'name'"},
      {"Content-Disposition: form-data; name=\"a\"\r\nContent-Disposition: form-data; "
       "name=\"b\"\r\n",
       "malformed part header in part 1: repeated Content-Disposition"},
      {"Content-Disposition: form-data; name\r\n",
       "malformed part header in part 1: parameter 'name' has no value"},
      {"Content-Disposition: form-data; name=\"a\" junk\r\n",
       "malformed part header in part 1: expected ';' between parameters"},
  };
  for (const auto& c : cases) {
    const Outcome out = parse_whole("--b\r\n" + c.headers + "\r\nvalue\r\n--b--\r\n", "b");
    ASSERT_TRUE(out.error) << c.headers;
    EXPECT_EQ(out.error->code, Errc::invalid) << c.headers;
    EXPECT_EQ(out.error->message, c.message) << c.headers;
  }
}

TEST(MultipartParser, MalformedBoundaryLines) {
  for (std::string body : {"--bX\r\n", "--b-x", "--b \tx", "--b\rx", "--b\n",
                           "--b\r\nContent-Disposition: form-data; name=a\r\n\r\nv\r\n--bb\r\n"}) {
    const Outcome out = parse_whole(body, "b");
    ASSERT_TRUE(out.error) << body;
    EXPECT_EQ(out.error->message, "malformed multipart boundary line") << body;
  }
}

TEST(MultipartParser, InvalidBoundaryIsReportedByFeed) {
  MultipartParser parser("");
  RecordingSink sink;
  auto s = parser.feed("--\r\n", sink);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, Errc::invalid);
  EXPECT_FALSE(parser.finish());
  EXPECT_TRUE(parse_whole("--a\rb--", "a\rb").error);
}

TEST(MultipartParser, SinkErrorsAbortAndStick) {
  MultipartParser parser("b");
  RecordingSink sink;
  sink.fail_data_after = 2;
  ASSERT_TRUE(
      parser.feed("--b\r\nContent-Disposition: form-data; name=c; filename=x\r\n\r\n", sink));
  ASSERT_TRUE(parser.feed("one", sink));
  auto s = parser.feed("two", sink);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, Errc::storage_full);
  EXPECT_EQ(s.error().message, "disk full");
  // Later calls report the same error and pass nothing on.
  auto again = parser.feed("three\r\n--b--", sink);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().message, "disk full");
  EXPECT_EQ(sink.pieces, 2U);
  auto fin = parser.finish();
  ASSERT_FALSE(fin);
  EXPECT_EQ(fin.error().code, Errc::storage_full);
}

class RejectingStartSink : public RecordingSink {
 public:
  Status on_file_start(std::string_view, std::string_view) override {
    return make_error(Errc::conflict, "already exists");
  }
};

TEST(MultipartParser, SinkRejectsFileStart) {
  MultipartParser parser("b");
  RejectingStartSink sink;
  auto s = parser.feed(file_part("b", "content", "x.whl", "data") + close_delimiter("b"), sink);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, Errc::conflict);
  EXPECT_EQ(sink.pieces, 0U);
}

TEST(MultipartParser, GarbageNeverCrashes) {
  const std::string body = twine_body();
  std::uint32_t x = 7;
  auto next = [&] {
    x = x * 1103515245U + 12345U;
    return x >> 8U;
  };
  for (int round = 0; round < 2000; ++round) {
    std::string mutated = body;
    const int edits = 1 + static_cast<int>(next() % 4);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = next() % mutated.size();
      switch (next() % 3) {
        case 0:
          mutated[at] = static_cast<char>(next());
          break;
        case 1:
          mutated.erase(at, 1 + next() % 40);
          break;
        default:
          mutated.insert(at, std::string_view("\r\n--").substr(0, 1 + next() % 4));
          break;
      }
    }
    const std::size_t cut = next() % (mutated.size() + 1);
    const Outcome out = parse_split(mutated, {cut}, std::string(kBoundary));
    if (out.error) {
      EXPECT_FALSE(out.error->message.empty());
    }
  }
  std::string noise(5000, '\0');
  for (auto& c : noise) c = static_cast<char>(next());
  EXPECT_TRUE(parse_whole(noise, std::string(kBoundary)).error);
  EXPECT_TRUE(
      parse_whole("--" + std::string(kBoundary) + "\r\n" + noise, std::string(kBoundary)).error);
}

}  // namespace
}  // namespace wf::handlers
