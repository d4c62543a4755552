#pragma once
// Which network thread a new connection goes to. Connections fill the threads in order, a
// few to each, rather than one to each in turn: a thread with several connections finds work
// waiting when it finishes a response and keeps its CPU, while threads with one or two
// connections each sleep and wake for every request. With more threads awake than CPUs free
// (a client or other work on the same machine), each wake-up waits for a CPU, and that wait
// is the latency tail (bench/README.md, "16 cores"). A thread that has been busy lately is
// passed over, so that a few heavy connections (downloads, uploads) still spread out.

#include <cstddef>
#include <span>

namespace wf::http {

/// What the listener knows of a network thread when a connection arrives.
struct ThreadLoad {
  std::size_t connections = 0;  // open connections it serves
  bool busy = false;            // on the CPU most of the time lately
};

/// Connections a thread gets before the next thread is used.
inline constexpr std::size_t kPackedConnections = 8;

/// The index of the thread for a new connection: the first thread, in order, with fewer than
/// `pack` connections that is not busy; when there is none, the one with the fewest
/// connections (the first of those). `threads` must not be empty.
std::size_t choose_thread(std::span<const ThreadLoad> threads,
                          std::size_t pack = kPackedConnections);

}  // namespace wf::http
