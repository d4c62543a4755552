#include "wheelforge/util/redact.hpp"

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

namespace wf {
namespace {

// The longest authority (userinfo and host) looked at after "://".
constexpr std::size_t kAuthorityWindow = 512;

struct Registry {
  std::mutex mu;
  // Replaced as a whole when a secret is added, so that readers hold a snapshot without a lock.
  std::shared_ptr<const std::vector<std::string>> secrets =
      std::make_shared<const std::vector<std::string>>();
  std::atomic<std::size_t> count{0};
  std::atomic<std::size_t> longest{0};
};

Registry& registry() {
  static Registry r;
  return r;
}

std::shared_ptr<const std::vector<std::string>> snapshot() {
  Registry& r = registry();
  if (r.count.load(std::memory_order_acquire) == 0) return nullptr;
  std::lock_guard lock(r.mu);
  return r.secrets;
}

bool ends_authority(char c) {
  const auto u = static_cast<unsigned char>(c);
  return c == '/' || c == '?' || c == '#' || c == '"' || c == '\'' || c == '<' || c == '>' ||
         c == '`' || u <= 0x20 || u == 0x7F;
}

// Calls mask(begin, end) for the userinfo of every URL in `text`.
template <typename Mask>
bool for_each_userinfo(std::string_view text, Mask&& mask) {
  bool found = false;
  for (std::size_t p = text.find("://"); p != std::string_view::npos; p = text.find("://", p + 3)) {
    const std::size_t start = p + 3;
    const std::size_t limit = std::min(text.size(), start + kAuthorityWindow);
    std::size_t at = std::string_view::npos;
    for (std::size_t j = start; j < limit && !ends_authority(text[j]); ++j) {
      if (text[j] == '@') at = j;
    }
    if (at != std::string_view::npos && at > start) {
      found = true;
      mask(start, at);
    }
  }
  return found;
}

}  // namespace

void add_secret(std::string_view secret) {
  if (secret.size() < kMinSecretLength) return;
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  if (std::find(r.secrets->begin(), r.secrets->end(), secret) != r.secrets->end()) return;
  auto next = std::make_shared<std::vector<std::string>>(*r.secrets);
  next->emplace_back(secret);
  r.secrets = std::move(next);
  r.count.store(r.secrets->size(), std::memory_order_release);
  r.longest.store(std::max(r.longest.load(), secret.size()));
}

bool needs_redaction(std::string_view text) {
  if (for_each_userinfo(text, [](std::size_t, std::size_t) {})) return true;
  if (const auto secrets = snapshot()) {
    for (const auto& s : *secrets) {
      if (text.find(s) != std::string_view::npos) return true;
    }
  }
  return false;
}

bool redact_in_place(std::string& text) {
  bool changed = for_each_userinfo(text, [&text](std::size_t begin, std::size_t end) {
    std::fill(text.begin() + static_cast<std::ptrdiff_t>(begin),
              text.begin() + static_cast<std::ptrdiff_t>(end), '*');
  });
  if (const auto secrets = snapshot()) {
    for (const auto& s : *secrets) {
      for (std::size_t at = text.find(s); at != std::string::npos; at = text.find(s, at)) {
        text.replace(at, s.size(), s.size(), '*');
        at += s.size();
        changed = true;
      }
    }
  }
  return changed;
}

std::string redact(std::string_view text) {
  std::string out(text);
  redact_in_place(out);
  return out;
}

std::size_t redaction_margin() {
  return std::max(kAuthorityWindow, registry().longest.load());
}

}  // namespace wf
