#include "agent/stack_tools.h"

#include <sstream>

#include "agent/rank_process.h"

namespace dl::agent {

namespace {
const char* const kHook =
#include "agent/python_hook.inc"
    ;
}  // namespace

std::string python_dump_hook() { return kHook; }

StackTool find_stack_tool(const std::string& path_var) {
  for (const char* name : {"eu-stack", "gdb"}) {
    Resolved r = resolve_program(name, path_var);
    if (r.code == 0) return {name, r.path};
  }
  return {};
}

std::vector<std::string> tool_argv(const StackTool& tool, pid_t pid) {
  const std::string p = std::to_string(pid);
  if (tool.name == "eu-stack") return {tool.path, "-p", p};
  return {tool.path, "-nx", "-batch", "-p", p, "-ex", "thread apply all bt"};
}

std::string tool_failure(const StackTool& tool, pid_t pid, const std::string& output, int ptrace_scope) {
  std::istringstream in(output);
  std::string line, last;
  bool frames = false;
  while (std::getline(in, line)) {
    if (line.rfind("#", 0) == 0) frames = true;
    if (!line.empty()) last = line;
  }
  const std::string who = tool.name + " could not read pid " + std::to_string(pid);
  const bool refused = output.find("Operation not permitted") != std::string::npos ||
                       output.find("Permission denied") != std::string::npos;
  if (refused) {
    std::string scope = ptrace_scope >= 0 ? " with kernel.yama.ptrace_scope = " + std::to_string(ptrace_scope) : "";
    std::string fix = ptrace_scope >= 2
                          ? "set kernel.yama.ptrace_scope to 1 (the ranks let their agent's tools attach then) or 0"
                          : "run the agent as the ranks' user, with ptrace allowed (in a container: --cap-add SYS_PTRACE)";
    return who + ": the kernel refused to let it attach (ptrace" + scope + "); " + fix;
  }
  if (frames) return "";
  return who + (last.empty() ? ": it printed nothing" : ": " + last);
}


}  // namespace dl::agent
