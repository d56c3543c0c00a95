#pragma once
// Shared by the ssh adapter tests: options that read only the cluster's files
// (never /root/.ssh, never an ssh-agent), and a scratch dir removed at the end.
#include <stdlib.h>

#include <filesystem>
#include <string>

#include "remote/ssh/session.h"
#include "tests/cluster/cluster_fixture.h"

namespace dl::cluster {

struct ScratchDir {
  std::string path;
  ScratchDir() {
    char tmpl[] = "/tmp/dl-ssh-test-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~ScratchDir() { std::filesystem::remove_all(path); }
};

inline ssh::Target target(const std::string& host, uint16_t port = 0) {
  ssh::Target t;
  t.host = host;
  t.port = port;
  return t;
}

inline ssh::Options isolated_options(const Cluster& c, const ScratchDir& scratch) {
  ssh::Options o;
  o.config_file = c.ssh_config();     // HostName, User root, IdentityFile, UserKnownHostsFile
  o.ssh_dir = scratch.path;           // no default keys from /root/.ssh
  o.use_agent = false;
  o.connect_timeout = std::chrono::seconds(5);
  return o;
}

inline void write_file(const std::string& path, const std::string& text) {
  FILE* f = fopen(path.c_str(), "w");
  fputs(text.c_str(), f);
  fclose(f);
}

}  // namespace dl::cluster
