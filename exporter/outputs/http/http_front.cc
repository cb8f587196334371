#include "exporter/outputs/http/http_front.h"

#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>

#include "exporter/outputs/http/http_front_conn.h"
#include "exporter/common/syscall_filter.h"
#include "exporter/common/thread_privilege.h"

// Connection handling: accept, TLS handshake, reading request heads,
// shedding, deadlines, close. What happens to a complete head is in
// http_front_requests.cc.
namespace sockpressure {
namespace {

constexpr uint64_t kListenerKey = 0;
constexpr uint64_t kWakeKey = 1;

// Bytes the kernel holds to send on `fd`, the FIN included, until the
// client acknowledges them (SO_MEMINFO, Linux 4.6); -1 when it cannot tell.
long KernelQueued(int fd) {
  uint32_t mem[SK_MEMINFO_VARS] = {};
  socklen_t len = sizeof mem;
  if (::getsockopt(fd, SOL_SOCKET, SO_MEMINFO, mem, &len) != 0 || len <= SK_MEMINFO_WMEM_QUEUED * sizeof mem[0]) {
    return -1;
  }
  return mem[SK_MEMINFO_WMEM_QUEUED];
}

}  // namespace

HttpFront::HttpFront(FrontOptions options, std::function<bool(const RequestHead&, HttpResponse*)> inline_handler,
                     HttpHandler handler, std::function<void(const std::string&, int)> observe)
    : options_(options),
      inline_handler_(std::move(inline_handler)),
      handler_(std::move(handler)),
      observe_(std::move(observe)) {}

HttpFront::~HttpFront() { Stop(); }

void HttpFront::Start(std::shared_ptr<ListenSocket> socket) {
  socket_ = std::move(socket);
  std::signal(SIGPIPE, SIG_IGN);  // OpenSSL writes with write(2), not send(MSG_NOSIGNAL)
  // Each connection costs an fd: raise the soft limit towards the cap, and
  // lower the cap to what the limit allows, keeping room for other files.
  rlimit rl{};
  const rlim_t want = static_cast<rlim_t>(options_.max_connections) + 256;
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < want) {
    rl.rlim_cur = std::min(want, rl.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &rl);
    ::getrlimit(RLIMIT_NOFILE, &rl);
    const int room = static_cast<int>(rl.rlim_cur) - 256;
    options_.max_connections = std::max(16, std::min(options_.max_connections, room));
  }
  epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenerKey;
  ::epoll_ctl(epoll_, EPOLL_CTL_ADD, socket_->fd(), &ev);
  ev.data.u64 = kWakeKey;
  ::epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &ev);
  next_id_ = kWakeKey + 1;
  for (int i = 0; i < std::max(1, options_.workers); ++i) workers_.emplace_back([this] { Work(); });
  io_ = std::thread([this] { Loop(); });
}

void HttpFront::Stop() {
  if (stop_.exchange(true)) return;
  cv_.notify_all();
  if (wake_ >= 0) {
    uint64_t one = 1;
    (void)!::write(wake_, &one, sizeof one);
  }
  if (io_.joinable()) io_.join();
  for (std::thread& w : workers_) w.join();
  workers_.clear();
  // An answer still being written is cut either way: reset it, so that no
  // orphan holds its queue after the agent is gone.
  while (!conns_.empty()) {
    Conn* c = conns_.begin()->second.get();
    c->state == Conn::kWriting || c->state == Conn::kClosing ? Reset(c) : Close(c);
  }
  if (epoll_ >= 0) ::close(epoll_);
  if (wake_ >= 0) ::close(wake_);
  epoll_ = wake_ = -1;
  socket_.reset();
}

void HttpFront::Loop() {
  // Parses what any client sends: holds no capability (thread_privilege.h).
  EnterUnprivilegedThread("sp-http");
  ConfineThisThread(SyscallProfile::kServe);
  epoll_event events[64];
  double next_sweep = HttpFrontNow() + 0.1;
  while (!stop_.load()) {
    // The sweep (deadlines) needs a tick only while connections are open;
    // an idle agent sleeps until a connection or Stop() (the eventfd)
    // wakes it, instead of waking ten times a second for nothing.
    int n = ::epoll_wait(epoll_, events, 64, conns_.empty() ? -1 : 100);
    for (int i = 0; i < n; ++i) {
      uint64_t key = events[i].data.u64;
      if (key == kListenerKey) {
        Accept();
      } else if (key == kWakeKey) {
        TakeDone();
      } else if (auto it = conns_.find(key); it != conns_.end()) {
        OnEvent(it->second.get(), events[i].events);
      }
    }
    if (double now = HttpFrontNow(); now >= next_sweep) {
      Sweep();
      next_sweep = now + 0.1;
    }
  }
}

void HttpFront::Accept() {
  // Bounded per round so that a connect flood cannot keep the loop from
  // serving the connections it already has.
  for (int i = 0; i < 256; ++i) {
    int fd = ::accept4(socket_->fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE) ShedOne();
      return;
    }
    if (static_cast<int>(conns_.size()) >= options_.max_connections && !ShedOne()) {
      ::close(fd);  // every connection is being served: refuse the newest
      continue;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    // Setting it turns the kernel's send-buffer autotuning off for this
    // socket: what a slow reader can make the node hold (FrontOptions).
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &options_.send_buffer_bytes, sizeof options_.send_buffer_bytes);
    auto c = std::make_unique<Conn>();
    c->id = next_id_++;
    c->fd = fd;
    c->since = HttpFrontNow();
    c->deadline = c->since + options_.request_timeout_seconds;
    if (SSL_CTX* tls = socket_->CurrentTls(); tls != nullptr) {
      c->ssl = SSL_new(tls);
      SSL_set_fd(c->ssl, fd);
      SSL_set_accept_state(c->ssl);
      c->state = Conn::kHandshake;
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = c->id;
    c->watched = EPOLLIN;
    ::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev);
    conns_.emplace(c->id, std::move(c));
  }
}

void HttpFront::Watch(Conn* c, bool read, bool write) {
  uint32_t want = (read ? EPOLLIN : 0u) | (write ? EPOLLOUT : 0u);
  if (want == c->watched) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.u64 = c->id;
  ::epoll_ctl(epoll_, EPOLL_CTL_MOD, c->fd, &ev);
  c->watched = want;
}

void HttpFront::OnEvent(Conn* c, uint32_t events) {
  if (events & (EPOLLERR | EPOLLHUP)) return Close(c);  // a worker's late answer is then dropped
  if (c->state == Conn::kHandshake) {
    ERR_clear_error();
    int rc = SSL_do_handshake(c->ssl);
    if (rc != 1) {
      int err = SSL_get_error(c->ssl, rc);
      if (err == SSL_ERROR_WANT_READ) return Watch(c, true, false);
      if (err == SSL_ERROR_WANT_WRITE) return Watch(c, false, true);
      return Close(c);
    }
    c->state = Conn::kReading;
    Watch(c, true, false);
  }
  if (c->state == Conn::kReading) return ReadMore(c);
  if (c->state == Conn::kWriting) return WriteMore(c);
}

void HttpFront::ReadMore(Conn* c) {
  char buf[16384];
  // Never buffer more than one maximal head (plus pipelined leftovers).
  while (c->in.size() <= kMaxRequestHeadBytes + 4) {
    ssize_t n;
    if (c->ssl != nullptr) {
      ERR_clear_error();
      n = SSL_read(c->ssl, buf, sizeof buf);
      if (n <= 0) {
        if (SSL_get_error(c->ssl, static_cast<int>(n)) == SSL_ERROR_WANT_READ) break;
        return Close(c);
      }
    } else {
      n = ::recv(c->fd, buf, sizeof buf, 0);
      if (n == 0) {
        c->eof = true;  // half-closed: answer what was sent, then close
        break;
      }
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        if (errno == EINTR) continue;
        return Close(c);
      }
    }
    c->in.append(buf, static_cast<size_t>(n));
  }
  if (!c->eof) return TryRequest(c);
  Watch(c, false, false);  // a read-ready EOF would wake the loop forever
  const uint64_t id = c->id;
  TryRequest(c);
  auto it = conns_.find(id);  // TryRequest may have closed it
  if (it != conns_.end() && it->second->state == Conn::kReading) Close(it->second.get());
}

void HttpFront::Close(Conn* c) {
  held_ -= c->held;
  if (c->ssl != nullptr) SSL_free(c->ssl);
  ::epoll_ctl(epoll_, EPOLL_CTL_DEL, c->fd, nullptr);
  ::close(c->fd);
  conns_.erase(c->id);
  TrimAfterBurst();
}

void HttpFront::Reset(Conn* c) {
  // Linger on, for zero seconds: close() sends RST and the kernel frees the
  // send queue at once. A plain close() of a connection whose client stopped
  // reading leaves an orphaned socket holding that queue (up to the send
  // buffer) until the client reads it or the kernel stops probing its closed
  // window, which takes minutes.
  linger lg{1, 0};
  ::setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  Close(c);
}

void HttpFront::Linger(Conn* c, double deadline) {
  // Why not close() at once: the kernel may still hold much of the last
  // answer (up to the send buffer), and a closed socket whose client reads
  // nothing is an orphan that keeps it until the kernel stops probing the
  // client's shut window, minutes later. Kept open, it is the agent's to
  // reset. Not watched: a closing socket is readable (the client's FIN) or
  // hung up for good, and Sweep() looks at it every 0.1 s instead.
  if (c->ssl != nullptr) SSL_shutdown(c->ssl);  // best effort: sends close_notify
  ::shutdown(c->fd, SHUT_WR);
  if (KernelQueued(c->fd) <= 0) return Close(c);  // all taken (or no way to tell: as before)
  ::epoll_ctl(epoll_, EPOLL_CTL_DEL, c->fd, nullptr);
  c->watched = 0;
  c->state = Conn::kClosing;
  c->deadline = deadline;
  Hold(c);
}

void HttpFront::Hold(Conn* c) {
  size_t n = 0;
  if (c->answering || c->state == Conn::kClosing) {
    n = 2 * static_cast<size_t>(options_.send_buffer_bytes);  // the most the kernel queues for it
    for (const std::string& s : c->out) n += s.capacity();
    if (c->stream) n += c->stream->Footprint();
  }
  held_ = held_ - c->held + n;
  held_peak_ = std::max(held_peak_, held_);
  c->held = n;
}

void HttpFront::Relieve() {
  // Whom to reset: of the answers a second old or more, the one that has
  // gone out slowest (bytes the kernel took over its age); failing those,
  // the oldest. A reader that takes nothing gets what the buffers absorb
  // (about 600 KB) and no more, so its rate falls as it ages; one that
  // reads goes at MB/s. Younger answers are not judged by rate: in its first
  // milliseconds a reader that reads has had no time to take much. The
  // state does not matter: an answer whose next piece a worker is rendering
  // is reset as well (the piece is dropped), or slow readers between two
  // pieces would leave a reading client the only one to reset.
  const double now = HttpFrontNow();
  auto before = [now](const Conn& a, const Conn& b) {  // a is to be reset before b
    const double age_a = now - a.answer_start, age_b = now - b.answer_start;
    if ((age_a >= 1) != (age_b >= 1)) return age_a >= 1;
    if (age_a < 1) return age_a > age_b;
    return static_cast<double>(a.answer_sent) / age_a < static_cast<double>(b.answer_sent) / age_b;
  };
  while (held_ > options_.max_held_bytes) {
    Conn* victim = nullptr;
    for (auto& [id, c] : conns_) {
      if (c->held > 0 && (victim == nullptr || before(*c, *victim))) victim = c.get();
    }
    if (victim == nullptr) return;
    if (options_.on_reset) options_.on_reset("budget");
    Reset(victim);
  }
}

void HttpFront::TrimAfterBurst() {
  // What a burst of large answers held (a scrape storm, slow readers that
  // were reset) is free once they are gone, but glibc keeps it, scattered
  // between blocks that live on: hand it back when the burst is over, not
  // after every answer. On a worker, because malloc_trim() walks the heap.
  constexpr size_t kBurstBytes = 16 << 20;
  if (held_peak_ < kBurstBytes || held_ > held_peak_ / 8) return;
  held_peak_ = held_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Job trim;
    trim.trim = true;
    jobs_.push_back(std::move(trim));
  }
  cv_.notify_one();
}

bool HttpFront::ShedOne() {
  // The oldest connection waiting for a request with nothing of it yet (idle
  // keep-alive, or connected and silent); failing that, the oldest one still
  // sending its head. Connections being served or written are never shed.
  Conn* victim = nullptr;
  for (int pass = 0; pass < 2 && victim == nullptr; ++pass) {
    for (auto& [id, c] : conns_) {
      bool waiting = c->state == Conn::kReading || c->state == Conn::kHandshake;
      bool idle = c->in.empty() && c->state == Conn::kReading;
      if (!waiting || (pass == 0 && !idle)) continue;
      if (victim == nullptr || c->since < victim->since) victim = c.get();
    }
  }
  if (victim == nullptr) return false;
  KernelQueued(victim->fd) > 0 ? Reset(victim) : Close(victim);  // no orphan keeps an unread answer
  return true;
}

void HttpFront::Sweep() {
  Relieve();  // what inline answers and closing connections added since the last pieces came in
  const double now = HttpFrontNow();
  std::vector<Conn*> expired;
  std::vector<Conn*> taken;  // closing, with nothing left in the kernel to send
  for (auto& [id, c] : conns_) {
    if (c->state == Conn::kClosing && now <= c->deadline && KernelQueued(c->fd) <= 0) {
      taken.push_back(c.get());
    } else if (c->state != Conn::kServing && now > c->deadline) {
      expired.push_back(c.get());
    }
  }
  for (Conn* c : taken) Close(c);
  for (Conn* c : expired) {
    if (c->state == Conn::kWriting || c->state == Conn::kClosing) {
      if (options_.on_reset) options_.on_reset("deadline");
      Reset(c);  // the client took too long to read its answer, or to close after it
      continue;
    }
    if (c->state == Conn::kReading && c->in.empty()) {
      // Idle (keep-alive, or connected and silent): the last answer may
      // still lie in the kernel, unread. A second more to take it.
      Linger(c, now + 1);
      continue;
    }
    if (c->state == Conn::kReading && !c->in.empty() && c->ssl == nullptr) {
      // A head not finished in time: say so, without waiting for the write.
      std::string bytes = Serialize(nullptr, {408, {{"Content-Type", "text/plain"}}, "request timeout\n"}, false);
      (void)!::send(c->fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (observe_) observe_("", 408);
    }
    Close(c);
  }
}

}  // namespace sockpressure
