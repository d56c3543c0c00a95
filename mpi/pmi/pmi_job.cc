#include "mpi/pmi/pmi_job.h"

#include "errors/error.h"
#include "wire/coding.h"

namespace dl::mpi::pmi {

PmiJob job_from(const control::msg::MpiSection& mpi, bool serve) {
  PmiJob j;
  j.map = job_map_from(mpi);
  j.serve = serve;
  if (j.kvsname().find_first_of(" ;=\n") != std::string::npos)
    throw UsageError("mpi: the job id '" + j.kvsname() + "' cannot be a PMI key-value space name");
  validate(j.map);
  j.process_mapping = process_mapping(mpi.node_ranks);
  return j;
}

std::string process_mapping(const std::vector<std::vector<int>>& node_ranks, size_t max_len) {
  size_t world = 0;
  for (const auto& r : node_ranks) world += r.size();
  std::vector<int> node_of(world, -1);
  for (size_t n = 0; n < node_ranks.size(); ++n)
    for (int r : node_ranks[n])
      if (r >= 0 && static_cast<size_t>(r) < world) node_of[static_cast<size_t>(r)] = static_cast<int>(n);
  // Runs of consecutive ranks on one node: (node, length).
  std::vector<std::pair<int, int>> runs;
  for (size_t r = 0; r < world; ++r) {
    if (node_of[r] < 0) return "";
    if (!runs.empty() && runs.back().first == node_of[r]) ++runs.back().second;
    else runs.emplace_back(node_of[r], 1);
  }
  // Blocks: consecutive node ids with the same run length merge.
  struct Block { int first, count, size; };
  std::vector<Block> blocks;
  for (const auto& [node, len] : runs) {
    auto& b = blocks;
    if (!b.empty() && b.back().size == len && b.back().first + b.back().count == node) ++b.back().count;
    else b.push_back({node, 1, len});
  }
  std::string out = "(vector";
  for (const auto& b : blocks) {
    out += ",(" + std::to_string(b.first) + "," + std::to_string(b.count) + "," + std::to_string(b.size) + ")";
    if (out.size() + 1 > max_len) return "";
  }
  return out + ")";
}

std::string encode_puts(const std::vector<std::pair<std::string, std::string>>& puts) {
  std::string out;
  for (const auto& [k, v] : puts) {
    wire::append_be32(out, static_cast<uint32_t>(k.size()));
    out += k;
    wire::append_be32(out, static_cast<uint32_t>(v.size()));
    out += v;
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> decode_puts(std::string_view blob) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t i = 0;
  auto field = [&](std::string& dst) {
    if (blob.size() - i < 4) throw RemoteError("PMI fence data: truncated record");
    const uint32_t n = wire::get_be32(blob.data() + i);
    i += 4;
    if (blob.size() - i < n) throw RemoteError("PMI fence data: truncated record");
    dst.assign(blob.substr(i, n));
    i += n;
  };
  while (i < blob.size()) {
    std::pair<std::string, std::string> kv;
    field(kv.first);
    field(kv.second);
    out.push_back(std::move(kv));
  }
  return out;
}

}  // namespace dl::mpi::pmi
