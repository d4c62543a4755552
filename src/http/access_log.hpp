#pragma once
// The access log's line for one request, formatted by hand: it runs once per request on the
// network threads.

#include <cstdint>
#include <string>
#include <string_view>

namespace wf::http {

/// Appends the access-log line of one request to `out`:
/// "req=ID CLIENT METHOD TARGET -> STATUS LENGTHB MILLISms[ (write failed: WHY)]". CLIENT is
/// the client's address (behind a trusted proxy, the one its header names; "-" when unknown).
/// The target is cut at 300 bytes and its unprintable bytes become '?'; tokens in it are
/// redacted.
void append_access_line(std::string& out, std::uint64_t id, std::string_view client,
                        std::string_view method, std::string_view target, int status,
                        std::uint64_t length, std::uint64_t micros, std::string_view failure = {});

}  // namespace wf::http
