#include "rendezvous/store_command.h"

#include <csignal>
#include <cstdlib>
#include <iostream>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "errors/error.h"
#include "rendezvous/bootstrap.h"
#include "rendezvous/tcp_store_server.h"
#include "rendezvous/token.h"
#include "wire/socket.h"

namespace dl::rdzv {

namespace {
constexpr const char* kUsage =
    "usage: dlaunch store --listen HOST:PORT [--token-file FILE]\n"
    "  Serves a rendezvous store until SIGINT/SIGTERM. The job token is read from FILE,\n"
    "  else from DLAUNCH_TOKEN; without either the store is unauthenticated.\n";

struct Options {
  std::string listen, token_file;
};

Options parse(const std::vector<std::string>& args) {
  Options o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const std::string& flag) -> std::string {
      if (a.rfind(flag + "=", 0) == 0) return a.substr(flag.size() + 1);
      if (i + 1 >= args.size()) throw UsageError(flag + " needs a value");
      return args[++i];
    };
    if (a == "--listen" || a.rfind("--listen=", 0) == 0) o.listen = value("--listen");
    else if (a == "--token-file" || a.rfind("--token-file=", 0) == 0) o.token_file = value("--token-file");
    else if (a == "--token" || a.rfind("--token=", 0) == 0)
      throw UsageError("the token is never given on the command line: use --token-file FILE or DLAUNCH_TOKEN");
    else throw UsageError("unknown option '" + a + "'");
  }
  if (o.listen.empty()) throw UsageError("--listen HOST:PORT is required");
  return o;
}

}  // namespace

int run_store_command(const std::vector<std::string>& args) {
  try {
    if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
      std::cout << kUsage;
      return 0;
    }
    Options o = parse(args);
    auto [host, port] = wire::split_host_port(o.listen, "--listen");
    auto loaded = load_token(o.token_file);
    const bool authenticated = loaded.has_value();
    const std::string token = loaded.value_or(std::string(kUnauthenticatedToken));
    boost::asio::io_context io;
    TcpStoreServer server(io, host, port, token);
    server.set_logger([](const std::string& line) { std::cerr << "dlaunch " << line << "\n"; });
    boost::asio::signal_set signals(io, SIGINT, SIGTERM);
    signals.async_wait([&](const boost::system::error_code&, int) { server.stop(); io.stop(); });
    std::cout << "dlaunch store: listening on " << (host.empty() ? "0.0.0.0" : host) << ":" << server.port()
              << std::endl;
    if (!authenticated)
      std::cerr << "dlaunch store: warning: no --token-file and no DLAUNCH_TOKEN: the store is unauthenticated\n";
    io.run();
    return 0;
  } catch (const Error& e) {
    std::cerr << "dlaunch store: error: " << e.what() << "\n";
    if (e.kind() == ErrorKind::kUsage) std::cerr << kUsage;
    return exit_code_for(e.kind());
  }
}

}  // namespace dl::rdzv
