#pragma once
// One job's directory for its Python ranks on this host: torch's error files
// (TORCHELASTIC_ERROR_FILE) and the stack dumps of docs/hangs.md. It is named
// at launch and made only when needed: by the agent for a rank whose program
// is a Python interpreter, or by the rank's own sitecustomize hook
// (agent/python/sitecustomize.py) at its start. A job of programs that are
// not Python never makes or removes a directory; on the ext4 /tmp measured
// in docs/benchmarks.md each rmdir cost 4 ms of the job's end.
//
// Named dlaunch-<agent pid>-py-<start>.<pidns>.<random hex> under $TMPDIR
// (or /tmp), canonical (the path a rank's /proc/PID/fd shows, even under a
// symlinked TMPDIR), so that when the agent is killed outright the next
// agent on the host finds its owner gone and removes it (errors/temp_dirs.h).
// The name is unguessable and only this user's processes see it (their
// environment).
#include <string>

namespace dl::agent {

class PythonDir {
 public:
  // Names the directory; makes nothing.
  PythonDir();
  PythonDir(const PythonDir&) = delete;
  PythonDir& operator=(const PythonDir&) = delete;
  ~PythonDir() { remove(); }
  const std::string& path() const { return path_; }
  // Makes it (mode 0700) unless it exists. False when it cannot be made.
  bool ensure();
  // Removes it with what is in it; cheap when it was never made. Idempotent.
  void remove();

  // The directory holding the installed hook (share/dlaunch/python beside
  // this binary's bin/), "" when there is none: the caller then writes the
  // hook into path() itself.
  static std::string installed_hook_dir();
  // Whether `exe` (a resolved program path) is a Python interpreter, so its
  // rank needs the directory before it starts (python -S skips the hook).
  static bool is_python(const std::string& exe);
  // The variable naming the directory in a rank's environment, read by the hook.
  static constexpr const char* kEnvVar = "DLAUNCH_PYTHON_DIR";

 private:
  std::string path_;
};

}  // namespace dl::agent
