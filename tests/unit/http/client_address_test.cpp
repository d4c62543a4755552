#include "wheelforge/http/client_address.hpp"

#include <gtest/gtest.h>

namespace wf::http {
namespace {

IpBytes ip(std::string_view text) {
  const auto parsed = parse_ip(text);
  EXPECT_TRUE(parsed) << text;
  return parsed.value_or(IpBytes{});
}

TrustedProxies trusted(std::string_view text) {
  auto t = parse_trusted_proxies(text);
  EXPECT_TRUE(t) << text;
  return t ? *t : TrustedProxies{};
}

std::string client(std::string_view peer, std::string_view trust, ForwardedHeader which,
                   std::vector<std::string_view> values, ClientSource expected) {
  const auto got = client_address(ip(peer), trusted(trust), which, values);
  EXPECT_EQ(got.source, expected);
  return ip_to_string(got.address);
}

TEST(ClientAddress, ParsesAndPrintsBothFamilies) {
  EXPECT_EQ(ip_to_string(ip("192.0.2.7")), "192.0.2.7");
  EXPECT_EQ(ip_to_string(ip("::ffff:192.0.2.7")), "192.0.2.7");
  EXPECT_EQ(ip_to_string(ip("2001:DB8:0::1")), "2001:db8::1");
  EXPECT_TRUE(is_ipv4(ip("10.1.2.3")));
  EXPECT_FALSE(is_ipv4(ip("::1")));
  for (const std::string_view bad :
       {"", "1.2.3", "1.2.3.4:80", "[::1]", "::1%lo", "example.com", "1.2.3.256", " 1.2.3.4"}) {
    EXPECT_FALSE(parse_ip(bad)) << bad;
  }
}

TEST(ClientAddress, RangesMatchTheirPrefixOnly) {
  const auto ten = parse_ip_range("10.0.0.0/8");
  ASSERT_TRUE(ten);
  EXPECT_TRUE(ten->contains(ip("10.255.1.2")));
  EXPECT_TRUE(ten->contains(ip("::ffff:10.0.0.1")));
  EXPECT_FALSE(ten->contains(ip("11.0.0.1")));
  EXPECT_FALSE(ten->contains(ip("::a00:1")));  // not an IPv4 address: ::10.0.0.1
  const auto odd = parse_ip_range("192.168.4.0/22");
  ASSERT_TRUE(odd);
  EXPECT_TRUE(odd->contains(ip("192.168.7.255")));
  EXPECT_FALSE(odd->contains(ip("192.168.8.0")));
  const auto one = parse_ip_range("127.0.0.1");
  ASSERT_TRUE(one);
  EXPECT_TRUE(one->contains(ip("127.0.0.1")));
  EXPECT_FALSE(one->contains(ip("127.0.0.2")));
  const auto v6 = parse_ip_range("fd00::/8");
  ASSERT_TRUE(v6);
  EXPECT_TRUE(v6->contains(ip("fd12:3456::1")));
  EXPECT_FALSE(v6->contains(ip("fe80::1")));
  const auto all = parse_ip_range("0.0.0.0/0");
  ASSERT_TRUE(all);
  EXPECT_TRUE(all->contains(ip("203.0.113.9")));
  EXPECT_FALSE(all->contains(ip("2001:db8::1")));
  EXPECT_EQ(all->text, "0.0.0.0/0");
}

TEST(ClientAddress, RefusesBadRanges) {
  for (const std::string_view bad : {"10.0.0.0/33", "::/129", "10.0.0.1/8", "fd00::1/8",
                                     "10.0.0.0/", "10.0.0.0/x", "host", "10.0.0.0/8/9"}) {
    EXPECT_FALSE(parse_ip_range(bad)) << bad;
  }
  const auto list = parse_trusted_proxies("127.0.0.1, 10.0.0.0/8 ::1\tfd00::/8");
  ASSERT_TRUE(list);
  EXPECT_EQ(list->ranges.size(), 4U);
  EXPECT_TRUE(parse_trusted_proxies("")->empty());
  const auto bad = parse_trusted_proxies("127.0.0.1,10.0.0.1/8");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("10.0.0.1/8"), std::string::npos);
}

TEST(ClientAddress, ReadsForwardedNodes) {
  const auto nodes = forwarded_for_nodes(
      R"(for=192.0.2.60;proto=http;by=203.0.113.43, For="[2001:db8:cafe::17]:4711", )"
      R"(for="198.51.100.17:8080";host=x, for=unknown, for=_hidden)");
  ASSERT_TRUE(nodes);
  EXPECT_EQ(*nodes, (std::vector<std::string>{"192.0.2.60", "2001:db8:cafe::17", "198.51.100.17",
                                              "unknown", "_hidden"}));
  for (const std::string_view bad :
       {"", "proto=http", "for=", "for=\"1.2.3.4", "for=1.2.3.4 for=5.6.7.8",
        "for=1.2.3.4;for=1.2.3.5", "for=\"[::1\"", "for=\"[::1]:x y\"",
        "for=1.2.3.4,,for=1.2.3.5"}) {
    EXPECT_FALSE(forwarded_for_nodes(bad)) << bad;
  }
}

TEST(ClientAddress, UntrustedPeersAreTheClient) {
  using enum ForwardedHeader;
  EXPECT_EQ(client("203.0.113.5", "", x_forwarded_for, {"198.51.100.1"}, ClientSource::peer),
            "203.0.113.5");
  EXPECT_EQ(
      client("203.0.113.5", "10.0.0.0/8", x_forwarded_for, {"198.51.100.1"}, ClientSource::peer),
      "203.0.113.5");
  EXPECT_EQ(client("10.0.0.2", "10.0.0.0/8", x_forwarded_for, {}, ClientSource::peer), "10.0.0.2");
}

TEST(ClientAddress, WalksFromTheRightPastTrustedHops) {
  using enum ForwardedHeader;
  // The client prepends a lie; the first untrusted hop from the right is what the proxy saw.
  EXPECT_EQ(client("10.0.0.2", "10.0.0.0/8", x_forwarded_for, {"1.1.1.1, 198.51.100.7, 10.0.0.9"},
                   ClientSource::forwarded),
            "198.51.100.7");
  // Several header lines are one list, in order.
  EXPECT_EQ(client("10.0.0.2", "10.0.0.0/8", x_forwarded_for, {"1.1.1.1", "198.51.100.7:5000"},
                   ClientSource::forwarded),
            "198.51.100.7");
  EXPECT_EQ(client("10.0.0.2", "10.0.0.0/8", x_forwarded_for, {"[2001:db8::5]:443"},
                   ClientSource::forwarded),
            "2001:db8::5");
  // Every hop trusted: the leftmost.
  EXPECT_EQ(client("10.0.0.2", "10.0.0.0/8", x_forwarded_for, {"10.1.1.1, 10.0.0.9"},
                   ClientSource::forwarded),
            "10.1.1.1");
  EXPECT_EQ(client("::1", "::1 fd00::/8", forwarded,
                   {R"(for=1.1.1.1, for="[2001:db8::9]:80";proto=https, for="[fd00::3]")"},
                   ClientSource::forwarded),
            "2001:db8::9");
}

TEST(ClientAddress, MalformedHopsFallBackToThePeer) {
  using enum ForwardedHeader;
  for (const std::string_view bad :
       {"not-an-address", "198.51.100.7,", "198.51.100.7:http", "unknown", "", "[::1"}) {
    EXPECT_EQ(client("10.0.0.2", "10.0.0.0/8", x_forwarded_for, {bad}, ClientSource::malformed),
              "10.0.0.2")
        << bad;
  }
  EXPECT_EQ(client("10.0.0.2", "10.0.0.0/8", forwarded, {"for=unknown"}, ClientSource::malformed),
            "10.0.0.2");
  EXPECT_EQ(client("10.0.0.2", "10.0.0.0/8", forwarded, {"proto=http"}, ClientSource::malformed),
            "10.0.0.2");
  // A malformed hop to the left of the client does not matter: it is never reached.
  EXPECT_EQ(client("10.0.0.2", "10.0.0.0/8", x_forwarded_for, {"garbage, 198.51.100.7"},
                   ClientSource::forwarded),
            "198.51.100.7");
}

}  // namespace
}  // namespace wf::http
