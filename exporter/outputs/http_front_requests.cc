#include "exporter/outputs/http_front.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "exporter/common/logging.h"
#include "exporter/outputs/http_front_conn.h"

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
      FrontResponse r{431, {{"Content-Type", "text/plain"}}, "request head too large\n"};
      Respond(c, nullptr, std::move(r), false);
    }
    return;  // wait for more within the deadline
  }
  RequestHead head;
  HeadVerdict verdict = ParseRequestHead(absl::string_view(c->in).substr(0, end), &head);
  c->in.erase(0, end + 4);
  if (verdict.status != 0) {
    FrontResponse r{verdict.status, {{"Content-Type", "text/plain"}}, verdict.reason + "\n"};
    if (verdict.status == 405) r.headers.emplace_back("Allow", "GET, HEAD");
    return Respond(c, nullptr, std::move(r), false);
  }
  FrontResponse r;
  if (inline_handler_(head, &r)) return Respond(c, &head, std::move(r), head.keep_alive);
  if (in_flight_ >= options_.max_requests) {
    FrontResponse busy{503, {{"Content-Type", "text/plain"}, {"Retry-After", "1"}}, "too many concurrent requests\n"};
    return Respond(c, &head, std::move(busy), head.keep_alive);
  }
  ++in_flight_;
  c->state = Conn::kServing;
  Watch(c, false, false);
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back({c->id, std::move(head)});
  }
  cv_.notify_one();
}

void HttpFront::Respond(Conn* c, const RequestHead* head, FrontResponse r, bool keep_alive) {
  if (observe_) observe_(head != nullptr ? head->path : "", r.status);
  Queue(c, Serialize(head, r, keep_alive), SharedBody(head, r), keep_alive);
}

void HttpFront::Queue(Conn* c, std::string bytes, std::shared_ptr<const std::string> shared, bool keep_alive) {
  c->out = std::move(bytes);
  c->shared = std::move(shared);
  c->out_off = 0;
  c->keep_alive = keep_alive && !c->eof;
  c->state = Conn::kWriting;
  // Whole-response deadline, stretched for large bodies at 1 MB/s (a 40 MB
  // exposition to a remote scraper) but still bounded against slow readers.
  const size_t total = c->out.size() + (c->shared ? c->shared->size() : 0);
  c->deadline = HttpFrontNow() + options_.write_timeout_seconds + static_cast<double>(total) / 1e6;
  WriteMore(c);
}

void HttpFront::WriteMore(Conn* c) {
  const size_t head = c->out.size();
  const size_t total = head + (c->shared ? c->shared->size() : 0);
  while (c->out_off < total) {
    // The head, then the shared body, each from where it lies.
    const char* p = c->out_off < head ? c->out.data() + c->out_off : c->shared->data() + (c->out_off - head);
    size_t left = c->out_off < head ? head - c->out_off : total - c->out_off;
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
    } else {
      // MSG_MORE while the shared body follows the head: one segment, not two.
      int more = c->out_off < head && total > head ? MSG_MORE : 0;
      ssize_t n = ::send(c->fd, p, left, MSG_NOSIGNAL | more);
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) return Watch(c, false, true);
        if (errno == EINTR) continue;
        return Close(c);
      }
      c->out_off += static_cast<size_t>(n);
    }
  }
  Finished(c);
}

void HttpFront::Finished(Conn* c) {
  if (!c->keep_alive) {
    if (c->ssl != nullptr) SSL_shutdown(c->ssl);  // best effort: sends close_notify
    ::shutdown(c->fd, SHUT_WR);
    return Close(c);
  }
  c->out.clear();
  c->out.shrink_to_fit();  // an idle connection should not pin a /metrics-sized buffer
  c->shared.reset();      // nor a rendering that a newer sample has replaced
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
    --in_flight_;  // the only decrement, paired with the increment in TryRequest
    auto it = conns_.find(d.id);
    if (it == conns_.end() || it->second->state != Conn::kServing) continue;  // client went away
    Queue(it->second.get(), std::move(d.bytes), std::move(d.shared), d.keep_alive);
  }
}

void HttpFront::Work() {
  // Workers yield the CPU to the I/O thread, which answers /healthz and
  // moves every byte: under a scrape burst the probe stays fast. (Per-thread
  // nice on Linux; raising it back would need CAP_SYS_NICE, never wanted.)
  ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 5);
  while (true) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_.load() || !jobs_.empty(); });
      if (stop_.load()) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    FrontResponse r;
    try {
      handler_(job.head, &r);
    } catch (const std::exception& e) {
      SP_LOG_ERROR("HTTP handler for ", job.head.path, " failed: ", e.what());
      r = {500, {{"Content-Type", "text/plain"}}, "internal error\n"};
    }
    if (observe_) observe_(job.head.path, r.status);
    Done d{job.id, Serialize(&job.head, r, job.head.keep_alive), SharedBody(&job.head, r), job.head.keep_alive};
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_.push_back(std::move(d));
    }
    uint64_t one = 1;
    (void)!::write(wake_, &one, sizeof one);
  }
}

std::string HttpFront::Serialize(const RequestHead* head, const FrontResponse& r, bool keep_alive) {
  std::string out = absl::StrCat("HTTP/1.1 ", r.status, " ", StatusText(r.status), "\r\n");
  for (const auto& [k, v] : r.headers) absl::StrAppend(&out, k, ": ", v, "\r\n");
  const size_t length = r.shared_body ? r.shared_body->size() : r.body.size();
  absl::StrAppend(&out, "Content-Length: ", length, "\r\nConnection: ", keep_alive ? "keep-alive" : "close",
                  "\r\n\r\n");
  if ((head == nullptr || head->method != "HEAD") && !r.shared_body) out += r.body;
  return out;
}

std::shared_ptr<const std::string> HttpFront::SharedBody(const RequestHead* head, const FrontResponse& r) {
  if (head != nullptr && head->method == "HEAD") return nullptr;
  return r.shared_body;
}

}  // namespace sockpressure
