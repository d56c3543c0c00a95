#pragma once
// The pure parts of reading a rank's stacks (agent/stack_dump.h): which tool
// a host offers, its command line, what its failure means, and the Python
// ranks' hook. Unit-tested in tests/agent/stack_tools_test.cc.
#include <sys/types.h>

#include <string>
#include <vector>

namespace dl::agent {

// The tool that reads a native process's stacks.
struct StackTool {
  std::string name;  // "eu-stack" or "gdb"; "" = none on this host
  std::string path;  // its file
};

// The first of eu-stack and gdb found in `path_var` (a PATH value).
StackTool find_stack_tool(const std::string& path_var);
// The tool's command line for `pid`: every thread's backtrace, no prompts,
// no init files.
std::vector<std::string> tool_argv(const StackTool& tool, pid_t pid);
// Why the tool's `output` failed to give a stack of `pid`, in a line that
// says what to do; "" when it did give one. Names ptrace and
// kernel.yama.ptrace_scope (`ptrace_scope`, -1 unknown) when the attach was refused.
std::string tool_failure(const StackTool& tool, pid_t pid, const std::string& output, int ptrace_scope);
// The Python ranks' sitecustomize.py (agent/python/sitecustomize.py): on
// SIGQUIT faulthandler writes every thread's stack to py.<pid>.stack in
// $DLAUNCH_PYTHON_DIR (made by the hook if missing), or beside the hook when
// that is unset; then it takes its directory off sys.path and runs the
// sitecustomize it shadows.
std::string python_dump_hook();

}  // namespace dl::agent
