#pragma once
// MPMD: the app contexts of one job, as mpirun and Hydra take them
// (`dlaunch -n 1 ./server : -n 4 ./worker args`, or `--app FILE` with one
// context per line). Contexts are ranked in order: the first context's
// ranks are 0..n0-1, the next context's follow. Pure parsing, no I/O but
// reading the app file; docs/dlaunch.md, "MPMD: several programs in one job".
#include <string>
#include <vector>

#include "launcher/options/habits.h"

namespace dl::launcher {

struct AppContext {
  int np = 0;                            // -n; 0 (a job of one context only) = every slot
  std::vector<std::string> command;      // the program and its arguments
  std::vector<std::string> exports;      // -x of this context alone (the global ones apply too)
  std::string wdir;                      // --wdir of this context; "" = the job's
};

// The separator between contexts: an argument that is exactly ":".
inline constexpr const char* kAppSeparator = ":";

// Parses the contexts in args[at..]: each is `[-n N] [-x VAR]... [--wdir DIR]
// [--] PROGRAM ARGS...` up to the next ":" (after a `--` among a context's
// options, its PROGRAM ARGS run to the end, ':' included). Every context
// takes the spellings the first context's options take (launcher/options/habits.h:
// -np 2, -np=2, --np=2, -n2, --ntasks 2, -wdir, -wd, -x VAR, -xVAR, -mca,
// hydra's -env); an option of the whole job there (-tag-output, -host) is
// refused naming it. `is_long` tells dlaunch's long options (empty: the run
// options' table). `number` is the 1-based number of the first context
// parsed, for messages. With `one_context` (an app file's line) ':' is an
// ordinary argument. Throws UsageError naming the context and what was
// expected, e.g. "app context 2: expected a program after its options, got ':'".
std::vector<AppContext> parse_app_contexts(const std::vector<std::string>& args, size_t at, int number,
                                           bool one_context = false, const IsLongOption& is_long = {});

// --app FILE: one context per line as parse_app_contexts takes it (words
// split at blanks, '…' and "…" quote, '#' starts a comment line; blank lines
// skipped; ':' is an ordinary argument there). Throws UsageError naming FILE:LINE and what was expected.
std::vector<AppContext> read_app_file(const std::string& path, const IsLongOption& is_long = {});

// Checks a job's contexts: each names a program and, when there are several,
// a positive -n. Throws UsageError naming the context.
void check_app_contexts(const std::vector<AppContext>& apps);

// The index of the context that global `rank` belongs to (contexts ranked in
// order; a context with np 0 takes every rank). 0 for an empty list.
int app_of_rank(const std::vector<AppContext>& apps, int rank);

// The first rank of context `app`.
int app_first_rank(const std::vector<AppContext>& apps, int app);

}  // namespace dl::launcher
