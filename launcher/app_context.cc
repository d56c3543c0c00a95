#include "launcher/app_context.h"

#include <sstream>

#include "errors/error.h"
#include "errors/user_file.h"
#include "launcher/options.h"

namespace dl::launcher {

namespace {
std::string context_name(int number) { return "app context " + std::to_string(number); }

int parse_np(const std::string& text, int number) {
  const bool digits = !text.empty() && text.size() < 8 && text.find_first_not_of("0123456789") == std::string::npos;
  if (!digits || std::stoi(text) < 1)
    throw UsageError(context_name(number) + ": -n needs a positive number of ranks, got '" + text + "'");
  return std::stoi(text);
}

// One context's options, from args[at]; returns the index of its program and
// sets *verbatim when a `--` ended them.
size_t parse_context_options(const std::vector<std::string>& args, size_t at, int number, AppContext& c,
                             bool* verbatim) {
  auto value_of = [&](const std::string& opt) -> std::string {
    if (at + 1 >= args.size() || args[at + 1] == kAppSeparator)
      throw UsageError(context_name(number) + ": " + opt + " needs a value");
    return args[++at];
  };
  for (; at < args.size(); ++at) {
    const std::string& a = args[at];
    if (a == "--") { *verbatim = true; return at + 1; }
    if (a.size() < 2 || a[0] != '-') return at;
    if (a == "-n" || a == "-np" || a == "--np" || a == "--n") c.np = parse_np(value_of(a), number);
    else if (a.rfind("--np=", 0) == 0) c.np = parse_np(a.substr(5), number);
    else if (a.rfind("-n", 0) == 0 && a.find_first_not_of("0123456789", 2) == std::string::npos) c.np = parse_np(a.substr(2), number);
    else if (a == "-x" || a == "--x") {
      c.exports.push_back(value_of(a));
      check_export(c.exports.back(), context_name(number) + ": -x");
    }
    else if (a == "--ntasks") c.np = parse_np(value_of(a), number);  // srun's -n
    else if (a.rfind("--ntasks=", 0) == 0) c.np = parse_np(a.substr(9), number);
    else if (a == "-env" || a == "--mca" || a == "-mca") {  // mpiexec.hydra's -env NAME VALUE, mpirun's MCA
      const std::string name = value_of(a), value = value_of(a);
      c.exports.push_back((a == "-env" ? "" : "OMPI_MCA_") + name + "=" + value);
      check_export(c.exports.back(), context_name(number) + ": " + a);
    }
    else if (a == "--wdir" || a == "-wdir" || a == "-wd" || a == "--wd") c.wdir = value_of(a);
    else if (a.rfind("--wdir=", 0) == 0) c.wdir = a.substr(7);
    else if (a == "-H" || a == "-host" || a == "--host" || a.rfind("--host=", 0) == 0)
      throw UsageError(context_name(number) + ": " + a + ": the hosts are the whole job's (give --hostfile or -H "
                       "before the first program); each context's ranks follow the ranks before them");
    else
      throw UsageError(context_name(number) + ": '" + a + "' is not an app context option (a context after ':' takes " +
                       "-n, -x, -env, --mca and --wdir; options for the whole job go before the first program)");
  }
  return at;
}

// Splits one app file line into words: blanks separate, '…' and "…" quote.
std::vector<std::string> split_words(const std::string& line, const std::string& where) {
  std::vector<std::string> out;
  std::string word;
  bool in_word = false;
  for (size_t k = 0; k < line.size(); ++k) {
    const char ch = line[k];
    if (ch == '\'' || ch == '"') {
      const size_t end = line.find(ch, k + 1);
      if (end == std::string::npos) throw UsageError(where + ": unterminated " + std::string(1, ch) + " quote");
      word += line.substr(k + 1, end - k - 1), in_word = true, k = end;
    } else if (ch == ' ' || ch == '\t') {
      if (in_word) out.push_back(word), word.clear(), in_word = false;
    } else {
      word += ch, in_word = true;
    }
  }
  if (in_word) out.push_back(word);
  return out;
}
}  // namespace

std::vector<AppContext> parse_app_contexts(const std::vector<std::string>& args, size_t at, int number,
                                           bool one_context) {
  std::vector<AppContext> out;
  while (at < args.size()) {
    AppContext c;
    bool verbatim = one_context;
    at = parse_context_options(args, at, number, c, &verbatim);
    verbatim = verbatim || one_context;
    if (at >= args.size() || (!verbatim && args[at] == kAppSeparator))
      throw UsageError(context_name(number) + ": expected a program after its options, got " +
                       (at >= args.size() ? std::string("the end of the command line") : "':'") +
                       " (write: ... : -n 2 ./worker ARGS)");
    size_t end = at;
    while (end < args.size() && (verbatim || args[end] != kAppSeparator)) ++end;
    c.command.assign(args.begin() + static_cast<long>(at), args.begin() + static_cast<long>(end));
    out.push_back(std::move(c));
    ++number;
    if (end < args.size() && end + 1 == args.size())
      throw UsageError("expected an app context after the last ':' (write: ... : -n 2 ./worker ARGS), got the end "
                       "of the command line");
    at = end + 1;
  }
  return out;
}

std::vector<AppContext> read_app_file(const std::string& path) {
  std::istringstream f(read_user_file(path, "--app", "give a file of app contexts, one per line").text);
  std::vector<AppContext> out;
  std::string line;
  for (int n = 1; std::getline(f, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    const std::string where = path + ":" + std::to_string(n);
    const auto words = split_words(line, where);
    try {
      for (auto& c : parse_app_contexts(words, 0, static_cast<int>(out.size()) + 1, /*one_context=*/true))
        out.push_back(std::move(c));
    } catch (const UsageError& e) {
      throw UsageError(where + ": " + e.what());
    }
  }
  if (out.empty()) throw UsageError("--app " + path + ": no app context in it (one per line: -n 2 ./program ARGS)");
  return out;
}

void check_app_contexts(const std::vector<AppContext>& apps) {
  if (apps.size() < 2) return;
  for (size_t k = 0; k < apps.size(); ++k)
    if (apps[k].np < 1)
      throw UsageError(context_name(static_cast<int>(k) + 1) + " (" + apps[k].command.at(0) +
                       ") needs -n N: with several app contexts each says how many ranks it runs");
}

int app_of_rank(const std::vector<AppContext>& apps, int rank) {
  int first = 0;
  for (size_t k = 0; k < apps.size(); ++k) {
    if (apps[k].np < 1) return static_cast<int>(k);
    first += apps[k].np;
    if (rank < first) return static_cast<int>(k);
  }
  return apps.empty() ? 0 : static_cast<int>(apps.size()) - 1;
}

int app_first_rank(const std::vector<AppContext>& apps, int app) {
  int first = 0;
  for (int k = 0; k < app && k < static_cast<int>(apps.size()); ++k) first += apps[static_cast<size_t>(k)].np;
  return first;
}

}  // namespace dl::launcher
