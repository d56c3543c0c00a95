#pragma once
// A Store in one file on a filesystem every rank can see (a shared directory,
// or the filesystem the network-namespace hosts of one machine share).
//
// The file is an append-only log of set/delete records (docs/rendezvous.md),
// guarded by open-file-description fcntl locks (F_OFD_SETLKW), so it works
// between processes and between threads of one process, each FileStore
// holding its own descriptor. Waits poll the file with backoff (1 ms up to
// 50 ms). NFS needs working POSIX locks (lockd).
//
// Lifetime: each FileStore counts itself in a hidden key; the destructor of
// the last one removes the file, under the lock. A process that dies without
// destroying its FileStore leaves the file behind: use a fresh path per job,
// as with torch's FileStore. A store whose file was removed by the last user
// while another was just opening reopens the new file, never the removed one.
//
// The semantics are store_semantics.h's, over a view of the log whose writes
// append records.
//
// Thread-safe. Failure: IoError naming the path; TimeoutError naming keys.
#include <mutex>
#include <unordered_map>

#include "rendezvous/private_file.h"
#include "rendezvous/store.h"

namespace dl::rdzv {

class FileStore : public Store {
 public:
  // Opens or creates the file at path (its directory must exist) as
  // private_file.h does: created mode 0600; another user's file, a file
  // others can read or write, a link or a FIFO there is refused with a
  // UsageError naming it, its owner and mode. Other failures: IoError
  // naming the path.
  explicit FileStore(std::string path);
  ~FileStore() override;
  FileStore(const FileStore&) = delete;
  FileStore& operator=(const FileStore&) = delete;

  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  using Store::wait;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;

  const std::string& path() const { return file_.path(); }

 private:
  class Lock;
  class View;
  void reopen();
  void refresh();
  void append(char op, const std::string& key, const std::string& value);

  PrivateFile file_;
  std::mutex mu_;
  off_t offset_ = 0;  // log bytes already applied to cache_
  std::unordered_map<std::string, Bytes> cache_;
};

}  // namespace dl::rdzv
