#include "launcher/output_sink.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <ctime>

#include "errors/error.h"

namespace dl::launcher {

void write_fully(int fd, std::string_view b) {
  while (!b.empty()) {
    ssize_t n = ::write(fd, b.data(), b.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        pollfd p{fd, POLLOUT, 0};
        ::poll(&p, 1, 1000);
        continue;
      }
      return;
    }
    b.remove_prefix(static_cast<size_t>(n));
  }
}

OutputSink::OutputSink(OutputOptions opts, std::vector<std::string> hosts, int out_fd, int err_fd)
    : opts_(std::move(opts)), hosts_(std::move(hosts)), out_fd_(out_fd), err_fd_(err_fd) {}

OutputSink::~OutputSink() {
  for (auto& [k, fd] : files_) ::close(fd);
}

std::string OutputSink::prefix(int rank) const {
  std::string p;
  if (opts_.timestamp) {
    auto now = std::chrono::system_clock::now();
    std::time_t t = std::chrono::system_clock::to_time_t(now);
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
    char buf[40];
    std::tm tm{};
    ::localtime_r(&t, &tm);
    size_t n = std::strftime(buf, sizeof buf, "%H:%M:%S", &tm);
    std::snprintf(buf + n, sizeof buf - n, ".%03d ", static_cast<int>(ms));
    p += buf;
  }
  if (opts_.tag) p += "[" + std::to_string(rank) + "@" + hosts_.at(static_cast<size_t>(rank)) + "] ";
  return p;
}

int OutputSink::fd_for(int rank, int stream) {
  if (opts_.dir.empty()) return stream == 2 ? err_fd_ : out_fd_;
  auto key = std::make_pair(rank, stream);
  auto it = files_.find(key);
  if (it != files_.end()) return it->second;
  std::string d = opts_.dir + "/rank." + std::to_string(rank);
  ::mkdir(opts_.dir.c_str(), 0755);
  ::mkdir(d.c_str(), 0755);
  std::string path = d + (stream == 2 ? "/stderr" : "/stdout");
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw_errno("cannot write rank output to " + path);
  files_[key] = fd;
  return fd;
}

void OutputSink::emit(int rank, int stream, std::string_view lines) {
  if (lines.empty()) return;
  const int fd = fd_for(rank, stream);
  if ((!opts_.tag && !opts_.timestamp) || !opts_.dir.empty()) return write_fully(fd, lines);
  const std::string p = prefix(rank);
  std::string buf;
  buf.reserve(lines.size() + p.size() * 8);
  size_t start = 0;
  while (start < lines.size()) {
    size_t nl = lines.find('\n', start);
    buf.append(p).append(lines.substr(start, nl - start + 1));
    start = nl + 1;
  }
  write_fully(fd, buf);
}

void OutputSink::write(int rank, int stream, std::string_view bytes) {
  auto& part = partial_[{rank, stream}];
  size_t last_nl = bytes.rfind('\n');
  if (last_nl == std::string_view::npos) {
    part.append(bytes);
    return;
  }
  if (part.empty()) {
    emit(rank, stream, bytes.substr(0, last_nl + 1));
  } else {
    part.append(bytes.substr(0, last_nl + 1));
    emit(rank, stream, part);
    part.clear();
  }
  part.append(bytes.substr(last_nl + 1));
}

void OutputSink::finish(int rank) {
  for (int stream : {1, 2}) {
    auto it = partial_.find({rank, stream});
    if (it == partial_.end()) continue;
    if (!it->second.empty()) {
      it->second.push_back('\n');
      emit(rank, stream, it->second);
    }
    partial_.erase(it);
  }
}

size_t OutputSink::pending() const {
  size_t n = 0;
  for (auto& [k, v] : partial_) n += v.size();
  return n;
}

}  // namespace dl::launcher
