#pragma once
// torchrun's output options typed: -r/--redirects and -t/--tee (which
// streams of which ranks go to files) and --local-ranks-filter (which ranks
// reach the console), parsed once with the command line
// (launcher/options/options.h) and routed by launcher/output/output_sink.h.
#include <map>
#include <string>
#include <vector>

namespace dl::launcher {

// torchrun's -r/--redirects and -t/--tee value: a mask of streams (torchrun's
// Std: 0 none, 1 stdout, 2 stderr, 3 both) for every rank, or per local rank
// ("0:1,1:2"; local ranks not named get 0), as torchrun keys its maps.
struct StdSpec {
  int all = 0;
  std::map<int, int> by_local_rank;
  bool mapped = false;  // by_local_rank is what counts
  int mask(int local_rank) const;
  bool any() const;  // some stream of some rank goes to files
};
// Parses a StdSpec; UsageError naming `option` on anything else.
StdSpec parse_std_spec(const std::string& text, const std::string& option);
// torchrun's --local-ranks-filter: "0" or "0,2"; "" = no filter (empty list).
std::vector<int> parse_rank_list(const std::string& text, const std::string& option);

}  // namespace dl::launcher
