#pragma once
// A rank's environment, composed by the agent. Pure: unit-tested without
// spawning anything (tests/agent/rank_environment_test.cc). Also the agent's
// side of torch's error files (TORCHELASTIC_ERROR_FILE): where each rank's
// goes, and what a failed rank's file says, in one line.
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/python_dir.h"
#include "agent/rank_contributor.h"

namespace dl::agent {

// A rank's complete environment (launcher/rank_env.h has the whole
// pipeline): what the agent inherited less any outer launcher's identity
// (env::is_foreign_identity_var, control/env_names.h) and
// Slurm's task-only variables (env::is_slurm_task_only_var: SLURM_TASK_PID,
// SLURM_GTIDS), then the launch's variables for every rank, then this rank's
// own, then the PMIx server's (PMIX_RANK, PMIX_SERVER_URI*, ...), each layer
// winning over the ones before it.
EnvVars compose_rank_env(EnvVars inherited, const EnvVars& common, const EnvVars& own,
                         const std::vector<std::pair<std::string, std::string>>& server_vars);

// compose_rank_env for the many ranks of one launch: what they all share
// (the agent's environment, filtered, under the launch's variables) composed
// once, so that each rank costs only its own variables. Composing all of it
// per rank (a map of ~100 variables, built and turned into strings) was most
// of the agent's serial work before a 64-rank start could begin.
struct RankEnvBase {
  EnvVars vars;                      // compose_rank_env(inherited, common, {}, {})
  std::vector<std::string> strings;  // "K=V" of each of vars, in vars' order
};
RankEnvBase rank_env_base(EnvVars inherited, const EnvVars& common);

// What compose_rank_env(inherited, common, over, {}) turned into "K=V"
// strings gives, sorted by name as it was, made from `base`: `over` is the
// rank's own layers (its own variables, then the server's on top) and
// replaces the base where both name a variable.
std::vector<std::string> rank_env_strings(const RankEnvBase& base, const EnvVars& over);

// The value of `name` in that environment, or null.
const std::string* rank_env_value(const RankEnvBase& base, const EnvVars& over, const std::string& name);

// What torch's @record (torch.distributed.elastic.multiprocessing.errors)
// wrote to a rank's error file, as one line for the verdict:
//   "ValueError: bad lr (at /work/train.py:12)"
// The file is JSON: {"message": {"message": "Type: text", "extraInfo":
// {"py_callstack": "<traceback>", "timestamp": "..."}}}, or a newer torch's
// {"message": "text"}; the place is the innermost `File "F", line N` of the
// traceback, where the exception was raised. Long messages are cut; nullopt
// when the text is not such a file. The one reader of torch's format, and
// the one place a JSON field is read by its key: "message" is a string or an
// object, which wire/record.h's fixed types do not express
// (scripts/check_architecture.py keeps it the only one).
std::optional<std::string> summarize_torch_error(std::string_view json_text);

// One job's error files on this host: one file per rank in the job's
// PythonDir (agent/python_dir.h: made by the agent for a Python program or by
// the rank's hook; where it cannot be made the rank's torch only logs the
// exception), removed when the agent leaves or the job restarts. A
// contributor: each rank is told its file (TORCHELASTIC_ERROR_FILE).
class TorchErrorFiles final : public RankContributor {
 public:
  explicit TorchErrorFiles(const PythonDir& dir);
  TorchErrorFiles(const TorchErrorFiles&) = delete;
  TorchErrorFiles& operator=(const TorchErrorFiles&) = delete;
  ~TorchErrorFiles() override { remove(); }
  // The rank's TORCHELASTIC_ERROR_FILE, "" when there is no directory.
  std::string path(int rank) const;
  // TORCHELASTIC_ERROR_FILE=path(rank), nothing when there is no directory.
  TaskEnv task_env(int rank, const RankEnvSoFar& so_far) override;
  // The summary of what `rank` left there, if anything. Read as
  // errors/user_file.h reads (a regular file of at most 1 MiB, opened without
  // waiting), and never through a link: anything else is not read, and
  // says so in one line on stderr.
  std::optional<std::string> read(int rank) const;
  // Removes the ranks' error files, not the directory (idempotent).
  void remove();

 private:
  std::string dir_;
};

}  // namespace dl::agent
