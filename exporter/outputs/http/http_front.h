// The agent's own HTTP/1.1 front (plain or TLS), built to keep answering
// under hostile clients on the node's network. Why not cpp-httplib 0.11.4:
// there a connection occupies one of a fixed set of worker threads from
// accept() until it closes, with a timeout per recv() rather than per
// request, and listen() uses a backlog of 5; none of its hooks change that,
// so 8 slowloris connections starve every route (docs/threat-model.md).
//
// Design: one I/O thread owns every connection (epoll, non-blocking sockets,
// OpenSSL in non-blocking mode). It reads each request head whole within a
// deadline counted from accept (or from the end of the previous response),
// with a bounded size, and answers refusals itself at once. Complete requests
// go either to an inline handler on the I/O thread (/healthz: cheap, so no
// /metrics burst can starve it) or to a small worker pool through a queue
// bounded by max_requests (more get 503). Workers only compute responses; the
// I/O thread writes them; a streamed body goes back to a worker for each next
// piece once the last is sent. Over max_connections, the oldest connection that is
// not being served is shed. What slow readers may make the agent and the
// kernel hold is bounded (docs/threat-model.md "Slow readers"): a fixed send
// buffer, one budget for all unsent answers past which the slowest reader
// is reset, a reset at the write deadline, and no orphaned socket after the
// agent's own close.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "exporter/outputs/http/body_stream.h"
#include "exporter/outputs/http/http_request.h"
#include "exporter/outputs/http/listen_socket.h"
#include "exporter/outputs/http/route.h"

namespace sockpressure {

struct FrontOptions {
  double request_timeout_seconds = 10;  // whole request head (TLS handshake included), idle keep-alive too
  double write_timeout_seconds = 10;    // whole response, plus 1 s per MB of it (as its pieces come)
  int max_requests = 40;                // queued + running in workers; more get 503 at once
  int workers = 4;
  int max_connections = 1000;  // lowered to fit RLIMIT_NOFILE
  // SO_SNDBUF of every accepted connection. Fixed, because autotuning lets
  // the kernel queue up to tcp_wmem[2] (4 MiB by default) for each client,
  // also one that reads a few bytes a second, and keeps it queued after the
  // agent gave up on it. 256 KiB keeps a 10 ms path at 25 MB/s, more than a
  // scrape needs (the kernel doubles the number for its bookkeeping: ss shows
  // tb524288).
  int send_buffer_bytes = 256 << 10;
  // What answers not yet taken by their clients may hold, all connections
  // together: the unsent pieces, their streams' own state (gzip: 270 KB) and,
  // for each, what the kernel may queue (twice send_buffer_bytes). Over it,
  // the answer that has gone out slowest is reset (HttpFront::Relieve),
  // then the next, until the rest fit: so that no number of slow readers
  // can take the agent's memory past its limit, or the node's TCP memory
  // towards tcp_mem pressure, while clients that read are not held up.
  size_t max_held_bytes = 64 << 20;
  // Told of each answer the front resets (RST) before its client took all
  // of it, and why: "budget" (over max_held_bytes, the slowest first) or
  // "deadline" (past its write deadline, or its client did not close in
  // time after the last byte). Those cut by Stop() are not told. Runs on
  // the I/O thread: it must be cheap and thread-safe.
  std::function<void(const char* reason)> on_reset;
};

// Thread-safety: Start() and Stop() from one thread; handlers run on the I/O
// thread (inline) or on worker threads and must be thread-safe.
class HttpFront {
 public:
  // `inline_handler` returns true when it answered the request on the I/O
  // thread (it must be cheap); otherwise `handler` answers it on a worker.
  // `observe` sees every response's request path (empty when the request
  // never got that far) and status, on the thread that produced it.
  HttpFront(FrontOptions options, std::function<bool(const RequestHead&, HttpResponse*)> inline_handler,
            HttpHandler handler, std::function<void(const std::string& path, int status)> observe);
  ~HttpFront();

  void Start(std::shared_ptr<ListenSocket> socket);
  void Stop();

 private:
  struct Conn;
  struct Done {
    uint64_t id;
    std::vector<std::string> bytes;      // on the wire as they are: head, body, a piece and its framing
    std::unique_ptr<BodyStream> stream;  // more of the body, to produce once `bytes` are sent
    bool keep_alive = true;
    bool chunked = false;    // the stream's pieces are framed as chunks
    bool continued = false;  // `bytes` continue a response already begun
    bool abort = false;      // the body failed midway: close the connection
  };
  struct Job {
    uint64_t id;
    RequestHead head;
    std::unique_ptr<BodyStream> stream;  // set: produce the next piece of this body, not a response
    bool chunked = false;
    bool trim = false;  // return free heap memory to the kernel, and answer nothing
  };

  void Loop();
  void Accept();
  void OnEvent(Conn* c, uint32_t events);
  void ReadMore(Conn* c);
  void TryRequest(Conn* c);
  void Respond(Conn* c, const RequestHead* head, HttpResponse r, bool keep_alive);
  void Queue(Conn* c, std::vector<std::string> bytes, std::unique_ptr<BodyStream> stream, bool keep_alive,
             bool chunked);
  void Load(Conn* c, std::vector<std::string> bytes, std::unique_ptr<BodyStream> stream);
  void Push(Job job);
  void WriteMore(Conn* c);
  void Finished(Conn* c);
  void Close(Conn* c);
  void Reset(Conn* c);  // Close() with RST: nothing left queued in the kernel
  void Linger(Conn* c, double deadline);  // shuts the agent's side; kClosing until `deadline`
  void Hold(Conn* c);   // counts what c's answer holds now against the budget
  void Relieve();       // resets the slowest readers while over the budget
  void TrimAfterBurst();
  void Watch(Conn* c, bool read, bool write);
  bool ShedOne();
  void Sweep();
  void TakeDone();
  void Work();
  Done Answer(Job job);
  static std::string Serialize(const RequestHead* head, const HttpResponse& r, bool keep_alive);

  FrontOptions options_;
  std::function<bool(const RequestHead&, HttpResponse*)> inline_handler_;
  HttpHandler handler_;
  std::function<void(const std::string&, int)> observe_;
  std::shared_ptr<ListenSocket> socket_;
  int epoll_ = -1;
  int wake_ = -1;  // eventfd: workers finished, or Stop()
  std::atomic<bool> stop_{false};
  std::thread io_;
  std::vector<std::thread> workers_;
  // I/O thread only.
  std::map<uint64_t, std::unique_ptr<Conn>> conns_;
  uint64_t next_id_ = 1;
  int in_flight_ = 0;  // requests handed to workers, not yet written back
  size_t held_ = 0;    // Conn::held over every connection
  size_t held_peak_ = 0;  // the most held_ was since the last trim
  // Shared between the I/O thread and workers.
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  std::vector<Done> done_;
};

}  // namespace sockpressure
