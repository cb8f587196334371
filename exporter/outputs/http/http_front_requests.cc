#include "exporter/outputs/http/http_front.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "exporter/common/logging.h"
#include "exporter/common/memory.h"
#include "exporter/outputs/http/http_front_conn.h"
#include "exporter/common/syscall_filter.h"
#include "exporter/common/thread_privilege.h"

// Requests and responses: a complete head is refused, answered inline or
// queued for a worker; workers compute responses, and the I/O thread writes
// them back and readies the connection for the next request.
namespace sockpressure {

void HttpFront::TryRequest(Conn* c) {
  // RFC 9112 section 2.2: ignore empty lines before a request line.
  size_t start = 0;
  while (c->in.compare(start, 2, "\r\n") == 0) start += 2;
  if (start > 0) c->in.erase(0, start);
  size_t end = c->in.find("\r\n\r\n");
  if (end == std::string::npos || end > kMaxRequestHeadBytes) {
    if (c->in.size() > kMaxRequestHeadBytes) {
      HttpResponse r{431, {{"Content-Type", "text/plain"}}, "request head too large\n"};
      Respond(c, nullptr, std::move(r), false);
    }
    return;  // wait for more within the deadline
  }
  RequestHead head;
  HeadVerdict verdict = ParseRequestHead(absl::string_view(c->in).substr(0, end), &head);
  c->in.erase(0, end + 4);
  if (verdict.status != 0) {
    HttpResponse r{verdict.status, {{"Content-Type", "text/plain"}}, verdict.reason + "\n"};
    if (verdict.status == 405) r.headers.emplace_back("Allow", "GET, HEAD");
    return Respond(c, nullptr, std::move(r), false);
  }
  // The client already ended its side: this answer is the last, and its
  // head must say so (Queue() closes after it either way).
  if (c->eof) head.keep_alive = false;
  HttpResponse r;
  if (inline_handler_(head, &r)) return Respond(c, &head, std::move(r), head.keep_alive);
  if (in_flight_ >= options_.max_requests) {
    HttpResponse busy{503, {{"Content-Type", "text/plain"}, {"Retry-After", "1"}}, "too many concurrent requests\n"};
    return Respond(c, &head, std::move(busy), head.keep_alive);
  }
  c->state = Conn::kServing;
  Watch(c, false, false);
  Push({c->id, std::move(head), nullptr, false});
}

void HttpFront::Push(Job job) {
  ++in_flight_;  // paired with the decrement in TakeDone
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
}

void HttpFront::Respond(Conn* c, const RequestHead* head, HttpResponse r, bool keep_alive) {
  // Inline handlers and refusals answer with `body`, never a stream.
  if (observe_) observe_(head != nullptr ? head->path : "", r.status);
  std::vector<std::string> bytes;
  bytes.push_back(Serialize(head, r, keep_alive));
  Queue(c, std::move(bytes), nullptr, keep_alive, false);
}

namespace {

size_t TotalSize(const std::vector<std::string>& segments) {
  size_t n = 0;
  for (const std::string& s : segments) n += s.size();
  return n;
}

}  // namespace

void HttpFront::Queue(Conn* c, std::vector<std::string> bytes, std::unique_ptr<BodyStream> stream, bool keep_alive,
                      bool chunked) {
  c->keep_alive = keep_alive && !c->eof;
  c->chunked = chunked;
  c->answering = true;
  c->answer_start = HttpFrontNow();
  c->answer_sent = 0;
  // Whole-response deadline, stretched for large bodies at 1 MB/s (a 40 MB
  // exposition to a remote scraper) but still bounded against slow readers;
  // each further piece of a stream stretches it by its own size (TakeDone).
  c->deadline = HttpFrontNow() + options_.write_timeout_seconds + static_cast<double>(TotalSize(bytes)) / 1e6;
  Load(c, std::move(bytes), std::move(stream));
}

void HttpFront::Load(Conn* c, std::vector<std::string> bytes, std::unique_ptr<BodyStream> stream) {
  c->out = std::move(bytes);
  c->seg = c->out_off = 0;
  c->stream = std::move(stream);
  c->state = Conn::kWriting;
  Hold(c);
  WriteMore(c);
}

void HttpFront::WriteMore(Conn* c) {
  while (c->seg < c->out.size()) {
    const std::string& s = c->out[c->seg];
    if (c->out_off >= s.size()) {
      ++c->seg;
      c->out_off = 0;
      continue;
    }
    const char* p = s.data() + c->out_off;
    size_t left = s.size() - c->out_off;
    if (c->ssl != nullptr) {
      ERR_clear_error();
      int n = SSL_write(c->ssl, p, static_cast<int>(std::min<size_t>(left, 1 << 20)));
      if (n <= 0) {
        int err = SSL_get_error(c->ssl, n);
        if (err == SSL_ERROR_WANT_WRITE) return Watch(c, false, true);
        if (err == SSL_ERROR_WANT_READ) return Watch(c, true, false);
        return Close(c);
      }
      c->out_off += static_cast<size_t>(n);
      c->answer_sent += static_cast<uint64_t>(n);
    } else {
      // MSG_MORE while more follows (the next segment, or the next piece):
      // a chunk-size line goes out in one segment with its piece, and no
      // piece ends in a half-empty one.
      const bool more = c->seg + 1 < c->out.size() || c->stream;
      ssize_t n = ::send(c->fd, p, left, MSG_NOSIGNAL | (more ? MSG_MORE : 0));
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) return Watch(c, false, true);
        if (errno == EINTR) continue;
        return Close(c);
      }
      c->out_off += static_cast<size_t>(n);
      c->answer_sent += static_cast<uint64_t>(n);
    }
  }
  c->out.clear();
  c->out.shrink_to_fit();  // an idle connection should not pin a /metrics-sized piece
  if (!c->stream) return Finished(c);
  // This piece is out: a worker produces the next.
  c->state = Conn::kServing;
  Watch(c, false, false);
  Push({c->id, RequestHead{}, std::move(c->stream), c->chunked});
  Hold(c);  // what the kernel may still queue for it, until the answer ends
}

void HttpFront::Finished(Conn* c) {
  c->answering = false;
  Hold(c);
  TrimAfterBurst();
  // The client has the rest of the answer's deadline (a second at least) to
  // take what the kernel still holds.
  if (!c->keep_alive) return Linger(c, std::max(c->deadline, HttpFrontNow() + 1));
  c->state = Conn::kReading;
  c->since = HttpFrontNow();
  c->deadline = c->since + options_.request_timeout_seconds;
  Watch(c, true, false);
  if (!c->in.empty()) TryRequest(c);  // pipelined
}


void HttpFront::TakeDone() {
  uint64_t count;
  (void)!::read(wake_, &count, sizeof count);
  std::vector<Done> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done.swap(done_);
  }
  for (Done& d : done) {
    --in_flight_;  // the only decrement, paired with the increment in Push
    auto it = conns_.find(d.id);
    if (it == conns_.end() || it->second->state != Conn::kServing) continue;  // client went away
    Conn* c = it->second.get();
    if (d.abort) {
      Close(c);  // a chunked body without its last chunk: the client sees it cut short
    } else if (d.continued) {
      c->deadline += static_cast<double>(TotalSize(d.bytes)) / 1e6;  // the response's deadline runs on
      Load(c, std::move(d.bytes), std::move(d.stream));
    } else {
      Queue(c, std::move(d.bytes), std::move(d.stream), d.keep_alive, d.chunked);
    }
  }
  Relieve();
}

namespace {

// Appends a piece of a streamed body as it goes on the wire: a chunk of the
// chunked transfer coding (RFC 9112 section 7.1), followed by the last chunk
// when it ends the body; as it is for HTTP/1.0. The piece is moved, not copied.
void AppendPiece(std::string piece, bool last, bool chunked, std::vector<std::string>* out) {
  if (chunked && !piece.empty()) {  // an empty chunk would end the body
    out->push_back(absl::StrCat(absl::Hex(piece.size()), "\r\n"));
    out->push_back(std::move(piece));
    out->push_back(last ? "\r\n0\r\n\r\n" : "\r\n");
  } else if (chunked) {
    if (last) out->push_back("0\r\n\r\n");
  } else {
    out->push_back(std::move(piece));
  }
}

}  // namespace

HttpFront::Done HttpFront::Answer(Job job) {
  Done d;
  d.id = job.id;
  if (job.stream) {  // the next piece of a body being written
    d.continued = true;
    d.chunked = job.chunked;
    d.stream = std::move(job.stream);
    try {
      std::string piece;
      const bool more = d.stream->Next(&piece);
      AppendPiece(std::move(piece), !more, d.chunked, &d.bytes);
      if (!more) d.stream.reset();
    } catch (const std::exception& e) {
      SP_LOG_ERROR("HTTP response body failed midway: ", e.what());
      d.abort = true;
      d.stream.reset();
    }
    return d;
  }
  HttpResponse r;
  std::string first;  // the first piece of a streamed body (HEAD too: its head says what GET would send)
  try {
    handler_(job.head, &r);
    if (r.stream && !r.stream->Next(&first)) {
      // The whole body in one piece (a small node): a plain body with its length.
      r.body = std::move(first);
      r.stream.reset();
    }
  } catch (const std::exception& e) {
    SP_LOG_ERROR("HTTP handler for ", job.head.path, " failed: ", e.what());
    r = {500, {{"Content-Type", "text/plain"}}, "internal error\n"};
  }
  if (observe_) observe_(job.head.path, r.status);
  // HTTP/1.0 has no chunks: a streamed body ends where the connection does.
  d.keep_alive = job.head.keep_alive && (!r.stream || job.head.http11);
  d.chunked = job.head.http11;
  d.bytes.push_back(Serialize(&job.head, r, d.keep_alive));
  if (r.stream && job.head.method != "HEAD") {
    AppendPiece(std::move(first), false, d.chunked, &d.bytes);
    d.stream = std::move(r.stream);
  }
  return d;
}

void HttpFront::Work() {
  // Runs the routes on what clients sent: holds no capability
  // (thread_privilege.h).
  EnterUnprivilegedThread("sp-http-work");
  // Workers yield the CPU to the I/O thread, which answers /healthz and
  // moves every byte: under a scrape burst the probe stays fast. (Per-thread
  // nice on Linux; raising it back would need CAP_SYS_NICE, never wanted.)
  ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 5);
  ConfineThisThread(SyscallProfile::kServe);
  while (true) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_.load() || !jobs_.empty(); });
      if (stop_.load()) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    if (job.trim) {
      ReturnFreeMemory();
      continue;
    }
    Done d = Answer(std::move(job));
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_.push_back(std::move(d));
    }
    uint64_t one = 1;
    (void)!::write(wake_, &one, sizeof one);
  }
}

std::string HttpFront::Serialize(const RequestHead* head, const HttpResponse& r, bool keep_alive) {
  std::string out = absl::StrCat("HTTP/1.1 ", r.status, " ", StatusText(r.status), "\r\n");
  for (const auto& [k, v] : r.headers) absl::StrAppend(&out, k, ": ", v, "\r\n");
  if (!r.stream) {
    absl::StrAppend(&out, "Content-Length: ", r.body.size(), "\r\n");
  } else if (head == nullptr || head->http11) {
    out += "Transfer-Encoding: chunked\r\n";
  }  // else HTTP/1.0: the body ends with the connection
  absl::StrAppend(&out, "Connection: ", keep_alive ? "keep-alive" : "close", "\r\n\r\n");
  if ((head == nullptr || head->method != "HEAD") && !r.stream) out += r.body;
  return out;
}

}  // namespace sockpressure
