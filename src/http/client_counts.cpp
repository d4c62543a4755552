#include "client_counts.hpp"

#include <algorithm>
#include <random>

namespace wf::http {
namespace {

std::uint64_t mix(std::uint64_t x) {
  // splitmix64's finalizer.
  x ^= x >> 30U;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27U;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31U;
  return x;
}

}  // namespace

ClientCounts::Key ClientCounts::ipv4(const std::array<unsigned char, 4>& bytes) {
  Key key{0, 4};
  for (const unsigned char b : bytes) key.value = (key.value << 8U) | b;
  return key;
}

ClientCounts::Key ClientCounts::ipv6(const std::array<unsigned char, 16>& bytes) {
  // ::ffff:a.b.c.d is an IPv4 client on a dual-stack socket.
  const bool mapped =
      std::all_of(bytes.begin(), bytes.begin() + 10, [](auto b) { return b == 0; }) &&
      bytes[10] == 0xff && bytes[11] == 0xff;
  if (mapped) return ipv4({bytes[12], bytes[13], bytes[14], bytes[15]});
  Key key{0, 6};
  for (std::size_t i = 0; i < 8; ++i) key.value = (key.value << 8U) | bytes[i];
  return key;
}

ClientCounts::ClientCounts(std::size_t max_connections) {
  // Twice the cap, so that at most half the slots are live and a window is never full.
  std::size_t size = 64;
  while (size < 2 * max_connections) size *= 2;
  mask_ = size - 1;
  entries_ = std::make_unique<Entry[]>(size);
  seed_ = (static_cast<std::uint64_t>(std::random_device{}()) << 32U) ^ std::random_device{}();
}

std::size_t ClientCounts::start_of(const Key& key) const {
  return static_cast<std::size_t>(mix(key.value ^ seed_ ^ (std::uint64_t{key.family} << 56U))) &
         mask_;
}

std::optional<ClientCounts::Slot> ClientCounts::acquire(const Key& key, std::uint32_t limit) {
  const std::size_t start = start_of(key);
  const std::size_t window = std::min(kWindow, mask_ + 1);
  std::optional<std::size_t> free;
  for (std::size_t i = 0; i < window; ++i) {
    const std::size_t at = (start + i) & mask_;
    Entry& e = entries_[at];
    const std::uint32_t n = e.count.load(std::memory_order_acquire);
    if (n > 0 && e.family == key.family && e.value == key.value) {
      if (n >= limit) return std::nullopt;
      e.count.fetch_add(1, std::memory_order_relaxed);
      return static_cast<Slot>(at);
    }
    if (n == 0 && !free) free = at;
    // A slot never used ends the search: no address was ever placed beyond it.
    if (e.family == 0) break;
  }
  if (limit == 0) return std::nullopt;
  if (!free) return kUncounted;
  // Nobody else touches a slot whose count is zero: no connection holds it.
  Entry& e = entries_[*free];
  e.family = key.family;
  e.value = key.value;
  e.count.fetch_add(1, std::memory_order_release);
  return static_cast<Slot>(*free);
}

void ClientCounts::release(Slot slot) {
  if (slot == kUncounted || slot > mask_) return;
  entries_[slot].count.fetch_sub(1, std::memory_order_release);
}

std::uint32_t ClientCounts::count(const Key& key) const {
  const std::size_t start = start_of(key);
  const std::size_t window = std::min(kWindow, mask_ + 1);
  for (std::size_t i = 0; i < window; ++i) {
    const Entry& e = entries_[(start + i) & mask_];
    const std::uint32_t n = e.count.load(std::memory_order_acquire);
    if (n > 0 && e.family == key.family && e.value == key.value) return n;
    if (e.family == 0) break;
  }
  return 0;
}

}  // namespace wf::http
