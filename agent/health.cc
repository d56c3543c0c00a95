#include "agent/health.h"

#include <fcntl.h>
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

std::string check_interpreter(const std::string& file, const std::string& path_var, const std::string& wdir) {
  const std::string at = wdir.empty() || file.front() == '/' ? file : wdir + (wdir.back() == '/' ? "" : "/") + file;
  const int fd = ::open(at.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return "";  // the exec says why (an unreadable binary still runs)
  char head[256];
  const ssize_t got = ::read(fd, head, sizeof head);
  ::close(fd);
  if (got < 2 || head[0] != '#' || head[1] != '!') return "";
  std::string line(head + 2, static_cast<size_t>(got) - 2);
  if (const size_t nl = line.find('\n'); nl != std::string::npos) line.resize(nl);
  auto trim = [](std::string t) {
    const size_t b = t.find_first_not_of(" \t\r"), e = t.find_last_not_of(" \t\r");
    return b == std::string::npos ? std::string() : t.substr(b, e - b + 1);
  };
  line = trim(line);
  const size_t sp = line.find_first_of(" \t");
  const std::string interp = line.substr(0, sp);
  std::string arg = sp == std::string::npos ? "" : trim(line.substr(sp));  // the kernel passes the rest as one
  if (interp.empty()) return "";
  const std::string shown = "its interpreter (#!" + line + ")";
  const Resolved i = resolve_program(interp.find('/') == std::string::npos ? "./" + interp : interp, "", wdir);
  if (i.code != 0) return file + ": " + shown + ": " + i.message;
  if (interp.substr(interp.rfind('/') + 1) != "env" || arg.empty()) return "";
  // env finds the program on the ranks' PATH; with -S it splits the rest.
  if (arg.rfind("-S", 0) == 0) {
    arg = trim(arg.substr(2));
    while (!arg.empty() && (arg.front() == '-' || arg.substr(0, arg.find_first_of(" \t")).find('=') != std::string::npos))
      arg = arg.find_first_of(" \t") == std::string::npos ? "" : trim(arg.substr(arg.find_first_of(" \t")));
    arg = arg.substr(0, arg.find_first_of(" \t"));
  }
  if (arg.empty() || arg.front() == '-') return "";
  const Resolved r = resolve_program(arg, path_var, wdir);
  return r.code == 0 ? "" : file + ": " + shown + ": " + r.message;
}

std::string check_programs(const std::vector<control::msg::ProgramProbe>& probes, const std::string& own_path) {
  for (const auto& p : probes) {
    const std::string& path = p.path.empty() ? own_path : p.path;
    const Resolved r = resolve_program(p.argv0, path, p.wdir);
    if (r.code != 0) return "the ranks' program " + r.message;
    if (std::string bad = check_interpreter(r.path, path, p.wdir); !bad.empty()) return "the ranks' program " + bad;
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
