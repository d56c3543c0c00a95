#pragma once
// What a peer reports about its host (stage 3), gathered on that host. The
// request names what to look at; the reply is JSON (docs/doctor.md lists
// its fields):
//
//   request: {"op":"facts","vars":["PATH",...],"program":"/abs/path"|"","agent":"/abs/dlaunch-agent"}
//   reply:   {"version","hostname","env":{VAR: value|null},"cores","mem_bytes",
//             "mem_available_bytes","tmp_free_bytes","gpus":[{"vendor","id","pci_bus_id","numa","memory_bytes",...}] (doctor/gpu.h),
//             "gpu_tool":"nvidia-smi"|"", "program":{"path","ok","why"},
//             "agent":{"path","ok","version","why"}}
#include <nlohmann/json.hpp>

#include <string>

namespace dl::doctor {

// Never throws for what it finds (a missing program is a finding); the
// fields it cannot read are null.
nlohmann::json collect_facts(const nlohmann::json& request);

// {"ok":bool,"why":"..."}: `path` exists, is a regular file and executable
// by this user (access X_OK).
nlohmann::json check_executable(const std::string& path);

// The first line a command prints (stdout and stderr), run through sh with
// a time limit; "" when it printed nothing. Sets *status to its exit status.
std::string first_output_line(const std::string& shell_command, int* status);

}  // namespace dl::doctor
