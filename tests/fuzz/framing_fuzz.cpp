// The request-head checks (http/framing) and the log sanitizer (util: sanitize_for_log) on
// arbitrary bytes: both read what clients send before anything else does.
//
// Input: byte 0 holds flags (bit 0: HTTP/1.0, bits 1-2: Transfer-Encoding lines, bits 3-4:
// Host lines, bits 5-7 with byte 1: the log cap); then a Transfer-Encoding value up to the
// first '\n'; the rest is the Host value, and all of it (flags included) is sanitized.
//
// Checked: check_head agrees with the predicates it is made of; a valid Host holds only the
// characters of host[:port]; chunked alone is "chunked" with whitespace and commas around it;
// a sanitized line is capped, printable, and keeps no token and no token= value.

#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "http/framing.hpp"
#include "wheelforge/util/strings.hpp"

namespace {

bool token_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

void check_host(std::string_view host) {
  if (!wf::http::is_valid_host(host)) return;
  for (const char c : host) {
    const auto u = static_cast<unsigned char>(c);
    WF_FUZZ_CHECK(u > 0x20 && u < 0x7F);
    WF_FUZZ_CHECK(c != '@' && c != '/' && c != '?' && c != '#' && c != '"' && c != '\\');
  }
}

void check_chunked(std::string_view te) {
  if (!wf::http::is_chunked_alone(te)) return;
  std::string letters;
  for (const char c : te) {
    if (c == ' ' || c == '\t' || c == ',') continue;
    letters.push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c));
  }
  WF_FUZZ_CHECK(letters == "chunked");
}

void check_sanitized(std::string_view in, std::size_t cap) {
  const std::string out = wf::sanitize_for_log(in, cap);
  WF_FUZZ_CHECK(out.size() <= cap + 3);
  for (const char c : out) {
    const auto u = static_cast<unsigned char>(c);
    WF_FUZZ_CHECK(u >= 0x20 && u < 0x7F);
  }
  for (std::size_t i = 0; i + 3 <= out.size(); ++i) {
    if (out.compare(i, 3, "wf_") != 0) continue;
    std::size_t run = 0;
    while (i + 3 + run < out.size() && token_char(out[i + 3 + run])) ++run;
    WF_FUZZ_CHECK(run < 32);
  }
  for (std::size_t i = 0; i + 6 <= out.size(); ++i) {
    if (!wf::iequals(std::string_view(out).substr(i, 6), "token=")) continue;
    const std::size_t v = i + 6;
    WF_FUZZ_CHECK(v == out.size() || out[v] == '[' || out[v] == '&' || out[v] == ';' ||
                  out[v] == '#' || out[v] == ' ' || out.compare(v, 3, "...") == 0);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = wf::fuzz::as_text(data, size);
  if (size >= 2) check_sanitized(text, ((data[0] >> 5U) | (std::size_t{data[1]} << 3U)) % 400);
  check_sanitized(text, 300);
  if (size == 0) return 0;
  const std::string_view rest = text.substr(1);
  const auto newline = rest.find('\n');
  const std::string_view te = rest.substr(0, newline);
  const std::string_view host =
      newline == std::string_view::npos ? std::string_view() : rest.substr(newline + 1);
  check_host(host);
  check_chunked(te);

  wf::http::HeadFraming head;
  head.version = (data[0] & 1U) != 0 ? 10 : 11;
  head.transfer_encodings = (data[0] >> 1U) & 3U;
  head.transfer_encoding = te;
  head.hosts = (data[0] >> 3U) & 3U;
  head.host = host;
  const auto refused = wf::http::check_head(head);
  const bool te_ok =
      head.transfer_encodings == 0 ||
      (head.version == 11 && head.transfer_encodings == 1 && wf::http::is_chunked_alone(te));
  const bool host_ok =
      head.hosts == 1 ? wf::http::is_valid_host(host) : head.hosts == 0 && head.version == 10;
  WF_FUZZ_CHECK(refused.has_value() == !(te_ok && host_ok));
  if (refused) {
    WF_FUZZ_CHECK(refused->code == wf::Errc::invalid);
    WF_FUZZ_CHECK(!refused->message.empty());
  }
  return 0;
}
