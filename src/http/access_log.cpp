#include "access_log.hpp"

#include "wheelforge/util/strings.hpp"

namespace wf::http {

void append_access_line(std::string& out, std::uint64_t id, std::string_view client,
                        std::string_view method, std::string_view target, int status,
                        std::uint64_t length, std::uint64_t micros, std::string_view failure) {
  constexpr std::size_t kMaxTarget = 300;
  out += "req=";
  append_decimal(out, id);
  out.push_back(' ');
  out += client.empty() ? std::string_view("-") : client;
  out.push_back(' ');
  out += method;
  out.push_back(' ');
  append_for_log(out, target, kMaxTarget);
  out += " -> ";
  append_decimal(out, static_cast<std::uint64_t>(status));
  out.push_back(' ');
  append_decimal(out, length);
  out += "B ";
  // Milliseconds with two decimals, rounded half up.
  const std::uint64_t hundredths = (micros + 5) / 10;
  append_decimal(out, hundredths / 100);
  out.push_back('.');
  const auto fraction = static_cast<char>(hundredths % 100);
  out.push_back(static_cast<char>('0' + fraction / 10));
  out.push_back(static_cast<char>('0' + fraction % 10));
  out += "ms";
  if (!failure.empty()) {
    out += " (write failed: ";
    out += failure;
    out.push_back(')');
  }
}

}  // namespace wf::http
