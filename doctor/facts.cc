#include "doctor/facts.h"

#include <sched.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysinfo.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "control/env_names.h"
#include "doctor/gpu.h"
#include "remote/ssh/quote.h"

namespace dl::doctor {

namespace {
nlohmann::json env_of(const nlohmann::json& vars) {
  nlohmann::json env = nlohmann::json::object();
  for (const auto& v : vars) {
    const std::string name = v.get<std::string>();
    const char* val = std::getenv(name.c_str());
    env[name] = val ? nlohmann::json(val) : nlohmann::json(nullptr);
  }
  return env;
}

nlohmann::json mem_available() {
  std::ifstream f("/proc/meminfo");
  for (std::string key; f >> key;) {
    long long kb = 0;
    f >> kb;
    if (key == "MemAvailable:") return kb * 1024;
    f.ignore(1 << 10, '\n');
  }
  return nullptr;
}

std::string self_exe() {
  char buf[PATH_MAX] = {};
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "dlaunch";
}

// Runs a probe that prints one JSON line ({"count","error",...}); what it
// printed instead, or its death, becomes the error.
nlohmann::json probe_json(const std::string& command, const std::string& what) {
  int status = 0;
  const std::string line = first_output_line(command, &status);
  auto j = nlohmann::json::parse(line, nullptr, false);
  if (status == 0 && j.is_object() && j.contains("count")) return j;
  return {{"count", 0},
          {"error", what + (status == 124 ? " hung (killed after 15 s)" : " exited with status " + std::to_string(status)) +
                        (line.empty() ? "" : ": " + line)}};
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

nlohmann::json check_executable(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return {{"ok", false}, {"why", std::strerror(errno)}};
  if (!S_ISREG(st.st_mode)) return {{"ok", false}, {"why", "not a regular file"}};
  if (::access(path.c_str(), X_OK) != 0) return {{"ok", false}, {"why", std::string("not executable: ") + std::strerror(errno)}};
  return {{"ok", true}, {"why", ""}};
}

nlohmann::json collect_facts(const nlohmann::json& req) {
  nlohmann::json f;
  f["version"] = DLAUNCH_VERSION;
  char name[HOST_NAME_MAX + 1] = {};
  ::gethostname(name, sizeof name - 1);
  f["hostname"] = name;
  f["env"] = env_of(req.value("vars", nlohmann::json::array()));
  cpu_set_t set;
  f["cores"] = ::sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : ::sysconf(_SC_NPROCESSORS_ONLN);
  struct sysinfo si;
  f["mem_bytes"] = ::sysinfo(&si) == 0 ? nlohmann::json(static_cast<unsigned long long>(si.totalram) * si.mem_unit) : nlohmann::json(nullptr);
  f["mem_available_bytes"] = mem_available();
  struct statvfs vf;
  f["tmp_free_bytes"] = ::statvfs("/tmp", &vf) == 0 ? nlohmann::json(static_cast<unsigned long long>(vf.f_bavail) * vf.f_frsize) : nlohmann::json(nullptr);
  std::string tool, gpu_error;
  f["gpus"] = host_gpu_facts(machine::host_gpu_sources(), &tool, &gpu_error);
  f["gpu_tool"] = tool;
  f["gpu_error"] = gpu_error;
  const char* cvd = std::getenv(env::kCudaVisibleDevices);
  f["cuda_visible_devices"] = cvd ? nlohmann::json(cvd) : nlohmann::json(nullptr);
  GpuView listed;
  view_gpu_list(f["gpus"], listed);
  if (listed.vendor == "nvidia" && listed.listed > 0) {
    // What CUDA makes of them: the driver (always), and the runtime dlaunch's
    // NCCL check was built with (when it was).
    f["cuda"] = probe_json(ssh::shell_quote(self_exe()) + " doctor --cuda-probe", "the CUDA driver probe");
    const std::string helper = req.value("nccl_helper", "");
    if (!helper.empty()) {
      nlohmann::json x = check_executable(helper);
      f["cuda_runtime"] = x["ok"].get<bool>()
                              ? probe_json(ssh::shell_quote(helper) + " --probe", helper + " --probe")
                              : nlohmann::json{{"count", 0}, {"error", helper + ": " + x["why"].get<std::string>()}};
    }
  }
  const std::string program = req.value("program", "");
  if (!program.empty()) {
    nlohmann::json pr = check_executable(program);
    pr["path"] = program;
    f["program"] = pr;
  }
  const std::string agent = req.value("agent", "");
  if (!agent.empty()) {
    nlohmann::json a = check_executable(agent);
    a["path"] = agent;
    if (a["ok"].get<bool>()) {
      int status = 0;
      std::string v = first_output_line(ssh::shell_quote(agent) + " --version", &status);
      a["version"] = v.rfind("dlaunch-agent ", 0) == 0 ? v.substr(14) : v;
      if (status != 0) a["ok"] = false, a["why"] = "`dlaunch-agent --version` exited with " + std::to_string(status) + ": " + v;
    }
    f["agent"] = a;
  }
  return f;
}

}  // namespace dl::doctor
