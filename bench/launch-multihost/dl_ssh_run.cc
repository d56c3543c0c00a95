// dl_ssh_run: runs one command on many hosts through dl::ssh::run_all
// and prints each host's output; exit status 0 only if every host ran it with
// status 0. The benchmark's stand-in for "the adapter's fan-out".
//   dl_ssh_run [-F ssh_config] [-o known_hosts] [-p parallel] [-t timeout_ms] host... -- word...
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "remote/ssh/fan_out.h"
#include "remote/ssh/quote.h"

namespace ssh = dl::ssh;

int main(int argc, char** argv) {
  ssh::Options options;
  int parallel = 64;
  long timeout_ms = 30000;
  std::vector<ssh::Target> targets;
  std::vector<std::string> words;
  int i = 1;
  try {
    for (; i < argc && strcmp(argv[i], "--") != 0; ++i) {
      std::string a = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc) throw dl::UsageError("dl_ssh_run: " + a + " needs a value");
        return argv[++i];
      };
      if (a == "-F") options.config_file = value();
      else if (a == "-o") options.known_hosts_file = value();
      else if (a == "-p") parallel = std::stoi(value());
      else if (a == "-t") timeout_ms = std::stol(value());
      else targets.push_back(ssh::parse_target(a, "dl_ssh_run: host"));
    }
    for (++i; i < argc; ++i) words.push_back(argv[i]);
    if (targets.empty() || words.empty()) throw dl::UsageError("dl_ssh_run: want host... -- command...");
  } catch (const std::exception& e) {
    fprintf(stderr, "%s\nusage: dl_ssh_run [-F cfg] [-o known_hosts] [-p N] [-t ms] host... -- cmd...\n", e.what());
    return 2;
  }
  std::vector<std::string> commands(targets.size(), ssh::join_quoted(words));
  auto results = ssh::run_all(targets, commands, "", options, parallel, ssh::Millis(timeout_ms));
  int rc = 0;
  for (auto& r : results) {
    fputs(r.out.c_str(), stdout);
    fputs(r.err.c_str(), stderr);
    if (!r.error.empty()) fprintf(stderr, "dl_ssh_run: %s\n", r.error.c_str());
    else if (r.exit_status != 0) fprintf(stderr, "dl_ssh_run: %s: exit %d\n", r.target.str().c_str(), r.exit_status);
    if (!r.error.empty() || r.exit_status != 0) rc = 1;
  }
  return rc;
}
