#include "wheelforge/app/log_output.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <ctime>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::app {

namespace {

/// "info", "warning", ...: the level's name in text-style lines.
std::string_view level_name(LogLevel level) {
  switch (level) {
    case LogLevel::trace:
      return "trace";
    case LogLevel::debug:
      return "debug";
    case LogLevel::info:
      return "info";
    case LogLevel::warn:
      return "warning";
    case LogLevel::error:
      return "error";
    case LogLevel::critical:
      return "critical";
  }
  return "info";
}

/// The syslog priority journald reads from a line's "<N>" prefix.
int syslog_priority(LogLevel level) {
  switch (level) {
    case LogLevel::critical:
      return 2;
    case LogLevel::error:
      return 3;
    case LogLevel::warn:
      return 4;
    case LogLevel::trace:
    case LogLevel::debug:
      return 7;
    case LogLevel::info:
      break;
  }
  return 6;
}

/// A cache of the calendar part of a time stamp, "YYYY-MM-DDTHH:MM:SS.", for one second.
struct Stamp {
  std::int64_t second = std::numeric_limits<std::int64_t>::min();
  std::array<char, 24> text{};
  std::size_t size = 0;
};

/// One logging thread's lines. Only that thread appends; the writer thread takes them.
struct Slot {
  std::mutex mutex;
  std::string pending;        // guarded by mutex
  std::uint64_t dropped = 0;  // guarded by mutex
  bool orphaned = false;      // its thread has ended (guarded by mutex)
  bool closed = false;        // its output is gone (guarded by mutex)
  std::string spare;          // the writer's side of the double buffer
  Stamp stamp;                // the owning thread's
};

std::atomic<std::uint64_t> g_next_output_id{1};

/// The slots of the calling thread, one per output it has logged to. Destroyed when the
/// thread ends: its slots are then written one last time and forgotten.
struct ThreadSlots {
  std::vector<std::pair<std::uint64_t, std::shared_ptr<Slot>>> entries;
  ThreadSlots() = default;
  ThreadSlots(const ThreadSlots&) = delete;
  ThreadSlots& operator=(const ThreadSlots&) = delete;
  ~ThreadSlots();
};

thread_local bool t_slots_gone = false;  // trivially destructible: readable during exit
thread_local ThreadSlots t_slots;

ThreadSlots::~ThreadSlots() {
  t_slots_gone = true;
  for (auto& entry : entries) {
    const std::lock_guard lock(entry.second->mutex);
    entry.second->orphaned = true;
  }
}

}  // namespace

struct LogOutput::Impl {
  int fd;
  Style style;
  std::size_t max_pending;
  std::uint64_t id = g_next_output_id.fetch_add(1);

  std::mutex slots_mutex;
  std::vector<std::shared_ptr<Slot>> slots;  // guarded by slots_mutex

  std::mutex mutex;  // the writer's state below
  std::condition_variable wake;
  std::condition_variable done;
  bool urgent = false;
  bool stop = false;
  std::uint64_t flush_requested = 0;
  std::uint64_t flushed = 0;
  std::thread writer;

  Impl(int fd_, Style style_, std::size_t max_pending_)
      : fd(fd_), style(style_), max_pending(max_pending_) {
    // The writer thread must never be the one a process signal is delivered to: it starts
    // with every signal blocked (serve() takes SIGTERM/SIGINT/SIGHUP with sigwait).
    sigset_t all;
    sigset_t previous;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &previous);
    writer = std::thread([this] { write_loop(); });
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  }

  /// The calling thread's slot for this output, made on its first line.
  Slot& slot_of_this_thread() {
    for (auto& [owner, slot] : t_slots.entries) {
      if (owner == id) return *slot;
    }
    // Forget slots of outputs that no longer exist.
    std::erase_if(t_slots.entries, [](const auto& entry) {
      const std::lock_guard lock(entry.second->mutex);
      return entry.second->closed;
    });
    auto slot = std::make_shared<Slot>();
    {
      const std::lock_guard lock(slots_mutex);
      slots.push_back(slot);
    }
    t_slots.entries.emplace_back(id, slot);
    return *slot;
  }

  void format(std::string& out, Stamp& stamp, LogLevel level,
              std::chrono::system_clock::time_point time, std::string_view message) const {
    if (style == Style::journal) {
      out.push_back('<');
      out.push_back(static_cast<char>('0' + syslog_priority(level)));
      out.push_back('>');
    } else {
      const auto micros =
          std::chrono::duration_cast<std::chrono::microseconds>(time.time_since_epoch()).count();
      const std::int64_t second = micros >= 0 ? micros / 1'000'000 : (micros + 1) / 1'000'000 - 1;
      if (second != stamp.second) {
        const auto t = static_cast<std::time_t>(second);
        std::tm tm{};
        ::gmtime_r(&t, &tm);
        stamp.size = std::strftime(stamp.text.data(), stamp.text.size(), "%Y-%m-%dT%H:%M:%S.", &tm);
        stamp.second = second;
      }
      out.append(stamp.text.data(), stamp.size);
      append_decimal(out, static_cast<std::uint64_t>(micros - second * 1'000'000), 6);
      out += "Z ";
      out += level_name(level);
      out.push_back(' ');
    }
    out += message;
    out.push_back('\n');
  }

  void line(LogLevel level, std::chrono::system_clock::time_point time, std::string_view message) {
    if (t_slots_gone) {
      // The thread is ending (static destructors log here): write the line directly.
      Stamp stamp;
      std::string text;
      format(text, stamp, level, time, message);
      (void)write_all(fd, text.data(), text.size());
      return;
    }
    Slot& slot = slot_of_this_thread();
    bool wake_writer = level >= LogLevel::warn;
    {
      const std::lock_guard lock(slot.mutex);
      if (slot.closed || slot.pending.size() >= max_pending) {
        ++slot.dropped;
        return;
      }
      format(slot.pending, slot.stamp, level, time, message);
      wake_writer = wake_writer || slot.pending.size() >= kWriteAt;
    }
    if (wake_writer) {
      {
        const std::lock_guard lock(mutex);
        urgent = true;
      }
      wake.notify_one();
    }
  }

  void flush() {
    std::unique_lock lock(mutex);
    if (stop) return;
    const std::uint64_t ticket = ++flush_requested;
    urgent = true;
    wake.notify_one();
    done.wait(lock, [&] { return flushed >= ticket || stop; });
  }

  /// Takes every slot's lines, writes them (one slot after the other, so lines of different
  /// threads within one batch are grouped by thread), and forgets slots of ended threads.
  void write_pending() {
    std::vector<std::shared_ptr<Slot>> current;
    {
      const std::lock_guard lock(slots_mutex);
      current = slots;
    }
    bool forget = false;
    for (const auto& slot : current) {
      std::uint64_t dropped = 0;
      {
        const std::lock_guard lock(slot->mutex);
        slot->spare.swap(slot->pending);
        dropped = std::exchange(slot->dropped, 0);
        forget = forget || (slot->orphaned && slot->spare.empty());
      }
      if (dropped > 0) {
        Stamp stamp;
        format(slot->spare, stamp, LogLevel::warn, std::chrono::system_clock::now(),
               "log: " + std::to_string(dropped) + " line(s) dropped, the log output is too slow");
      }
      if (!slot->spare.empty()) (void)write_all(fd, slot->spare.data(), slot->spare.size());
      slot->spare.clear();
      if (slot->spare.capacity() > kKeepCapacity) slot->spare.shrink_to_fit();
    }
    if (forget) {
      const std::lock_guard lock(slots_mutex);
      std::erase_if(slots, [](const std::shared_ptr<Slot>& slot) {
        const std::lock_guard slot_lock(slot->mutex);
        return slot->orphaned && slot->pending.empty();
      });
    }
  }

  void write_loop() {
    std::unique_lock lock(mutex);
    while (true) {
      wake.wait_for(lock, kInterval, [this] { return urgent || stop; });
      const bool stopping = stop;
      const std::uint64_t serving = flush_requested;
      urgent = false;
      lock.unlock();
      write_pending();
      lock.lock();
      flushed = serving;
      done.notify_all();
      if (stopping) return;
    }
  }

  void close() {
    {
      const std::lock_guard lock(mutex);
      stop = true;
    }
    wake.notify_one();
    writer.join();
    const std::lock_guard lock(slots_mutex);
    for (const auto& slot : slots) {
      const std::lock_guard slot_lock(slot->mutex);
      slot->closed = true;
      if (!slot->pending.empty()) (void)write_all(fd, slot->pending.data(), slot->pending.size());
      slot->pending.clear();
    }
    slots.clear();
  }

  static constexpr std::size_t kWriteAt = 64 * 1024;
  static constexpr std::size_t kKeepCapacity = 1024 * 1024;
};

LogOutput::LogOutput(int fd, Style style, std::size_t max_pending)
    : impl_(std::make_unique<Impl>(fd, style, max_pending)) {}

LogOutput::~LogOutput() {
  impl_->close();
}

void LogOutput::line(LogLevel level, std::chrono::system_clock::time_point time,
                     std::string_view message) {
  impl_->line(level, time, message);
}

void LogOutput::flush() {
  impl_->flush();
}

}  // namespace wf::app
