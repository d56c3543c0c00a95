#pragma once
// A small /proc file opened once and read again from its start with
// pread(2): one system call a read, where opening it each time is an open,
// a read and a close (and, through a stream, a locale's set-up). The
// kernel makes the text anew at each read from offset 0. For what is read
// often: an agent's loop watch reads its loop thread's scheduler statistics
// at every turn of its timer, in each of a test bed's thousand agents.
#include <string>
#include <string_view>

namespace dl::machine {

class ProcFile {
 public:
  ProcFile() = default;
  // Opened now (close-on-exec); one that cannot be opened reads as "".
  explicit ProcFile(const std::string& path);
  ~ProcFile();
  ProcFile(ProcFile&& o) noexcept;
  ProcFile& operator=(ProcFile&& o) noexcept;
  ProcFile(const ProcFile&) = delete;
  ProcFile& operator=(const ProcFile&) = delete;

  bool is_open() const { return fd_ >= 0; }
  // Its text now, at most `size` bytes of it, in `buf`; "" when unread.
  // Safe from several threads at once (pread moves no shared offset).
  std::string_view read(char* buf, size_t size) const;

 private:
  int fd_ = -1;
};

}  // namespace dl::machine
