#include "launcher/stdin_forwarder.h"

#include <unistd.h>

#include <cerrno>
#include <thread>

namespace dl::launcher {

bool may_read_stdin() { return !(::isatty(0) && ::tcgetpgrp(0) != ::getpgrp()); }

void forward_stdin(boost::asio::io_context& io, std::function<void(std::string)> data, std::function<void()> eof) {
  std::thread([&io, data = std::move(data), eof = std::move(eof)] {
    char buf[65536];
    for (;;) {
      ssize_t got = ::read(0, buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        boost::asio::post(io, eof);
        return;
      }
      boost::asio::post(io, [data, chunk = std::string(buf, static_cast<size_t>(got))]() mutable { data(std::move(chunk)); });
    }
  }).detach();
}

}  // namespace dl::launcher
