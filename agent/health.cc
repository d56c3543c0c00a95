#include "agent/health.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "agent/rank_process.h"

namespace dl::agent {

namespace {
// The last few lines of `s`, joined by " / " (a check's last words).
std::string last_words(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  size_t from = s.size();
  for (int lines = 0; lines < 3 && from > 0; ++lines) {
    const size_t nl = s.rfind('\n', from - 1);
    from = nl == std::string::npos ? 0 : nl;
    if (nl == std::string::npos) break;
  }
  std::string out;
  for (char c : s.substr(from)) out += c == '\n' ? std::string(" / ") : std::string(1, c);
  while (out.rfind(" / ", 0) == 0) out.erase(0, 3);
  constexpr size_t kMax = 300;
  if (out.size() > kMax) out = out.substr(0, kMax) + "...";
  return out;
}
}  // namespace

std::string check_temp_dir(const std::string& dir, unsigned long long min_free) {
  const std::string name = "the temporary directory " + dir + " (TMPDIR)";
  if (::access(dir.c_str(), W_OK | X_OK) != 0) return name + " is not writable: " + std::strerror(errno);
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0) return name + ": " + std::strerror(errno);
  const unsigned long long avail = static_cast<unsigned long long>(st.f_bavail) * st.f_frsize;
  if (avail < min_free)
    return name + " has " + std::to_string(avail >> 20) + " MiB free, below the " + std::to_string(min_free >> 20) +
           " MiB the ranks' and dlaunch's files need; free some, or point TMPDIR elsewhere";
  return "";
}

std::string check_programs(const std::vector<control::msg::ProgramProbe>& probes, const std::string& own_path) {
  for (const auto& p : probes) {
    const Resolved r = resolve_program(p.argv0, p.path.empty() ? own_path : p.path, p.wdir);
    if (r.code != 0)
      return "the ranks' program " + r.message;
  }
  return "";
}

std::string health_verdict(const machine::ChildResult& r, std::chrono::milliseconds timeout) {
  if (r.status == 0) return "";
  std::string words = last_words(r.err);
  if (words.empty()) words = last_words(r.out);
  std::string how = r.status == 124 ? "did not finish within " + std::to_string(timeout.count() / 1000) + " s"
                    : r.status == 127 ? "could not be run (exit 127: /bin/sh or the command not found)"
                    : r.status > 128  ? "was killed by signal " + std::to_string(r.status - 128)
                                      : "exited with code " + std::to_string(r.status);
  return words.empty() ? how : words + " (" + how + ")";
}

}  // namespace dl::agent
