// A response body produced a piece at a time, so that a large one (the
// /metrics exposition of 10,000 cgroups is 8 MB of text) never lies whole in
// memory: the front writes each piece to the socket before asking for the
// next, as HTTP/1.1 chunked transfer coding.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace sockpressure {

// Not thread-safe: one caller at a time (the front hands a stream from its
// I/O thread to one worker and back; never to two threads at once).
class BodyStream {
 public:
  virtual ~BodyStream() = default;
  // Appends the next piece of the body to `out`. Returns false when the body
  // is complete (this call may still have appended its last piece). A piece
  // may be empty while more follows.
  virtual bool Next(std::string* out) = 0;
  // Bytes the stream holds of its own between two pieces (a compressor's
  // state), not counting what it shares (the snapshot it renders): what it
  // pins for as long as its reader takes (the front's budget, http_front.h).
  virtual size_t Footprint() const { return 0; }
};

// gzip (RFC 1952) of `inner`, compressed as it is produced: the state is
// deflate's window and buffers (about 300 KB), whatever the body's size.
std::unique_ptr<BodyStream> NewGzipStream(std::unique_ptr<BodyStream> inner);

// The whole of `stream`, concatenated (tests, golden files, benchmarks).
std::string ReadAll(BodyStream& stream);

}  // namespace sockpressure
