#pragma once
// One fixture per Store implementation, each handing out independent clients
// of one shared store, so the same test cases run on all of them.
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <memory>

#include "rendezvous/file_store.h"
#include "rendezvous/hash_store.h"
#include "rendezvous/prefix_store.h"
#include "rendezvous/tcp_store.h"
#include "rendezvous/tcp_store_server.h"
#include "wire/handshake.h"

namespace dl::rdzv::testing {

// HashStore, seen through a PrefixStore (which tests the prefix view too).
struct HashEnv {
  HashStore hash;
  std::unique_ptr<Store> client() { return std::make_unique<PrefixStore>("t", hash); }
};

struct TcpEnv {
  std::string token = wire::new_token();
  BackgroundStoreServer server{"127.0.0.1", 0, token};
  std::unique_ptr<Store> client() {
    return std::make_unique<TcpStore>("127.0.0.1", server.port(), token, Millis(5000));
  }
};

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/dl_rdzv_test_XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

struct FileEnv {
  TempDir dir;
  std::unique_ptr<Store> client() { return std::make_unique<FileStore>(dir.path + "/store"); }
};

}  // namespace dl::rdzv::testing
