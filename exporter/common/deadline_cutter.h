// Cuts a client's request short at its deadline: shuts down the request's
// sockets from a thread of its own.
//
// Why: cpp-httplib's timeouts apply to each recv() and send(), so a peer
// that sends a byte a second holds a request, and the thread making it, for
// as long as it likes. That thread cannot start a watchdog when it needs
// one: its seccomp filter (syscall_filter.h) forbids new threads. So the
// cutter's thread is made with the cutter, before the filter is installed,
// and lives as long as it.
//
// How: the request hands each socket it opens to Watch() (httplib's
// set_socket_options hook), which keeps a duplicate of it; at the deadline
// the cutter shuts the socket down (SHUT_RDWR), so that the blocked call
// returns at once, whatever phase it is in: connect, TLS handshake, the
// answer's head or its body. The duplicate keeps the socket's number from
// being reused by another open until Disarm(), so a cut never hits a socket
// that is not the request's. It cuts again every 100 ms until Disarm(): a
// socket opened after the deadline is cut as well. A write to a cut socket
// fails with EPIPE, and raises SIGPIPE where it is not ignored (main() ignores
// it: OpenSSL writes with write(2), without MSG_NOSIGNAL).
//
// Thread-safety: Arm(), Watch() and Disarm() are for one request at a time,
// from the thread making it (Watch() also from a callback on that thread);
// the cut runs on the cutter's thread under the same lock, so once Disarm()
// returns nothing of the request is touched any more. Shutdown() may be
// called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace sockpressure {

class DeadlineCutter {
 public:
  // Starts the thread, named `thread_name` (15 bytes at most). It holds no
  // capability and runs under the serve filter: it only shuts sockets down.
  explicit DeadlineCutter(std::string thread_name);
  ~DeadlineCutter();  // ends and joins the thread
  DeadlineCutter(const DeadlineCutter&) = delete;
  DeadlineCutter& operator=(const DeadlineCutter&) = delete;

  // A request starts; it must be over by `deadline`.
  void Arm(std::chrono::steady_clock::time_point deadline);
  // A socket of the armed request. Returns false when it could not be
  // duplicated (then it cannot be cut).
  bool Watch(int fd);
  // The request is over; returns whether the deadline cut it.
  bool Disarm();
  // The owner is stopping: the request in flight is cut now, and any armed
  // later at once, so that a stop never waits for a slow peer, even one
  // whose request was about to be armed when Shutdown() was called.
  void Shutdown();

 private:
  void Run();

  const std::string name_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool shut_down_ = false;  // Shutdown() was called: every deadline is now
  bool armed_ = false;
  bool cut_ = false;
  std::chrono::steady_clock::time_point deadline_;
  std::vector<int> fds_;  // duplicates of the armed request's sockets
  std::thread thread_;    // last: starts once the rest is ready
};

}  // namespace sockpressure
