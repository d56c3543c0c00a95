#include "agent/python_dir.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>

#include "errors/temp_dirs.h"
#include "wire/handshake.h"

namespace dl::agent {

namespace fs = std::filesystem;

PythonDir::PythonDir() {
  std::string base = temp_base();
  std::error_code ec;
  if (auto real = fs::canonical(base, ec); !ec) base = real.string();
  path_ = base + "/" + temp_dir_prefix("py") + wire::to_hex(wire::random_bytes(6));
}

bool PythonDir::ensure() {
  if (::mkdir(path_.c_str(), 0700) == 0) return true;
  struct stat st;
  return errno == EEXIST && ::lstat(path_.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::getuid();
}

void PythonDir::remove() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::string PythonDir::installed_hook_dir() {
  char self[PATH_MAX] = {};
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "";
  fs::path dir = fs::path(std::string(self, static_cast<size_t>(n))).parent_path().parent_path() / "share/dlaunch/python";
  std::error_code ec;
  return fs::is_regular_file(dir / "sitecustomize.py", ec) ? dir.string() : "";
}

bool PythonDir::is_python(const std::string& exe) {
  const std::string name = fs::path(exe).filename().string();
  return name.rfind("python", 0) == 0;
}

}  // namespace dl::agent
