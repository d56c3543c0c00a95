#pragma once
// Which GPUs a host has (the agent detects them; which of them each local
// rank gets is policy: hostfiles/binding.h).
#include <optional>
#include <string>
#include <vector>

namespace dl::agent {

// The GPUs this host offers, as CUDA_VISIBLE_DEVICES entries:
//   1. `gpus_per_node` >= 0 given on the command line: 0..N-1;
//   2. CUDA_VISIBLE_DEVICES already set for the agent: its entries;
//   3. `nvidia-smi -L` on PATH: one entry per "GPU n:" line;
//   4. none.
std::vector<std::string> detect_gpus(int gpus_per_node);

// Parses `nvidia-smi -L` output into indices ("0", "1", ...).
std::vector<std::string> parse_nvidia_smi_list(const std::string& text);

}  // namespace dl::agent
