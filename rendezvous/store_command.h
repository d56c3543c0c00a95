#pragma once
// `dlaunch store --listen HOST:PORT [--token-file FILE]`: a standalone store
// server for jobs started by something else. The token comes from FILE or
// DLAUNCH_TOKEN (never the command line); without either the store is
// unauthenticated (bootstrap.h's kUnauthenticatedToken) and says so. Prints
// "dlaunch store: listening on HOST:PORT" once bound, serves until SIGINT or
// SIGTERM, and returns the exit code (0, or 2 for usage errors).
#include <string>
#include <vector>

namespace dl::rdzv {

// args: the words after "store".
int run_store_command(const std::vector<std::string>& args);

}  // namespace dl::rdzv
