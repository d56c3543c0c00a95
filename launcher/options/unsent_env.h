#pragma once
// The launch shell's variables that reach only this host's ranks. A rank's
// environment is its agent's, with dlaunch's variables and -x's over it
// (docs/dlaunch.md, "What every rank gets"): this host's agent is dlaunch's
// own child and has the launch shell's variables; an agent started over ssh
// has its login's, so `STEPS=60 dlaunch --hostfile H ...` gives STEPS to
// this host's ranks only. dlaunch sends what -x names (as mpirun does) and
// warns, once, about the variables people usually mean for every rank.
// Pure: unit-tested in tests/launcher/options/unsent_env_test.cc.
#include <string>
#include <vector>

#include "launcher/launch_plan.h"

namespace dl::launcher {

// The variables of `launcher_env` (dlaunch's environment) that the ranks on
// other hosts are likely meant to have, and that are not in `sent` (what -x,
// --env-file and --export-all send: chosen_env), sorted: those of the
// families NCCL_, GLOO_, TORCH_, PYTORCH_, CUDA_, OMP_ and UCX_, and
// DLAUNCH_SOCKET_IFNAME; never CUDA_VISIBLE_DEVICES (the GPU binding sets
// it on each host) nor a NAME_VERSION, NAME_HOME, NAME_PATH or NAME_ROOT
// (an install's, which each host has its own of: CUDA_HOME).
std::vector<std::string> unsent_names(const EnvMap& launcher_env, const EnvMap& sent);

// One line for dlaunch's stderr naming what unsent_names finds (at most 8
// names, then how many more) and how to send them, or "": no remote host
// (only this host's, or in per-node mode each node's own, none started
// here), agents whose start passes dlaunch's environment (srun's default
// --export=ALL, unless SLURM_EXPORT_ENV says otherwise), a restart (said
// for the first attempt only), or nothing unsent.
std::string unsent_env_warning(const PlanInput& in);

}  // namespace dl::launcher
