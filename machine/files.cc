#include "machine/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <iterator>
#include <utility>

#include "machine/proc_file.h"

namespace dl::machine {

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

std::string first_line(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

ProcFile::ProcFile(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {}

ProcFile::~ProcFile() {
  if (fd_ >= 0) ::close(fd_);
}

ProcFile::ProcFile(ProcFile&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}

ProcFile& ProcFile::operator=(ProcFile&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

std::string_view ProcFile::read(char* buf, size_t size) const {
  if (fd_ < 0 || size == 0) return {};
  ssize_t n;
  do n = ::pread(fd_, buf, size, 0);
  while (n < 0 && errno == EINTR);
  return n > 0 ? std::string_view(buf, static_cast<size_t>(n)) : std::string_view();
}

}  // namespace dl::machine
