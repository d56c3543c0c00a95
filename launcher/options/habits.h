#pragma once
// Other launchers' spellings of dlaunch's options (mpirun, mpiexec.hydra,
// srun, torchrun), read in one table (habits.cc): each is dlaunch's option
// under another name, a few dlaunch words, or refused naming what to write
// (docs/dlaunch.md, "Coming from mpirun / srun / torchrun"). Pure: options.cc
// passes every option word through here before Program_options sees it.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "launcher/options/option_sources.h"

namespace dl::launcher {

// Whether NAME (without dashes: "tag-output") is one of dlaunch's long options.
using IsLongOption = std::function<bool(const std::string& name)>;

// The option word `a` as dlaunch spells it, its "=value" kept:
//   torchrun's underscores as dashes      --nproc_per_node=4  -> --nproc-per-node=4
//   a single-dash long option (mpirun's)   -tag-output, -np=2  -> --tag-output, --np=2
//   another launcher's name for an option  -l, --ntasks, -rf   -> --tag-output, --np, --rankfile
// A single-dash word is a long option when `is_long` or the habit table
// knows its name, and that is decided before short options are read: -rf
// is never -r f. `is_long` may be empty (only "--" words are then
// respelled). Any other word comes back as it is.
std::string dlaunch_spelling(const std::string& a, const IsLongOption& is_long);

// Whether NAME (without dashes: "mca") is in the habit table.
bool is_habit(const std::string& name);

// The habits that are several dlaunch words or whose values are checked
// (--mca NAME VALUE, srun's --cpu-bind, torchrun's --nnodes N:N, ...):
// raw[i], whose dlaunch spelling is `spelled`, either becomes dlaunch words
// in `mine` (returns true, i past its values) or is refused with UsageError
// naming what dlaunch offers. Returns false for every other word.
bool translate_habit(const std::string& spelled, const std::vector<std::string>& raw, size_t& i,
                     std::vector<std::string>& mine);

// mpirun's --map-by SPEC in dlaunch's placement and binding: what maps
// exactly is taken, the rest refused.
struct MapByMeaning {
  std::string map_by;      // slot, node, ppr:N:node or ppr:N:socket (options.cc reads ppr)
  int cpus_per_rank = 0;   // :PE=N: --bind-to core --cpus-per-rank N; 0 = not given
  bool oversubscribe = false;  // :OVERSUBSCRIBE
};
// Reads SPEC: slot, core and hwthread place as slot (each host's slots
// filled in turn); node round-robin; ppr:N:node and ppr:N:socket as they
// are; the modifiers :PE=N, :OVERSUBSCRIBE and :NOOVERSUBSCRIBE; names
// compared without case, as mpirun does. Throws UsageError for a mapping
// dlaunch does not make (socket, numa, a cache, seq, ...), naming what to
// write instead.
MapByMeaning read_map_by(const std::string& spec);

// mpirun's --rank-by WORD ("" = not given) beside the placement `map_by`
// (read_map_by's, before ppr is read): dlaunch numbers ranks in the order it
// places them, so WORD is taken when it names that order (slot, core or
// hwthread for slot and ppr placements, node for node) and refused
// otherwise with UsageError naming what to write.
void check_rank_by(const std::string& rank_by, const std::string& map_by);

// The habit table's options that are not in run_option_table() (mpirun's
// --mca, srun's --ntasks and -l, ...): completion offers them too.
const std::vector<OptionSpec>& habit_options();

// srun's --cpu-bind words and the --bind-to words they mean ({"cores", "core"}, ...).
const std::vector<std::pair<std::string, std::string>>& srun_cpu_bind_values();

}  // namespace dl::launcher
