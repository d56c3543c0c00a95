#include "doctor/facts.h"

#include <sched.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysinfo.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "control/env_names.h"
#include "doctor/gpu.h"
#include "machine/cpus.h"
#include "remote/ssh/quote.h"
#include "wire/host.h"
#include "wire/record.h"

namespace dl::doctor {

namespace {
std::map<std::string, std::optional<std::string>> env_of(const std::vector<std::string>& vars) {
  std::map<std::string, std::optional<std::string>> env;
  for (const auto& name : vars) {
    const char* val = std::getenv(name.c_str());
    env[name] = val ? std::optional<std::string>(val) : std::nullopt;
  }
  return env;
}

std::optional<uint64_t> mem_available() {
  std::ifstream f("/proc/meminfo");
  for (std::string key; f >> key;) {
    unsigned long long kb = 0;
    f >> kb;
    if (key == "MemAvailable:") return kb * 1024;
    f.ignore(1 << 10, '\n');
  }
  return std::nullopt;
}

std::string self_exe() {
  char buf[PATH_MAX] = {};
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "dlaunch";
}

// Runs a probe that prints one GpuProbe line; what it printed instead, or
// its death, becomes the error.
GpuProbe probe_gpus(const std::string& command, const std::string& what) {
  int status = 0;
  const std::string line = first_output_line(command, &status);
  if (status == 0) {
    try {
      return wire::decode_record<GpuProbe>(line, {what + "'s line"});
    } catch (const wire::RecordError&) {
    }
  }
  GpuProbe failed;
  failed.error = what + (status == 124 ? " hung (killed after 15 s)" : " exited with status " + std::to_string(status)) +
                 (line.empty() ? "" : ": " + line);
  return failed;
}

// The dlaunch-agent there, and its version when it runs.
ExecutableFact agent_fact(const std::string& agent) {
  ExecutableFact a = check_executable(agent);
  if (!a.ok) return a;
  int status = 0;
  // Run directly, not through sh and timeout(1): a thousand hosts' peers on
  // one machine (the test bed) each ran four programs for this one.
  double waited = 0;
  const std::string v = first_output_line(std::vector<std::string>{agent, "--version"}, &status, &waited);
  const bool answered = v.rfind("dlaunch-agent ", 0) == 0;
  a.version = answered ? v.substr(14) : v;
  // Its version line is the answer: an agent that printed it and was slow
  // to exit (a host so loaded that 15 s pass) is there, of that version.
  if (status == 124 && !answered) {
    char b[160];
    std::snprintf(b, sizeof b, "`dlaunch-agent --version` did not answer within %d s of its own time (killed after %.0f s%s)",
                  kAnswerS, waited, waited > kAnswerS + 1 ? ", the rest waiting for a CPU" : "");
    a.ok = false, a.why = b;
  }
  else if (status != 0 && !(status == 124 && answered))
    a.ok = false, a.why = "`dlaunch-agent --version` exited with " + std::to_string(status) + ": " + v;
  return a;
}

// What CUDA makes of the GPUs: the driver (always), and the runtime
// dlaunch's NCCL check was built with (when it was).
void probe_cuda(const std::string& helper, HostFacts& f) {
  f.cuda = probe_gpus(ssh::shell_quote(self_exe()) + " doctor --cuda-probe", "the CUDA driver probe");
  if (helper.empty()) return;
  const ExecutableFact x = check_executable(helper);
  if (x.ok) {
    f.cuda_runtime = probe_gpus(ssh::shell_quote(helper) + " --probe", helper + " --probe");
  } else {
    f.cuda_runtime = GpuProbe{};
    f.cuda_runtime->error = helper + ": " + x.why;
  }
}
}  // namespace

std::string first_output_line(const std::string& shell_command, int* status) {
  const std::string cmd = "timeout 15 sh -c " + ssh::shell_quote(shell_command) + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return "";
  char line[1024] = {};
  std::string first;
  if (std::fgets(line, sizeof line, p)) first = line;
  while (std::fgets(line, sizeof line, p)) {
  }
  const int st = ::pclose(p);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  while (!first.empty() && (first.back() == '\n' || first.back() == '\r')) first.pop_back();
  return first;
}

std::string first_output_line(const std::vector<std::string>& argv, int* status, double* waited_s,
                              std::chrono::milliseconds answer, std::chrono::milliseconds most_time) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int out[2];
  if (argv.empty() || ::pipe2(out, O_CLOEXEC) != 0) return *status = 127, "";
  const pid_t pid = ::vfork();  // the child only makes system calls until it execs
  if (pid == 0) {
    ::dup2(out[1], 1);
    ::dup2(out[1], 2);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(out[1]);
  std::string text;
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto most = start + most_time;
  auto end = start + answer;
  const std::string schedstat = "/proc/" + std::to_string(pid) + "/schedstat";
  bool killed = false;
  for (char b[4096];;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
    if (pid > 0 && left <= 0 && end < most) {
      // Its time so far less what it waited for a CPU: on a starved host
      // the bound moves out by the wait, up to kMostStarvedS.
      const int64_t wait = machine::runnable_wait_ns(schedstat);
      if (wait > 0)
        end = std::min(most, start + std::chrono::duration_cast<Clock::duration>(answer + std::chrono::nanoseconds(wait)));
      left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
      if (left > 0 && left < 100 && end < most) left = 100;  // read the wait again in a while, not in a spin
    }
    pollfd p{out[0], POLLIN, 0};
    if (pid < 0 || left <= 0) {
      if (pid > 0) ::kill(pid, SIGKILL), killed = true;
      break;
    }
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    const ssize_t n = ::read(out[0], b, sizeof b);
    if (n <= 0) break;
    if (text.size() < 65536) text.append(b, static_cast<size_t>(n));
  }
  ::close(out[0]);
  int st = 0;
  if (pid > 0) ::waitpid(pid, &st, 0);
  *status = pid < 0 ? 127 : killed ? 124 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  if (waited_s) *waited_s = std::chrono::duration<double>(Clock::now() - start).count();
  std::string first = text.substr(0, text.find('\n'));
  while (!first.empty() && first.back() == '\r') first.pop_back();
  return first;
}

ExecutableFact check_executable(const std::string& path) {
  ExecutableFact x;
  x.path = path;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) x.why = std::strerror(errno);
  else if (!S_ISREG(st.st_mode)) x.why = "not a regular file";
  else if (::access(path.c_str(), X_OK) != 0) x.why = std::string("not executable: ") + std::strerror(errno);
  else x.ok = true;
  return x;
}

HostFacts collect_facts(const FactsRequest& req) {
  HostFacts f;
  f.version = DLAUNCH_VERSION;
  f.hostname = wire::host_name();
  f.env = env_of(req.vars);
  cpu_set_t set;
  f.cores = ::sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  struct sysinfo si;
  if (::sysinfo(&si) == 0) f.mem_bytes = static_cast<uint64_t>(si.totalram) * si.mem_unit;
  f.mem_available_bytes = mem_available();
  struct statvfs vf;
  if (::statvfs("/tmp", &vf) == 0) f.tmp_free_bytes = static_cast<uint64_t>(vf.f_bavail) * vf.f_frsize;
  f.gpus = host_gpu_facts(machine::host_gpu_sources(), &f.gpu_tool, &f.gpu_error);
  if (const char* cvd = std::getenv(env::kCudaVisibleDevices)) f.cuda_visible_devices = cvd;
  GpuView listed;
  view_gpu_list(f.gpus, listed);
  if (nvidia_tools_see(listed.vendor) && listed.listed > 0) probe_cuda(req.nccl_helper, f);
  if (!req.program.empty()) f.program = check_executable(req.program);
  if (!req.agent.empty()) f.agent = agent_fact(req.agent);
  return f;
}

}  // namespace dl::doctor
