#include "conn/listener.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <system_error>

#include "conn/transport.hpp"
#include "limits/refusal.hpp"
#include "report_limit.hpp"

namespace spoold {
namespace {

// Out of descriptors, every model retries accept() every accept_pause (in every event loop), and
// each try fails again until a descriptor is free: a line per failure would flood stderr.
report_limit exhaustion_reports(std::chrono::seconds(1));

void report_exhausted(int err) noexcept {
  const std::uint64_t failed = exhaustion_reports.occurred();
  if (failed == 0) return;
  char text[128];
  std::fprintf(stderr, "spoold: accept4: %s: pausing accepts (%llu failed since the last report)\n",
               ::strerror_r(err, text, sizeof text), static_cast<unsigned long long>(failed));
}

}  // namespace

void listener::open(server_context& ctx, std::uint16_t port, bool blocking, bool reuse_port,
                    bool tls) {
  close();
  ctx_ = &ctx;
  tls_ = tls ? ctx.tls : nullptr;
  fd_ = listen_tcp(ctx.opts.bind, port, reuse_port);
  if (blocking) {
    const int flags = ::fcntl(fd_, F_GETFL);
    if (flags < 0 || ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK) != 0) {
      const int err = errno;
      close();
      throw std::system_error(err, std::generic_category(), "fcntl (blocking listener)");
    }
  }
  port_ = local_port(fd_);
}

accept_outcome listener::accept(accepted& out) noexcept {
  for (;;) {
    out.peer.length = sizeof out.peer.storage;
    out.fd = ::accept4(fd_, out.peer.data(), &out.peer.length, SOCK_NONBLOCK | SOCK_CLOEXEC);
    out.tls = tls_;
    if (out.fd >= 0) {
      if (admit_client(out)) return accept_outcome::accepted;
      continue;
    }
    const int err = errno;
    switch (err) {
      case EINTR:
      case ECONNABORTED:  // the client gave up while in the backlog
      case EPROTO:
      case EPERM:  // a firewall rule refused it
        continue;
      case EAGAIN:
        return accept_outcome::empty;
      case EMFILE:
      case ENFILE:
      case ENOBUFS:
      case ENOMEM:
        if (ctx_ != nullptr) ctx_->counters.accept_exhausted();
        report_exhausted(err);
        return accept_outcome::exhausted;
      case EINVAL:  // shut down (blocking listeners), or not listening
        return accept_outcome::failed;
      default:
        std::perror("spoold: accept4");
        return accept_outcome::failed;
    }
  }
}

bool listener::admit_client(accepted& a) noexcept {
  if (ctx_ == nullptr || ctx_->clients == nullptr) return true;
  const auto ip = a.peer.ip();
  if (!ip || is_trusted(ctx_->opts, *ip)) return true;
  if (ctx_->clients->open(client_key_of(*ip), a.slot)) return true;
  refuse_connection(*ctx_, std::move(a), refusal_reason::per_client);
  return false;
}

void listener::shut_down() noexcept {
  // On Linux, shutting a listening socket down takes it out of the LISTEN state and wakes every
  // accept() waiting on it, in this process and in every process sharing it.
  if (fd_ >= 0) (void)::shutdown(fd_, SHUT_RDWR);
}

void listener::close() noexcept {
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
}

}  // namespace spoold
