#include "hostfiles/rankfile.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <stdexcept>

#include "errors/error.h"
#include "errors/user_file.h"

namespace dl::hostfiles {
namespace {

constexpr int kMaxRanks = 1 << 24;

std::string trimmed(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t\r") - a + 1);
}

[[noreturn]] void bad_line(const std::string& origin, const std::string& what) {
  throw ParseError(origin + ": " + what + " (a rankfile line is: rank N=HOST slot=CPUS, e.g. rank 0=node1 slot=0-3)");
}

// "rank 3=node1 slot=0-3" -> its parts; origin names it in errors.
RankfileLine parse_line(const std::string& line, const std::string& origin) {
  std::istringstream words(line);
  std::string rank_word, assignment, slot;
  words >> rank_word >> assignment >> slot;
  if (rank_word != "rank") bad_line(origin, "expected 'rank', got '" + rank_word + "'");
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == assignment.size())
    bad_line(origin, "expected N=HOST after 'rank', got '" + assignment + "'");
  const std::string number = assignment.substr(0, eq);
  if (number.size() > 8 || number.find_first_not_of("0123456789") != std::string::npos)
    bad_line(origin, "expected a rank number, got '" + number + "'");
  RankfileLine out{std::stoi(number), assignment.substr(eq + 1), "", origin};
  if (out.host[0] == '+')
    bad_line(origin, "relative hosts (" + out.host + ") name no host here; write the host's name");
  if (!slot.empty()) {
    if (slot.rfind("slot=", 0) != 0 || slot.size() == 5) bad_line(origin, "expected slot=CPUS, got '" + slot + "'");
    out.slot = slot.substr(5);
  }
  if (std::string extra; words >> extra) bad_line(origin, "unexpected '" + extra + "' after the slot");
  return out;
}

}  // namespace

std::vector<RankfileLine> parse_rankfile(const std::string& text, const std::string& file) {
  std::vector<RankfileLine> lines;
  std::map<int, std::string> seen;  // rank -> its line
  std::istringstream in(text);
  int number = 0;
  for (std::string raw; std::getline(in, raw);) {
    ++number;
    const std::string line = trimmed(raw.substr(0, raw.find('#')));
    if (line.empty()) continue;
    const std::string origin = file + ":" + std::to_string(number);
    RankfileLine l = parse_line(line, origin);
    if (l.rank >= kMaxRanks) bad_line(origin, "rank " + std::to_string(l.rank) + " is past any job's size");
    if (auto [it, fresh] = seen.emplace(l.rank, origin); !fresh)
      throw ParseError(origin + ": rank " + std::to_string(l.rank) + " is placed again (first at " + it->second +
                       "); give each rank one line");
    lines.push_back(std::move(l));
  }
  if (lines.empty()) throw ParseError(file + ": no 'rank N=HOST' lines; give one line per rank");
  int expect = 0;
  for (const auto& [rank, origin] : seen) {
    if (rank != expect)
      throw ParseError(file + ": rank " + std::to_string(expect) + " has no line (the ranks run 0.." +
                       std::to_string(seen.size() - 1) + " with no gap; " + origin + " places rank " +
                       std::to_string(rank) + ")");
    ++expect;
  }
  std::sort(lines.begin(), lines.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  return lines;
}

std::vector<RankfileLine> read_rankfile(const std::string& path) {
  return parse_rankfile(read_user_file(path, "rankfile (--rankfile)").text, path);
}

Placement place_by_rankfile(const std::vector<RankfileLine>& lines, const std::vector<HostEntry>& hosts, int np) {
  if (np != 0 && np != static_cast<int>(lines.size()))
    throw UsageError("-n " + std::to_string(np) + " with a rankfile of " + std::to_string(lines.size()) +
                     " ranks (" + lines.front().origin.substr(0, lines.front().origin.rfind(':')) +
                     "); leave -n out, or give a rankfile line to each rank");
  std::vector<HostEntry> order = hosts;
  std::map<std::string, int> index;  // host name -> its place in `order` (the first entry of that name)
  for (size_t h = 0; h < order.size(); ++h) index.emplace(order[h].host, static_cast<int>(h));
  std::vector<int> host_of_rank;
  for (const auto& l : lines) {
    auto it = index.find(l.host);
    if (it == index.end()) {
      if (!hosts.empty())
        throw UsageError(l.origin + ": host '" + l.host + "' is not one of the job's hosts (" +
                         hosts.front().origin + "); add it there, or name one of them");
      order.push_back(HostEntry{l.host, "", 0, 1, 0, false, l.origin});
      it = index.emplace(l.host, static_cast<int>(order.size() - 1)).first;
    }
    host_of_rank.push_back(it->second);
  }
  Placement p = place_given(order, host_of_rank);
  for (size_t r = 0; r < lines.size(); ++r) p.ranks[r].cpus = lines[r].slot;
  return p;
}

std::vector<int> rankfile_cpus(const std::string& slot, const CpuTopology& topo, const std::string& host,
                               const std::string& origin) {
  std::vector<int> usable;
  for (const auto& core : topo.cores) usable.insert(usable.end(), core.begin(), core.end());
  std::sort(usable.begin(), usable.end());
  const size_t colon = slot.find(':');
  std::vector<int> out;
  try {
    if (colon == std::string::npos) {
      out = parse_cpu_list(slot);
      for (int c : out)
        if (!std::binary_search(usable.begin(), usable.end(), c))
          throw std::runtime_error(origin + ": slot=" + slot + ": CPU " + std::to_string(c) + " is not one " + host +
                                   " lets dlaunch use (" + format_cpu_list(usable) + ")");
      return out;
    }
    const auto sockets = parse_cpu_list(slot.substr(0, colon));
    const auto cores = parse_cpu_list(slot.substr(colon + 1));
    if (sockets.size() != 1) throw std::invalid_argument("one socket");
    const size_t s = static_cast<size_t>(sockets.front());
    if (s >= topo.packages.size())
      throw std::runtime_error(origin + ": slot=" + slot + ": " + host + " has " + std::to_string(topo.packages.size()) +
                               " usable socket(s), numbered from 0");
    const auto& pkg = topo.packages[s];
    std::vector<const std::vector<int>*> in_socket;  // the socket's cores, in order
    for (const auto& core : topo.cores)
      if (!core.empty() && std::binary_search(pkg.begin(), pkg.end(), core.front())) in_socket.push_back(&core);
    for (int c : cores) {
      if (static_cast<size_t>(c) >= in_socket.size())
        throw std::runtime_error(origin + ": slot=" + slot + ": socket " + std::to_string(s) + " of " + host +
                                 " has " + std::to_string(in_socket.size()) + " usable cores, numbered from 0");
      out.insert(out.end(), in_socket[static_cast<size_t>(c)]->begin(), in_socket[static_cast<size_t>(c)]->end());
    }
  } catch (const std::invalid_argument&) {
    throw std::runtime_error(origin + ": slot=" + slot + ": expected CPUS (0-3,8) or SOCKET:CORES (1:0-2)");
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace dl::hostfiles
