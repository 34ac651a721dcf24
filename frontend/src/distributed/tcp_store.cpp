// TcpStore: rank 0 serves an in-memory key/value map over TCP; every rank is a client.
//
// Wire protocol (all integers big-endian), one reply per request, in order:
//   request: u32 body_len | u8 op | u32 key_len | key | op payload
//            SET: value (the rest of the body)   ADD: i64 delta   GET, CHECK: nothing
//   reply:   u32 body_len | u8 status | payload
//            kOk: GET the value, ADD the new sum (i64), SET/CHECK nothing
//            kNotFound: GET/CHECK of an absent key   kFailed: a message (ADD of a non-integer)
// The server never blocks on a request (GET answers "not found" at once), so waiting
// happens in the client, which polls; a slow rank never stalls the others' requests.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>

#include "distributed/posix.h"
#include "kiln/distributed/store.h"
#include "kiln/error.h"

namespace kiln::distributed {

namespace {

using posix::errno_text;
using posix::Backoff;
using posix::Fd;
using posix::parse_int;
using posix::quoted;
using Clock = std::chrono::steady_clock;

enum Op : uint8_t { kSet = 1, kGet = 2, kAdd = 3, kCheck = 4 };
enum Status : uint8_t { kOk = 0, kNotFound = 1, kFailed = 2 };

// A frame this large is a stray client speaking another protocol, not a rendezvous value.
constexpr uint32_t kMaxFrame = 1u << 30;
// Every request is answered at once, so a reply this late means rank 0's machine stopped
// answering (a lost host sends no FIN; without this a client would wait forever).
constexpr int kReplyTimeoutSeconds = 60;

std::string endpoint(const std::string& host, uint16_t port) {
  // IPv6 literals need brackets to be told apart from the port.
  if (host.find(':') != std::string::npos) return detail::str_cat("[", host, "]:", port);
  return detail::str_cat(host, ":", port);
}

void put_u32(std::string& s, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) s += static_cast<char>((v >> shift) & 0xff);
}
void put_u64(std::string& s, uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) s += static_cast<char>((v >> shift) & 0xff);
}
uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}
uint64_t get_u64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

// getaddrinfo for a TCP endpoint; the error text when it fails.
struct Resolved {
  addrinfo* list = nullptr;
  std::string error;
  ~Resolved() {
    if (list) ::freeaddrinfo(list);
  }
};
void resolve(const std::string& host, uint16_t port, bool passive, Resolved& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &out.list);
  if (rc != 0) {
    out.list = nullptr;
    out.error = rc == EAI_SYSTEM ? errno_text(errno) : std::string(::gai_strerror(rc));
  }
}

uint16_t local_port(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return 0;
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return 0;
}

// ---------------------------------------------------------------------------------------
// The server: one thread, one poll() loop over the listening socket, a wake-up pipe and
// every client connection. Requests are answered without blocking, so one thread serves
// any number of ranks, and stopping is a byte written to the pipe.

class Server {
 public:
  Server(const std::string& host, uint16_t port) {
    Resolved addrs;
    resolve(host, port, /*passive=*/true, addrs);
    KILN_CHECK(addrs.list != nullptr, "[TcpStore] expected to serve the rendezvous store on ",
               endpoint(host, port), ", but the host name does not resolve (", addrs.error,
               "). Fix: set KILN_MASTER_ADDR to an address of rank 0's machine.");
    std::string last_error;
    for (addrinfo* a = addrs.list; a != nullptr; a = a->ai_next) {
      Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
      if (!fd.valid()) {
        last_error = errno_text(errno);
        continue;
      }
      // A restarted job can bind the port while the last job's connections sit in TIME_WAIT.
      int one = 1;
      ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd.get(), 1024) != 0) {
        const int err = errno;
        last_error = errno_text(err);
        KILN_CHECK(
            err != EADDRINUSE, "[TcpStore] expected to serve the rendezvous store on ",
            endpoint(host, port), ", but the port is in use (", last_error,
            "). Fix: another job (or a leftover rank of an earlier one) holds it; pick another "
            "KILN_MASTER_PORT, use port 0 to let the system choose, or end the other process.");
        continue;
      }
      listen_ = std::move(fd);
      break;
    }
    KILN_CHECK(listen_.valid(), "[TcpStore] expected to serve the rendezvous store on ",
               endpoint(host, port), ", but could not listen there (", last_error,
               "). Fix: KILN_MASTER_ADDR must be an address of rank 0's own machine (or 0.0.0.0 to "
               "listen on all of them).");
    port_ = local_port(listen_.get());

    int pipe_fds[2];
    KILN_CHECK(::pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) == 0,
               "[TcpStore] could not create the server's wake-up pipe (", errno_text(errno),
               "). Fix: the process is out of file descriptors; raise `ulimit -n`.");
    wake_read_ = Fd(pipe_fds[0]);
    wake_write_ = Fd(pipe_fds[1]);
    thread_ = std::thread([this] { run(); });
  }

  ~Server() {
    const char byte = 'x';
    ssize_t ignored;
    do {
      ignored = ::write(wake_write_.get(), &byte, 1);
    } while (ignored < 0 && errno == EINTR);
    if (thread_.joinable()) thread_.join();
  }

  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  uint16_t port() const { return port_; }

 private:
  struct Conn {
    Fd fd;
    std::string in;   // bytes received, not yet a whole request
    std::string out;  // replies not yet sent
    size_t out_sent = 0;
    bool closed = false;
  };

  void run() {
    std::vector<Conn> conns;
    std::vector<pollfd> fds;
    try {
      for (;;) {
        fds.clear();
        fds.push_back({wake_read_.get(), POLLIN, 0});
        fds.push_back({listen_.get(), POLLIN, 0});
        for (const Conn& c : conns) {
          const short events = POLLIN | (c.out_sent < c.out.size() ? POLLOUT : 0);
          fds.push_back({c.fd.get(), events, 0});
        }
        if (::poll(fds.data(), fds.size(), -1) < 0) {
          if (errno == EINTR) continue;
          return;  // cannot happen with valid descriptors; clients then see the store gone
        }
        if (fds[0].revents != 0) return;  // the destructor asked us to stop
        for (size_t i = 0; i < conns.size(); ++i) serve(conns[i], fds[i + 2].revents);
        std::erase_if(conns, [](const Conn& c) { return c.closed; });
        if (fds[1].revents & POLLIN) accept_all(conns);
      }
    } catch (...) {
      // Out of memory, most likely. Ending the loop closes every connection, so clients get
      // "the store is gone" instead of a process killed by an escaped exception.
    }
  }

  void accept_all(std::vector<Conn>& conns) {
    for (;;) {
      const int fd = ::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        // EAGAIN: no more pending. EMFILE and the like: leave them in the backlog; the client
        // keeps waiting for its reply rather than the loop spinning here.
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return;
      }
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      conns.push_back(Conn{Fd(fd)});
    }
  }

  void serve(Conn& c, short revents) {
    if (revents & (POLLERR | POLLNVAL)) {
      c.closed = true;
      return;
    }
    // POLLHUP may come with the last requests still unread: read them, recv() then says 0.
    if (revents & (POLLIN | POLLHUP)) {
      read_requests(c);
      if (c.closed) return;
    }
    flush(c);
  }

  void read_requests(Conn& c) {
    char buf[1 << 16];
    for (;;) {
      const ssize_t n = ::recv(c.fd.get(), buf, sizeof buf, 0);
      if (n > 0) {
        c.in.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      c.closed = true;  // the client went away (0) or the connection broke
      return;
    }
    size_t used = 0;
    while (c.in.size() - used >= 4) {
      const uint32_t len = get_u32(c.in.data() + used);
      if (len == 0 || len > kMaxFrame) {
        c.closed = true;  // not our protocol
        return;
      }
      if (c.in.size() - used - 4 < len) break;
      if (!answer(std::string_view(c.in.data() + used + 4, len), c.out)) {
        c.closed = true;
        return;
      }
      used += 4 + len;
    }
    c.in.erase(0, used);
  }

  // Appends the reply to `body` to `out`; false when the request is malformed.
  bool answer(std::string_view body, std::string& out) {
    if (body.size() < 5) return false;
    const uint8_t op = static_cast<uint8_t>(body[0]);
    const uint32_t key_len = get_u32(body.data() + 1);
    if (body.size() - 5 < key_len) return false;
    std::string key(body.substr(5, key_len));
    const std::string_view payload = body.substr(5 + key_len);
    std::string reply;
    switch (op) {
      case kSet:
        data_[std::move(key)] = std::string(payload);
        reply += static_cast<char>(kOk);
        break;
      case kGet:
      case kCheck: {
        auto it = data_.find(key);
        if (it == data_.end()) {
          reply += static_cast<char>(kNotFound);
        } else {
          reply += static_cast<char>(kOk);
          if (op == kGet) reply += it->second;
        }
        break;
      }
      case kAdd: {
        if (payload.size() != 8) return false;
        const int64_t delta = static_cast<int64_t>(get_u64(payload.data()));
        auto it = data_.find(key);
        std::optional<int64_t> current = 0;
        if (it != data_.end()) current = parse_int(it->second);
        int64_t sum = 0;
        if (!current) {
          reply += static_cast<char>(kFailed);
          reply += detail::str_cat("expected the value at key ", quoted(key),
                                   " to be a decimal integer, found ", quoted(it->second),
                                   ". Fix: use add() only on keys no one set() to other text");
        } else if (__builtin_add_overflow(*current, delta, &sum)) {
          reply += static_cast<char>(kFailed);
          reply += detail::str_cat("adding ", delta, " to ", *current, " at key ", quoted(key),
                                   " overflows int64");
        } else {
          data_[key] = std::to_string(sum);
          reply += static_cast<char>(kOk);
          put_u64(reply, static_cast<uint64_t>(sum));
        }
        break;
      }
      default:
        return false;
    }
    put_u32(out, static_cast<uint32_t>(reply.size()));
    out += reply;
    return true;
  }

  void flush(Conn& c) {
    while (c.out_sent < c.out.size()) {
      const ssize_t n = ::send(c.fd.get(), c.out.data() + c.out_sent, c.out.size() - c.out_sent,
                               MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        c.out_sent += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // POLLOUT resumes it
      c.closed = true;
      return;
    }
    c.out.clear();
    c.out_sent = 0;
  }

  Fd listen_;
  Fd wake_read_;
  Fd wake_write_;
  uint16_t port_ = 0;
  std::map<std::string, std::string> data_;  // touched only by the server thread
  std::thread thread_;
};

// ---------------------------------------------------------------------------------------
// The client: one blocking connection, one request at a time under a mutex.

// One connection attempt within `budget`; an open socket, or the reason it failed.
Fd try_connect(const addrinfo* a, Milliseconds budget, std::string& error) {
  Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
  if (!fd.valid()) {
    error = errno_text(errno);
    return Fd();
  }
  // Non-blocking, so an unreachable host costs `budget` and not the kernel's SYN timeout.
  if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
    if (errno != EINPROGRESS && errno != EINTR) {
      error = errno_text(errno);
      return Fd();
    }
    const auto deadline = Clock::now() + budget;
    for (;;) {
      const auto left = std::chrono::duration_cast<Milliseconds>(deadline - Clock::now());
      pollfd p{fd.get(), POLLOUT, 0};
      const int rc = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
      if (rc < 0 && errno == EINTR) continue;
      if (rc <= 0) {
        error = rc == 0 ? "no answer" : errno_text(errno);
        return Fd();
      }
      break;
    }
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err != 0) {
      error = errno_text(err);
      return Fd();
    }
  }
  // Connecting to a free port in the ephemeral range on this machine can make the kernel
  // connect the socket to itself (TCP simultaneous open); that is nobody listening.
  sockaddr_storage self{}, peer{};
  socklen_t self_len = sizeof self, peer_len = sizeof peer;
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&self), &self_len) == 0 &&
      ::getpeername(fd.get(), reinterpret_cast<sockaddr*>(&peer), &peer_len) == 0 &&
      self_len == peer_len && std::memcmp(&self, &peer, self_len) == 0) {
    error = "connected to itself (nobody listens)";
    return Fd();
  }
  const int flags = ::fcntl(fd.get(), F_GETFL);
  ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval tv{kReplyTimeoutSeconds, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return fd;
}

}  // namespace

struct TcpStore::Impl {
  std::string host;
  uint16_t port = 0;
  // Declared before the connection, so the connection closes before the server stops.
  std::unique_ptr<Server> server;
  std::mutex mutex;
  Fd conn;
  std::string broken;  // why `conn` was dropped; calls after that fail with it

  std::string where() const { return "tcp://" + endpoint(host, port); }

  void connect(Milliseconds timeout) {
    const auto start = Clock::now();
    const auto deadline = start + timeout;
    Backoff backoff(Milliseconds(2));
    std::string last_error;
    int attempts = 0;
    for (;;) {
      ++attempts;
      Resolved addrs;
      resolve(host, port, /*passive=*/false, addrs);
      if (addrs.list == nullptr) last_error = "cannot resolve " + host + ": " + addrs.error;
      for (addrinfo* a = addrs.list; a != nullptr; a = a->ai_next) {
        const auto left = std::chrono::duration_cast<Milliseconds>(deadline - Clock::now());
        conn = try_connect(a, std::max(left, Milliseconds(1)), last_error);
        if (conn.valid()) return;
      }
      if (Clock::now() >= deadline) break;
      backoff.sleep_until_next(deadline);
    }
    const auto tried = std::chrono::duration_cast<Milliseconds>(Clock::now() - start);
    KILN_FAIL("[TcpStore] could not reach the rendezvous store at ", where(), ": tried for ",
              tried.count(), " ms (", attempts, " attempts; last error: ", last_error,
              "). Expected rank 0 to serve it there. Fix: check that rank 0 is running and got as "
              "far as creating the store; that KILN_MASTER_ADDR/KILN_MASTER_PORT name rank 0's "
              "machine and port on every rank; that no firewall blocks the port; or give a "
              "slow-starting rank 0 a longer connect_timeout.");
  }

  [[noreturn]] void fail_gone(const std::string& doing, const std::string& how) {
    broken = how;
    conn.reset();
    KILN_FAIL("[TcpStore] the rendezvous store at ", where(), " (served by rank 0) is gone: ", how,
              " while ", doing,
              ". Rank 0 probably exited (it failed, or finished before the other ranks were done "
              "with the store). Fix: read rank 0's output for its error; if it succeeded, keep it "
              "alive until every rank is past rendezvous (e.g. a final barrier).");
  }

  void send_all(const std::string& bytes, const std::string& doing) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(conn.get(), bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n > 0) {
        sent += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        fail_gone(doing, detail::str_cat("it took no data for ", kReplyTimeoutSeconds, " s"));
      }
      fail_gone(doing, "the connection broke (" + errno_text(n < 0 ? errno : EPIPE) + ")");
    }
  }

  void recv_all(char* out, size_t size, const std::string& doing) {
    size_t got = 0;
    while (got < size) {
      const ssize_t n = ::recv(conn.get(), out + got, size - got, 0);
      if (n > 0) {
        got += static_cast<size_t>(n);
        continue;
      }
      if (n == 0) fail_gone(doing, "it closed the connection");
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        fail_gone(doing, detail::str_cat("no reply came in ", kReplyTimeoutSeconds, " s"));
      }
      fail_gone(doing, "the connection broke (" + errno_text(errno) + ")");
    }
  }

  // Sends one request and returns the reply body (status byte first).
  std::string call(Op op, const std::string& key, const std::string& payload,
                   const std::string& doing) {
    const uint64_t body_len = 5 + uint64_t{key.size()} + payload.size();
    KILN_CHECK(
        body_len <= kMaxFrame, "[TcpStore] ", doing, ": expected key and value under ",
        kMaxFrame >> 20, " MiB together, got ", body_len,
        " bytes. Fix: the store is for rendezvous metadata; send bulk data over a process group.");
    std::string request;
    request.reserve(4 + body_len);
    put_u32(request, static_cast<uint32_t>(body_len));
    request += static_cast<char>(op);
    put_u32(request, static_cast<uint32_t>(key.size()));
    request += key;
    request += payload;

    std::lock_guard<std::mutex> lock(mutex);
    if (!conn.valid()) {
      KILN_FAIL("[TcpStore] ", doing, " failed: the rendezvous store at ", where(),
                " (served by rank 0) is gone; an earlier call found that ", broken,
                ". Rank 0 probably exited. Fix: read rank 0's output for why it did.");
    }
    send_all(request, doing);
    char header[4];
    recv_all(header, 4, doing);
    const uint32_t len = get_u32(header);
    if (len == 0 || len > kMaxFrame) fail_gone(doing, "it sent a malformed reply");
    std::string reply(len, '\0');
    recv_all(reply.data(), len, doing);
    return reply;
  }

  bool lookup(Op op, const std::string& key, std::string* value, const std::string& doing) {
    const std::string reply = call(op, key, "", doing);
    if (static_cast<uint8_t>(reply[0]) == kNotFound) return false;
    if (value) *value = reply.substr(1);
    return true;
  }
};

TcpStore::TcpStore(TcpStoreOptions options) : impl_(std::make_unique<Impl>()) {
  KILN_CHECK(options.is_server || options.port != 0,
             "[TcpStore] expected the port of rank 0's store, got port 0 on a client (host ",
             options.host,
             "). Fix: port 0 only lets the server pick a port; pass the port rank 0's store "
             "reports (port()) to the other ranks, e.g. as KILN_MASTER_PORT.");
  impl_->host = options.host;
  impl_->port = options.port;
  if (options.is_server) {
    impl_->server = std::make_unique<Server>(options.host, options.port);
    impl_->port = impl_->server->port();
  }
  impl_->connect(options.connect_timeout);
}

// Members do it in order: the connection closes, then the server stops and joins.
TcpStore::~TcpStore() = default;

void TcpStore::set(const std::string& key, const std::string& value) {
  impl_->call(kSet, key, value, "setting key " + quoted(key));
}

std::string TcpStore::get(const std::string& key, Milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  const std::string doing = "getting key " + quoted(key);
  Backoff backoff(Milliseconds(2));
  std::string value;
  for (;;) {
    if (impl_->lookup(kGet, key, &value, doing)) return value;
    if (Clock::now() >= deadline) break;
    backoff.sleep_until_next(deadline);
  }
  KILN_FAIL("[TcpStore] get(", quoted(key), ") timed out after ", timeout.count(), " ms on ",
            describe(),
            ": expected some rank to set the key, but none did. Fix: check that every rank reached "
            "this point (one that failed or hangs earlier never sets it), that all ranks agree on "
            "the key, or raise the timeout.");
}

std::vector<std::string> TcpStore::wait(const std::vector<std::string>& keys,
                                        Milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::vector<std::string> missing = keys;
  Backoff backoff(Milliseconds(2));
  for (;;) {
    std::erase_if(missing, [&](const std::string& k) {
      return impl_->lookup(kCheck, k, nullptr, "waiting for key " + quoted(k));
    });
    if (missing.empty() || Clock::now() >= deadline) return missing;
    backoff.sleep_until_next(deadline);
  }
}

bool TcpStore::check(const std::string& key) {
  return impl_->lookup(kCheck, key, nullptr, "checking key " + quoted(key));
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  std::string payload;
  put_u64(payload, static_cast<uint64_t>(delta));
  const std::string doing = detail::str_cat("adding ", delta, " to key ", quoted(key));
  const std::string reply = impl_->call(kAdd, key, payload, doing);
  const uint8_t status = static_cast<uint8_t>(reply[0]);
  KILN_CHECK(status == kOk, "[TcpStore] ", doing, " on ", describe(), ": ", reply.substr(1), ".");
  KILN_CHECK(reply.size() == 9, "[TcpStore] ", doing, " on ", describe(),
             ": expected an 8-byte sum in the reply, got ", reply.size() - 1,
             " bytes. Fix: every rank must run the same kiln version.");
  return static_cast<int64_t>(get_u64(reply.data() + 1));
}

std::string TcpStore::describe() const {
  return impl_->where();
}

uint16_t TcpStore::port() const {
  return impl_->port;
}

}  // namespace kiln::distributed
