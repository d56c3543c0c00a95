#include "launcher/mpi/name_service.h"

namespace dl::launcher {

namespace msg = control::msg;

NameService::NameService(boost::asio::io_context& io, std::chrono::milliseconds default_timeout)
    : io_(io), default_timeout_(default_timeout) {}

NameService::~NameService() = default;

void NameService::publish(const msg::MpiPublish& m) {
  for (const auto& n : m.names) names_[n.key] = Entry{n, m.first_read};
  // Answer the waiters that are now complete, in the order they came.
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (try_answer(it->second.keys, it->second.answer)) {
      it->second.timer->cancel();
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  }
}

void NameService::unpublish(const std::vector<std::string>& keys) {
  for (const auto& k : keys) names_.erase(k);
}

bool NameService::try_answer(const std::vector<std::string>& keys, const Answer& answer) {
  for (const auto& k : keys)
    if (!names_.count(k)) return false;
  std::vector<msg::PublishedName> found;
  for (const auto& k : keys) {
    auto it = names_.find(k);
    found.push_back(it->second.name);
    if (it->second.first_read) names_.erase(it);
  }
  answer(std::move(found), "");
  return true;
}

void NameService::lookup(const msg::MpiLookup& m, Answer answer) {
  if (m.keys.empty()) return answer({}, "no key to look up");
  if (try_answer(m.keys, answer)) return;
  std::string missing;
  for (const auto& k : m.keys)
    if (!names_.count(k)) missing += (missing.empty() ? "'" : ", '") + k + "'";
  if (!m.wait) return answer({}, "not published: " + missing);
  const uint64_t id = next_waiter_++;
  Waiter& w = waiting_[id];
  w.keys = m.keys;
  w.answer = std::move(answer);
  w.timer = std::make_unique<boost::asio::steady_timer>(io_);
  w.timer->expires_after(m.timeout_ms > 0 ? std::chrono::milliseconds(m.timeout_ms) : default_timeout_);
  w.timer->async_wait([this, id](boost::system::error_code ec) {
    if (!ec) expire(id);
  });
}

void NameService::expire(uint64_t waiter) {
  auto it = waiting_.find(waiter);
  if (it == waiting_.end()) return;
  std::string missing;
  for (const auto& k : it->second.keys)
    if (!names_.count(k)) missing += (missing.empty() ? "'" : ", '") + k + "'";
  Answer answer = std::move(it->second.answer);
  waiting_.erase(it);
  answer({}, "timed out waiting for " + missing + " to be published");
}

}  // namespace dl::launcher
