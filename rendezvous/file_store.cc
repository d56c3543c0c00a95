#include "rendezvous/file_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <thread>

#include "errors/error.h"
#include "rendezvous/store_semantics.h"
#include "wire/coding.h"

namespace dl::rdzv {

namespace {
// Counts the FileStores using the file; hidden from num_keys().
const std::string kUsersKey = "\x01dlaunch/file-store-users";
using Clock = std::chrono::steady_clock;
}  // namespace

// The cache as store_semantics sees it: reads from the cache, writes append
// records to the log (which updates the cache), and the hidden users key is
// not counted. Used only under a Lock (a write Lock when it writes).
class FileStore::View final : public KeyValue {
 public:
  explicit View(FileStore& s) : s_(s) {}
  const Bytes* find(const std::string& key) const override {
    auto it = s_.cache_.find(key);
    return it == s_.cache_.end() ? nullptr : &it->second;
  }
  void put(const std::string& key, Bytes value) override { s_.append('S', key, value); }
  bool erase(const std::string& key) override {
    if (!s_.cache_.count(key)) return false;
    s_.append('D', key, {});
    return true;
  }
  size_t size() const override { return s_.cache_.size() - s_.cache_.count(kUsersKey); }

 private:
  FileStore& s_;
};

// Holds the object's mutex and an fcntl lock on the current file, with the
// cache brought up to date.
class FileStore::Lock {
 public:
  Lock(FileStore& s, bool write) : s_(s), lk_(s.mu_) {
    for (;;) {
      struct flock l{};
      l.l_type = write ? F_WRLCK : F_RDLCK;
      l.l_whence = SEEK_SET;
      while (::fcntl(s.file_.fd(), F_OFD_SETLKW, &l) != 0)
        if (errno != EINTR) throw_errno("locking store file " + s.path());
      if (s.file_.current()) break;
      s.reopen();  // the last user removed the file we held: use the current one
    }
    s.refresh();
  }
  ~Lock() {
    struct flock l{};
    l.l_type = F_UNLCK;
    l.l_whence = SEEK_SET;
    ::fcntl(s_.file_.fd(), F_OFD_SETLK, &l);
  }

 private:
  FileStore& s_;
  std::lock_guard<std::mutex> lk_;
};

FileStore::FileStore(std::string path) : file_(std::move(path)) {
  Lock lk(*this, true);
  View kv(*this);
  semantics::add(kv, kUsersKey, 1);
}

FileStore::~FileStore() {
  try {
    Lock lk(*this, true);
    View kv(*this);
    const int64_t users = kv.find(kUsersKey) ? semantics::integer_at(kv, kUsersKey) : 1;
    if (users <= 1) file_.unlink();
    else append('S', kUsersKey, std::to_string(users - 1));
  } catch (const std::exception&) {
    // Leaving the file behind is the safe failure.
  }
}

void FileStore::reopen() {
  file_.reopen();
  offset_ = 0;
  cache_.clear();
}

// Applies the log records written since offset_. Record: u8 op ('S' set,
// 'D' delete) | u32 key length | key | u32 value length | value.
void FileStore::refresh() {
  struct stat st{};
  if (::fstat(file_.fd(), &st) != 0) throw_errno("reading store file " + path());
  if (st.st_size < offset_) offset_ = 0, cache_.clear();
  std::string buf(static_cast<size_t>(st.st_size - offset_), '\0');
  size_t got = 0;
  while (got < buf.size()) {
    ssize_t n = ::pread(file_.fd(), buf.data() + got, buf.size() - got, offset_ + static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno("reading store file " + path());
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  size_t at = 0;
  while (got - at >= 9) {
    uint32_t klen = wire::get_be32(&buf[at + 1]);
    if (got - at < 9ull + klen) break;
    uint32_t vlen = wire::get_be32(&buf[at + 5 + klen]);
    if (got - at < 9ull + klen + vlen) break;  // a record being written by a writer that died
    std::string key = buf.substr(at + 5, klen);
    if (buf[at] == 'D') cache_.erase(key);
    else cache_[key] = buf.substr(at + 9 + klen, vlen);
    at += 9ull + klen + vlen;
  }
  offset_ += static_cast<off_t>(at);
}

void FileStore::append(char op, const std::string& key, const std::string& value) {
  std::string rec(1, op);
  wire::append_be32(rec, static_cast<uint32_t>(key.size()));
  rec += key;
  wire::append_be32(rec, static_cast<uint32_t>(value.size()));
  rec += value;
  // Drop a torn record a dead writer left, so the log stays parseable.
  struct stat st{};
  if (::fstat(file_.fd(), &st) == 0 && st.st_size > offset_ && ::ftruncate(file_.fd(), offset_) != 0)
    throw_errno("truncating store file " + path());
  size_t done = 0;
  while (done < rec.size()) {
    ssize_t n = ::pwrite(file_.fd(), rec.data() + done, rec.size() - done, offset_ + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno("writing store file " + path());
    done += static_cast<size_t>(n);
  }
  offset_ += static_cast<off_t>(rec.size());
  if (op == 'D') cache_.erase(key);
  else cache_[key] = value;
}

void FileStore::set(const std::string& key, const Bytes& value) {
  Lock lk(*this, true);
  append('S', key, value);
}

Bytes FileStore::get(const std::string& key) {
  for (;;) {
    wait({key}, timeout());
    Lock lk(*this, false);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;  // else deleted meanwhile: wait again
  }
}

int64_t FileStore::add(const std::string& key, int64_t delta) {
  Lock lk(*this, true);
  View kv(*this);
  return semantics::add(kv, key, delta);
}

Bytes FileStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  Lock lk(*this, true);
  View kv(*this);
  return semantics::compare_set(kv, key, expected, desired).value;
}

void FileStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  const auto deadline = Clock::now() + timeout;
  Millis pause{1};
  for (;;) {
    std::vector<std::string> missing;
    {
      Lock lk(*this, false);
      missing = semantics::missing(View(*this), keys);
    }
    if (missing.empty()) return;
    if (Clock::now() >= deadline) throw TimeoutError(timeout_message(timeout, missing) + " in file store " + path());
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - Clock::now()));
    pause = std::min(pause * 2, Millis(50));
  }
}

bool FileStore::check(const std::vector<std::string>& keys) {
  Lock lk(*this, false);
  return semantics::has_all(View(*this), keys);
}

bool FileStore::delete_key(const std::string& key) {
  Lock lk(*this, true);
  View kv(*this);
  return semantics::delete_key(kv, key);
}

int64_t FileStore::num_keys() {
  Lock lk(*this, false);
  return semantics::num_keys(View(*this));
}

}  // namespace dl::rdzv
