#include "launcher/options/app_context.h"

#include <algorithm>
#include <memory>
#include <sstream>

#include "errors/error.h"
#include "errors/user_file.h"
#include "launcher/options/options.h"

namespace dl::launcher {

namespace {
std::string context_name(int number) { return "app context " + std::to_string(number); }

int parse_np(const std::string& text, int number) {
  const bool digits = !text.empty() && text.size() < 8 && text.find_first_not_of("0123456789") == std::string::npos;
  if (!digits || std::stoi(text) < 1)
    throw UsageError(context_name(number) + ": -n needs a positive number of ranks, got '" + text + "'");
  return std::stoi(text);
}

// What a context after ':' takes, for the messages.
constexpr const char* kContextTakes =
    "a context after ':' takes -n/-np, -x, -env, --mca and --wdir; options for the whole job go before the first "
    "program";

// One context's options, from args[at]; returns the index of its program and
// sets *verbatim when a `--` ended them. Each word is first spelt as the
// first context's are (dlaunch_spelling, translate_habit: -np=2, -wdir,
// --ntasks, -mca ...), so every context takes the same spellings.
size_t parse_context_options(const std::vector<std::string>& args, size_t at, int number, AppContext& c,
                             bool* verbatim, const IsLongOption& is_long) {
  const std::string where = context_name(number);
  for (; at < args.size(); ++at) {
    const std::string& word = args[at];
    if (word == "--") { *verbatim = true; return at + 1; }
    if (word.size() < 2 || word[0] != '-') return at;
    const std::string typed = word.substr(0, word.find('='));
    const std::string a = dlaunch_spelling(word, is_long);
    const size_t eq = a.find('=');
    const std::string opt = a.substr(0, eq);
    // The option's value: attached (=V) or the next word, never a ':'.
    auto value = [&]() -> std::string {
      if (eq != std::string::npos) return a.substr(eq + 1);
      if (at + 1 >= args.size() || args[at + 1] == kAppSeparator) throw UsageError(where + ": " + typed + " needs a value");
      return args[++at];
    };
    auto add_export = [&](std::string entry) {
      check_export(entry, where + ": " + typed);
      c.exports.push_back(std::move(entry));
    };
    if (opt == "--np" || opt == "-n" || opt == "--n") {
      c.np = parse_np(value(), number);
    } else if (opt.rfind("-n", 0) == 0 && opt[2] != '-') {  // -n4
      c.np = parse_np(opt.substr(2), number);
    } else if (opt == "-x" || opt == "--x") {
      add_export(value());
    } else if (opt.rfind("-x", 0) == 0) {  // -xVAR, as Program_options reads the first context's
      add_export(a.substr(2));
    } else if (opt == "--wdir") {
      c.wdir = value();
    } else if (opt == "-env" || opt == "--env") {  // mpiexec.hydra's -env NAME VALUE, this context's
      const std::string name = value(), v = value();
      add_export(name + "=" + v);
    } else if (opt == "--host" || opt.rfind("-H", 0) == 0) {
      throw UsageError(where + ": " + typed + ": the hosts are the whole job's (give --hostfile or -H before the "
                       "first program); each context's ranks follow the ranks before them");
    } else if (opt == "--mca") {  // mpirun's -mca NAME VALUE: this context's OMPI_MCA_NAME=VALUE
      std::vector<std::string> mine;
      size_t i = at;
      try {
        translate_habit(a, args, i, mine);
      } catch (const UsageError& e) {
        throw UsageError(where + ": " + e.what());
      }
      for (size_t k = at + 1; k <= i; ++k)
        if (args[k] == kAppSeparator) throw UsageError(where + ": " + typed + " takes NAME VALUE before the next ':'");
      at = i;
      for (size_t k = 0; k + 1 < mine.size(); k += 2) add_export(mine[k + 1]);
    } else if (opt.rfind("--", 0) == 0 && opt.size() > 2 && (is_habit(opt.substr(2)) || is_long(opt.substr(2)))) {
      throw UsageError(where + ": " + typed + (typed == opt ? "" : " (" + opt + ")") +
                       " is an option for the whole job: give it before the first program (" + kContextTakes + ")");
    } else {
      throw UsageError(where + ": '" + typed + "' is not an app context option (" + kContextTakes + ")");
    }
  }
  return at;
}

// The long-option test of the run options, for a caller that gives none.
IsLongOption run_options_lookup(const IsLongOption& given) {
  if (given) return given;
  auto names = std::make_shared<std::vector<std::string>>();
  for (const auto& spec : run_option_table()) names->push_back(spec.name);
  return [names](const std::string& name) { return std::find(names->begin(), names->end(), name) != names->end(); };
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
                                           bool one_context, const IsLongOption& is_long) {
  const IsLongOption lookup = run_options_lookup(is_long);
  std::vector<AppContext> out;
  while (at < args.size()) {
    AppContext c;
    bool verbatim = one_context;
    at = parse_context_options(args, at, number, c, &verbatim, lookup);
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

std::vector<AppContext> read_app_file(const std::string& path, const IsLongOption& is_long) {
  const IsLongOption lookup = run_options_lookup(is_long);
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
      for (auto& c : parse_app_contexts(words, 0, static_cast<int>(out.size()) + 1, /*one_context=*/true, lookup))
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
