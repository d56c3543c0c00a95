#include "launcher/output/stdin_forwarder.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <thread>

namespace dl::launcher {

bool may_read_stdin() { return !(::isatty(0) && ::tcgetpgrp(0) != ::getpgrp()); }

bool never_blocks(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return false;
  if (S_ISREG(st.st_mode)) return true;
  // /dev/null (1,3) and /dev/zero (1,5) of the mem driver.
  return S_ISCHR(st.st_mode) && ::major(st.st_rdev) == 1 && (::minor(st.st_rdev) == 3 || ::minor(st.st_rdev) == 5);
}

namespace {
// One chunk of a stdin that never blocks, then the next on a later turn of
// the loop, so that a large file does not hold the job's other work up.
struct FileReader : std::enable_shared_from_this<FileReader> {
  boost::asio::io_context& io;
  std::function<void(std::string)> data;
  std::function<void()> eof;
  FileReader(boost::asio::io_context& i, std::function<void(std::string)> d, std::function<void()> e)
      : io(i), data(std::move(d)), eof(std::move(e)) {}
  void next() {
    char buf[65536];
    ssize_t got;
    while ((got = ::read(0, buf, sizeof buf)) < 0 && errno == EINTR) {}
    if (got <= 0) return eof();
    data(std::string(buf, static_cast<size_t>(got)));
    boost::asio::post(io, [self = shared_from_this()] { self->next(); });
  }
};
}  // namespace

void forward_stdin(boost::asio::io_context& io, std::function<void(std::string)> data, std::function<void()> eof) {
  if (never_blocks(0)) {
    auto reader = std::make_shared<FileReader>(io, std::move(data), std::move(eof));
    boost::asio::post(io, [reader] { reader->next(); });
    return;
  }
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
