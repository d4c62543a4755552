#pragma once
// The client's address behind a load balancer: which peers are trusted proxies
// (`trusted_proxies`, addresses or CIDR ranges), and the address their Forwarded (RFC 7239)
// or X-Forwarded-For header names. Pure functions: no I/O, no allocation beyond the answer's.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/util/result.hpp"

namespace wf::http {

/// An IP address as 16 bytes: IPv6 as it is, IPv4 as its IPv4-mapped IPv6 form
/// (::ffff:a.b.c.d), so that one comparison serves both families.
using IpBytes = std::array<unsigned char, 16>;

/// Parses a bare IPv4 or IPv6 address ("192.0.2.7", "2001:db8::1", "::ffff:192.0.2.7");
/// nothing for anything else (ports, brackets, zone ids, names).
[[nodiscard]] std::optional<IpBytes> parse_ip(std::string_view text);

/// The address as text: dotted quad for IPv4 (mapped ones included), RFC 5952 IPv6 otherwise.
[[nodiscard]] std::string ip_to_string(const IpBytes& ip);

/// Whether `ip` is an IPv4 address (held in its mapped form).
[[nodiscard]] bool is_ipv4(const IpBytes& ip);

/// An address range: an address and how many leading bits of it must match (an IPv4 range's
/// prefix counts the 96 bits of the mapped form's head, so "10.0.0.0/8" holds 104 bits).
struct IpRange {
  IpBytes base{};
  unsigned bits = 128;
  /// As configured ("10.0.0.0/8", "::1"), for `config check` and logs.
  std::string text;
  [[nodiscard]] bool contains(const IpBytes& ip) const;
};

/// Parses "ADDRESS" or "ADDRESS/PREFIX" (IPv4 prefixes 0..32, IPv6 0..128). Host bits set
/// below the prefix are an error ("10.0.0.1/8"): the range would not be what it looks like.
[[nodiscard]] Result<IpRange> parse_ip_range(std::string_view text);

/// The peers whose forwarding headers are believed. Empty: nobody's.
struct TrustedProxies {
  std::vector<IpRange> ranges;
  [[nodiscard]] bool empty() const { return ranges.empty(); }
  [[nodiscard]] bool trusts(const IpBytes& ip) const;
};

/// Parses a list of ranges separated by commas or white space (a flag's or environment
/// variable's value); the first bad entry's error.
[[nodiscard]] Result<TrustedProxies> parse_trusted_proxies(std::string_view text);

/// Where client_address() found the address.
enum class ClientSource {
  peer,       ///< the TCP peer: not a trusted proxy, or it sent no forwarding header
  forwarded,  ///< a trusted proxy's Forwarded or X-Forwarded-For header
  malformed,  ///< the TCP peer, because the trusted proxy's header could not be read
};

struct ClientAddress {
  IpBytes address{};
  ClientSource source = ClientSource::peer;
};

/// Which header names the client: the one the proxies in front write. Only one is read: a
/// proxy that writes one passes the other on as the client sent it, so it proves nothing.
enum class ForwardedHeader {
  x_forwarded_for,  ///< X-Forwarded-For: "client, proxy1, proxy2" (haproxy, nginx, most LBs)
  forwarded,        ///< Forwarded (RFC 7239): "for=client, for=\"[2001:db8::1]:4711\""
};

/// The client of a request that arrived from `peer`. From a trusted peer, the hops of the
/// `which` header (the `for=` of each element of a Forwarded header) are walked from the right,
/// past those that are trusted proxies themselves: the first one that is not is the client (hops to
/// its left are the client's own claims and are not believed). When every hop is trusted, the
/// leftmost one. A hop that is not an address (malformed, "unknown", an obfuscated name): the peer,
/// as `malformed`. From an untrusted peer the header is ignored. `values` are that header's lines'
/// values in order (a list split over several lines is one list); none: the peer.
[[nodiscard]] ClientAddress client_address(const IpBytes& peer, const TrustedProxies& trusted,
                                           ForwardedHeader which,
                                           const std::vector<std::string_view>& values);

/// The `for=` nodes of a Forwarded header's value, left to right, as their bare addresses
/// (quotes, brackets and ports removed); nothing when the value is malformed or an element
/// has no `for=`. "unknown" and obfuscated identifiers are returned as they are.
[[nodiscard]] std::optional<std::vector<std::string>> forwarded_for_nodes(std::string_view value);

}  // namespace wf::http
