#pragma once
// Open connections per client address, for the per-client connection cap
// (max_connections_per_client): one address cannot take every connection the server has.
//
// Without locks: connections are counted by the one thread that accepts them (acquire) and
// let go by whichever network thread served them (release). The table is open addressing
// over a window of slots; a slot's address is written by the accepting thread only, and its
// count is an atomic that the other threads only decrement. Since a single thread adds, an
// address never has two live slots, and the count it reads can be higher than the truth (a
// release racing with it) but never lower: the cap is never exceeded.

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>

namespace wf::http {

class ClientCounts {
 public:
  /// A client address as counted: IPv4 addresses whole; IPv6 ones by their /64 prefix (a
  /// single host commonly has a whole /64 to pick addresses from); IPv4-mapped IPv6
  /// addresses as the IPv4 address.
  struct Key {
    std::uint64_t value = 0;
    std::uint8_t family = 0;  // 4 or 6
    friend bool operator==(const Key&, const Key&) = default;
  };
  [[nodiscard]] static Key ipv4(const std::array<unsigned char, 4>& bytes);
  [[nodiscard]] static Key ipv6(const std::array<unsigned char, 16>& bytes);

  /// What acquire() hands out: release() it when the connection ends.
  using Slot = std::uint32_t;
  /// A connection that could not be counted (only if the table were crowded beyond its
  /// design: it holds twice the connection cap); release() ignores it.
  static constexpr Slot kUncounted = UINT32_MAX;

  /// A table for up to `max_connections` connections open at once.
  explicit ClientCounts(std::size_t max_connections);

  /// Counts one more connection of `key` unless it has `limit` open already: the slot to
  /// release, or nothing at the limit. Only ever called from one thread (the acceptor's).
  [[nodiscard]] std::optional<Slot> acquire(const Key& key, std::uint32_t limit);

  /// Ends a connection counted by acquire(). Any thread; never blocks.
  void release(Slot slot);

  /// The connections `key` has open. The acceptor's thread (and tests).
  [[nodiscard]] std::uint32_t count(const Key& key) const;

 private:
  struct Entry {
    std::atomic<std::uint32_t> count{0};
    std::uint8_t family = 0;  // 0: never used
    std::uint64_t value = 0;
  };
  [[nodiscard]] std::size_t start_of(const Key& key) const;

  static constexpr std::size_t kWindow = 64;
  std::size_t mask_ = 0;
  std::uint64_t seed_ = 0;  // keeps the slots of addresses unpredictable to clients
  std::unique_ptr<Entry[]> entries_;
};

}  // namespace wf::http
