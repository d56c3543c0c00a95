#pragma once
// Stage 6's jobs are child processes of the doctor: a `dlaunch` run with its
// own hostfile in a temporary directory. What they need, in one place.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "doctor/peer_link.h"
#include "machine/run_child.h"
#include "wire/record.h"

namespace dl::doctor {

// The doctor's jobs run as machine/run_child.h runs them.
using machine::ChildResult;
using machine::run_child;

// The last `n` lines of `s`, joined by spaces: a failed job's last words.
std::string last_lines(const std::string& s, int n);
// Why a dlaunch job failed, from its output `s`: its last `n` lines of
// dlaunch's own ("dlaunch: ..."), its verdict, joined with spaces; where it
// has none, its last `n` lines (last_lines). Its agents' lines and the
// ranks' output (a stack an agent printed, a rank's traceback) come before
// the verdict and say less.
std::string verdict_lines(const std::string& s, int n);

// The record a job printed last: `out` from its first '{' to its end, or
// nullopt when there is none or it is not a T (a job that failed early).
template <class T> std::optional<T> json_after_output(const std::string& out) {
  const size_t brace = out.find('{');
  if (brace == std::string::npos) return std::nullopt;
  try {
    return wire::decode_record<T>(std::string_view(out).substr(brace), {"the job's result"});
  } catch (const wire::RecordError&) {
    return std::nullopt;
  }
}

// A directory under $TMPDIR (else /tmp), removed with everything in it when
// this object is destroyed. Named as errors/temp_dirs.h names (kind
// "doctor"); the directories that dlaunch processes killed outright left
// there are removed first.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace dl::doctor
