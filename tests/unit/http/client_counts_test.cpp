#include "http/client_counts.hpp"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace wf::http {
namespace {

ClientCounts::Key v4(unsigned char a, unsigned char b, unsigned char c, unsigned char d) {
  return ClientCounts::ipv4({a, b, c, d});
}

TEST(ClientCounts, RefusesAnAddressAtItsLimitAndCountsOthersApart) {
  ClientCounts counts(16);
  const auto a = v4(10, 0, 0, 1);
  const auto b = v4(10, 0, 0, 2);
  std::vector<ClientCounts::Slot> held;
  for (int i = 0; i < 3; ++i) {
    const auto slot = counts.acquire(a, 3);
    ASSERT_TRUE(slot);
    held.push_back(*slot);
  }
  EXPECT_FALSE(counts.acquire(a, 3));
  EXPECT_EQ(counts.count(a), 3U);
  ASSERT_TRUE(counts.acquire(b, 3));
  EXPECT_EQ(counts.count(b), 1U);
  counts.release(held.back());
  held.pop_back();
  EXPECT_EQ(counts.count(a), 2U);
  EXPECT_TRUE(counts.acquire(a, 3));
  EXPECT_FALSE(counts.acquire(a, 3));
}

TEST(ClientCounts, Ipv6CountsByPrefixAndMappedIpv4AsIpv4) {
  std::array<unsigned char, 16> one{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1};
  auto two = one;
  one[15] = 1;
  two[15] = 2;
  EXPECT_EQ(ClientCounts::ipv6(one), ClientCounts::ipv6(two));
  auto other = one;
  other[7] = 2;
  EXPECT_FALSE(ClientCounts::ipv6(one) == ClientCounts::ipv6(other));
  const std::array<unsigned char, 16> mapped{0, 0, 0,    0,    0,   0, 0, 0,
                                             0, 0, 0xff, 0xff, 127, 0, 0, 1};
  EXPECT_EQ(ClientCounts::ipv6(mapped), v4(127, 0, 0, 1));
  // 127.0.0.1 and ::7f00:1 (no ffff) are different clients.
  const std::array<unsigned char, 16> compat{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 127, 0, 0, 1};
  EXPECT_FALSE(ClientCounts::ipv6(compat) == v4(127, 0, 0, 1));

  ClientCounts counts(8);
  ASSERT_TRUE(counts.acquire(ClientCounts::ipv6(one), 1));
  EXPECT_FALSE(counts.acquire(ClientCounts::ipv6(two), 1));
  EXPECT_TRUE(counts.acquire(ClientCounts::ipv6(other), 1));
}

TEST(ClientCounts, SlotsOfGoneAddressesAreReused) {
  // Far more addresses over time than the table has slots: each comes and goes.
  ClientCounts counts(4);
  for (unsigned i = 0; i < 100'000; ++i) {
    const auto key = v4(10, static_cast<unsigned char>(i >> 16U),
                        static_cast<unsigned char>(i >> 8U), static_cast<unsigned char>(i));
    const auto slot = counts.acquire(key, 2);
    ASSERT_TRUE(slot);
    ASSERT_NE(*slot, ClientCounts::kUncounted) << i;
    EXPECT_EQ(counts.count(key), 1U);
    counts.release(*slot);
    EXPECT_EQ(counts.count(key), 0U);
  }
}

TEST(ClientCounts, ManyAddressesAtOnceUpToTheConnectionCap) {
  ClientCounts counts(1024);
  std::vector<ClientCounts::Slot> held;
  for (unsigned i = 0; i < 1024; ++i) {
    const auto slot = counts.acquire(
        v4(192, 168, static_cast<unsigned char>(i >> 8U), static_cast<unsigned char>(i)), 1);
    ASSERT_TRUE(slot);
    ASSERT_NE(*slot, ClientCounts::kUncounted) << i;
    held.push_back(*slot);
  }
  for (unsigned i = 0; i < 1024; ++i) {
    EXPECT_FALSE(counts.acquire(
        v4(192, 168, static_cast<unsigned char>(i >> 8U), static_cast<unsigned char>(i)), 1));
  }
  for (const auto slot : held) counts.release(slot);
  EXPECT_EQ(counts.count(v4(192, 168, 0, 7)), 0U);
}

TEST(ClientCounts, ReleasesFromOtherThreadsWhileOneThreadAcquires) {
  ClientCounts counts(64);
  const auto key = v4(127, 0, 0, 1);
  constexpr int kRounds = 20000;
  constexpr std::uint32_t kLimit = 8;
  std::vector<std::thread> releasers;
  std::atomic<int> acquired{0};
  std::atomic<bool> done{false};
  // The acquiring thread hands slots to releasers through a small ring of atomics.
  std::array<std::atomic<std::int64_t>, 16> ring{};
  for (auto& r : ring) r.store(-1);
  for (int t = 0; t < 3; ++t) {
    releasers.emplace_back([&] {
      while (!done.load() ||
             std::any_of(ring.begin(), ring.end(), [](auto& r) { return r.load() >= 0; })) {
        for (auto& r : ring) {
          const std::int64_t slot = r.exchange(-1);
          if (slot >= 0) counts.release(static_cast<ClientCounts::Slot>(slot));
        }
      }
    });
  }
  std::size_t next = 0;
  while (acquired.load() < kRounds) {
    const auto slot = counts.acquire(key, kLimit);
    if (!slot) {
      std::this_thread::yield();
      continue;
    }
    // Never above the limit, whatever the releasers do meanwhile.
    ASSERT_LE(counts.count(key), kLimit);
    ++acquired;
    std::int64_t expected = -1;
    while (!ring[next].compare_exchange_weak(expected, *slot)) {
      expected = -1;
      next = (next + 1) % ring.size();
    }
    next = (next + 1) % ring.size();
  }
  done.store(true);
  for (auto& t : releasers) t.join();
  EXPECT_EQ(counts.count(key), 0U);
}

}  // namespace
}  // namespace wf::http
