// What the two halves of HttpFront share: a connection's state and the clock
// its deadlines use. http_front.cc owns connections (accept, read, shed,
// expire, close); http_front_requests.cc turns request heads into responses
// (inline, or through the worker pool) and writes them back.
// Internal to outputs/http/: only http_front*.cc include it.
#pragma once

#include <openssl/ssl.h>

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "exporter/outputs/http/http_front.h"

namespace sockpressure {

inline double HttpFrontNow() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// I/O thread only.
struct HttpFront::Conn {
  // kClosing: the agent has shut its side after the last answer (a FIN
  // behind what the kernel still has to send) and closes once the client
  // has acknowledged it all, or resets the connection at the deadline
  // (HttpFront::Linger).
  enum State { kHandshake, kReading, kServing, kWriting, kClosing };
  uint64_t id = 0;
  int fd = -1;
  SSL* ssl = nullptr;
  State state = kReading;
  std::string in;
  // What to write, in order (a head, a chunk-size line, a piece, its CRLF):
  // segments so that a piece is written from where the worker made it,
  // never copied into a framed buffer.
  std::vector<std::string> out;
  size_t seg = 0, out_off = 0;         // next byte: out[seg][out_off]
  std::unique_ptr<BodyStream> stream;  // the rest of the body, after `out`
  bool chunked = false;                // its pieces are framed as chunks
  double deadline = 0;  // of the current read or write phase
  double since = 0;     // start of the current read phase, for shedding the oldest
  bool keep_alive = true;
  bool eof = false;  // the client shut down its sending side
  uint32_t watched = 0;
  // The budget (FrontOptions::max_held_bytes): what this connection's answer
  // holds, as last counted by Hold(), and how fast it goes out.
  bool answering = false;  // from the answer's first bytes until its last is sent
  size_t held = 0;
  double answer_start = 0;   // when the last answer's first bytes were ready
  uint64_t answer_sent = 0;  // what the kernel has taken of it
};

}  // namespace sockpressure
