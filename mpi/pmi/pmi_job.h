#pragma once
// What a host's PMI server knows of the job, from the launch message's mpi
// section, and the PMI_process_mapping value MPICH builds its node map from.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "control/messages.h"
#include "control/protocol.h"
#include "mpi/job_map.h"

namespace dl::mpi::pmi {

struct PmiJob {
  JobMap map;                    // the job (mpi/job_map.h): its namespace is the key-value space's name
  std::string process_mapping;   // "(vector,(0,2,4),...)", "" if too long
  // False when the job serves only PMIx (--mpi pmix): a rank that speaks PMI
  // is told so and refused, rather than coming up as a singleton.
  bool serve = true;
  const std::string& kvsname() const { return map.nspace; }
  // This host's ranks.
  const std::vector<int>& local_ranks() const { return map.node_ranks.at(static_cast<size_t>(map.node_rank)); }
};

// The job as the launch message's mpi section describes it. Throws
// UsageError when the section is inconsistent (mpi::validate), or its
// namespace cannot name a key-value space.
PmiJob job_from(const control::msg::MpiSection& mpi, bool serve);

// Hydra's PMI_process_mapping for ranks placed by node (`node_ranks[n]` are
// node n's ranks): "(vector,(first_node,node_count,ranks_per_node),...)",
// read by MPICH in rank order, one block per run of nodes that hold the same
// number of consecutive ranks. Empty when the mapping would not fit in
// `max_len` bytes (MPICH then learns locality on its own).
std::string process_mapping(const std::vector<std::vector<int>>& node_ranks, size_t max_len = 1024);

// Fence ids on the control connection are shared with the PMIx server, whose
// ids count from 0: a PMI fence's id has the top bit set.
inline constexpr uint64_t kFenceIdBit = control::kPmiFenceBit;
inline bool is_pmi_fence(uint64_t id) { return (id & kFenceIdBit) != 0; }

// A host's fence contribution: its ranks' puts since the last fence, as
// `u32 key length | key | u32 value length | value` records; the launcher
// concatenates the hosts' blobs, which decode_puts reads back. Throws
// RemoteError on a truncated record.
std::string encode_puts(const std::vector<std::pair<std::string, std::string>>& puts);
std::vector<std::pair<std::string, std::string>> decode_puts(std::string_view blob);

}  // namespace dl::mpi::pmi
