#include "remote/ssh/fan_out.h"

#include <atomic>
#include <functional>
#include <thread>

namespace dl::ssh {

namespace {

// Runs job(i) for i in [0, n) on at most `parallel` threads.
void for_each_parallel(size_t n, int parallel, const std::function<void(size_t)>& job) {
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  size_t k = std::min(n, static_cast<size_t>(std::max(parallel, 1)));
  for (size_t t = 0; t < k; ++t)
    threads.emplace_back([&] {
      for (size_t i; (i = next++) < n;) job(i);
    });
  for (auto& t : threads) t.join();
}

std::string first_line(const std::string& s) {
  auto end = s.find('\n');
  return s.substr(0, end);
}

template <class Fn>
void capture(std::string& error, ErrorKind& kind, Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    error = e.what();
    kind = e.kind();
  } catch (const std::exception& e) {
    error = e.what();
    kind = ErrorKind::kIo;
  }
}

}  // namespace

std::string describe_start_failure(const std::string& host, int status, const std::string& err) {
  std::string said = first_line(err);
  said = said.empty() ? "" : " (the remote shell said: " + said + ")";
  if (status == 127)
    return host + ": remote command not found, exit 127" + said +
           ": install it on that host or give its directory with --prefix";
  if (status == 126)
    return host + ": remote command not executable, exit 126" + said +
           ": check its permissions and that it was built for that host";
  return "";
}

std::vector<Started> start_all(const std::vector<Target>& targets,
                               const std::vector<std::string>& commands,
                               std::string_view stdin_payload, const Options& options,
                               int parallel) {
  std::vector<Started> out(targets.size());
  for_each_parallel(targets.size(), parallel, [&](size_t i) {
    Started& r = out[i];
    r.target = targets[i];
    capture(r.error, r.kind, [&] {
      auto session = std::make_unique<Session>(targets[i], options);
      auto process = session->exec(commands[i]);
      if (!stdin_payload.empty()) process->offer_stdin(stdin_payload);
      r.process = std::move(process);
      r.session = std::move(session);
    });
  });
  return out;
}

std::vector<Finished> run_all(const std::vector<Target>& targets,
                              const std::vector<std::string>& commands,
                              std::string_view stdin_payload, const Options& options,
                              int parallel, Millis timeout) {
  std::vector<Finished> out(targets.size());
  for_each_parallel(targets.size(), parallel, [&](size_t i) {
    Finished& r = out[i];
    r.target = targets[i];
    ErrorKind kind;
    capture(r.error, kind, [&] {
      Session session(targets[i], options);
      auto process = session.exec(commands[i]);
      if (!stdin_payload.empty()) process->offer_stdin(stdin_payload);
      process->close_stdin();
      r.exit_status = process->wait(timeout);
      r.out = process->out();
      r.err = process->err();
      r.error = describe_start_failure(session.name(), r.exit_status, r.err);
    });
  });
  return out;
}

}  // namespace dl::ssh
