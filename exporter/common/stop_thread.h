// Ending a background thread that sleeps on a condition variable until a
// stop flag is set.
#pragma once

#include <condition_variable>
#include <mutex>
#include <thread>

namespace sockpressure {

// Sets `stop` under `mu`, so that the thread cannot miss it between testing
// the flag and starting to wait, wakes every waiter on `cv` and joins
// `thread` (a no-op when it was never started or has been joined already).
inline void StopAndJoin(std::mutex& mu, std::condition_variable& cv, bool& stop, std::thread& thread) {
  {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
  }
  cv.notify_all();
  if (thread.joinable()) thread.join();
}

}  // namespace sockpressure
