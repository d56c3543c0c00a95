#include "doctor/child.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "errors/error.h"
#include "errors/temp_dirs.h"

namespace dl::doctor {

std::string last_lines(const std::string& s, int n) {
  size_t pos = s.size();
  while (pos > 0 && (s[pos - 1] == '\n')) --pos;
  size_t start = pos;
  for (int k = 0; k < n && start > 0; ++k) start = s.rfind('\n', start - 1) == std::string::npos ? 0 : s.rfind('\n', start - 1);
  std::string t = s.substr(start, pos - start);
  while (!t.empty() && t.front() == '\n') t.erase(0, 1);
  for (auto& c : t)
    if (c == '\n') c = ' ';
  return t;
}

std::string verdict_lines(const std::string& s, int n) {
  std::vector<std::string> said;
  size_t from = 0;
  while (from < s.size()) {
    size_t end = s.find('\n', from);
    if (end == std::string::npos) end = s.size();
    if (s.compare(from, 9, "dlaunch: ") == 0) said.push_back(s.substr(from, end - from));
    from = end + 1;
  }
  if (said.empty()) return last_lines(s, n);
  std::string t;
  for (size_t i = said.size() > static_cast<size_t>(n) ? said.size() - static_cast<size_t>(n) : 0; i < said.size(); ++i)
    t += (t.empty() ? "" : " ") + said[i];
  return t;
}

TempDir::TempDir() {
  reap_stale_temp_dirs(temp_base());
  std::string tmpl = temp_base() + "/" + temp_dir_prefix("doctor") + "XXXXXX";
  if (!::mkdtemp(tmpl.data())) throw_errno("creating a temporary directory in " + tmpl.substr(0, tmpl.rfind('/')));
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace dl::doctor
