#include "agent/gpu_binding.h"

#include <cstdio>
#include <cstdlib>

#include "agent/rank_process.h"
#include "control/env_names.h"

namespace dl::agent {

std::vector<std::string> parse_nvidia_smi_list(const std::string& text) {
  std::vector<std::string> gpus;
  size_t pos = 0;
  while ((pos = text.find("GPU ", pos)) != std::string::npos) {
    size_t colon = text.find(':', pos);
    bool at_line_start = pos == 0 || text[pos - 1] == '\n';
    if (colon != std::string::npos && at_line_start) {
      std::string idx = text.substr(pos + 4, colon - pos - 4);
      if (!idx.empty() && idx.find_first_not_of("0123456789") == std::string::npos) gpus.push_back(idx);
    }
    pos += 4;
  }
  return gpus;
}

static std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::vector<std::string> detect_gpus(int gpus_per_node) {
  std::vector<std::string> gpus;
  if (gpus_per_node >= 0) {
    for (int i = 0; i < gpus_per_node; ++i) gpus.push_back(std::to_string(i));
    return gpus;
  }
  if (const char* cvd = std::getenv(env::kCudaVisibleDevices)) return split_commas(cvd);
  const char* path = std::getenv("PATH");
  if (resolve_program("nvidia-smi", path ? path : "/usr/bin:/bin").code != 0) return gpus;
  std::string text;
  if (FILE* p = ::popen("nvidia-smi -L 2>/dev/null", "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
    ::pclose(p);
  }
  return parse_nvidia_smi_list(text);
}

}  // namespace dl::agent
