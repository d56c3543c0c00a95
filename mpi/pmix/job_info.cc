#include "mpi/pmix/job_info.h"

#include <algorithm>
#include <cstdlib>


namespace dl::mpi::pmix {

InfoList::~InfoList() {
  for (auto& info : items_) PMIX_INFO_DESTRUCT(&info);
}

pmix_info_t& InfoList::next(const char* key) {
  items_.emplace_back();
  pmix_info_t& info = items_.back();
  PMIX_INFO_CONSTRUCT(&info);
  PMIX_LOAD_KEY(info.key, key);
  return info;
}

void InfoList::add_string(const char* key, const std::string& value) {
  PMIx_Value_load(&next(key).value, value.c_str(), PMIX_STRING);
}
void InfoList::add_u32(const char* key, uint32_t value) {
  PMIx_Value_load(&next(key).value, &value, PMIX_UINT32);
}
void InfoList::add_u16(const char* key, uint16_t value) {
  PMIx_Value_load(&next(key).value, &value, PMIX_UINT16);
}
void InfoList::add_rank(const char* key, uint32_t value) {
  pmix_rank_t r = value;
  PMIx_Value_load(&next(key).value, &r, PMIX_PROC_RANK);
}
void InfoList::add_bool(const char* key, bool value) {
  PMIx_Value_load(&next(key).value, &value, PMIX_BOOL);
}
void InfoList::add_array(const char* key, InfoList& inner) {
  pmix_data_array_t darray;
  darray.type = PMIX_INFO;
  darray.size = inner.size();
  darray.array = inner.data();
  PMIx_Value_load(&next(key).value, &darray, PMIX_DATA_ARRAY);  // deep copy
}

namespace {

std::string generate(pmix_status_t (*fn)(const char*, char**), const std::string& input,
                     const char* what) {
  char* out = nullptr;
  pmix_status_t rc = fn(input.c_str(), &out);
  if (rc != PMIX_SUCCESS || out == nullptr)
    throw IoError(std::string("pmix: ") + what + " failed for '" + input + "': " +
                  PMIx_Error_string(rc));
  std::string s(out);
  std::free(out);
  return s;
}

// Per-process data for every rank of the job, local or not: OpenMPI asks for
// a peer's hostname, node id and local rank while wiring up.
void add_proc_data(const JobMap& map, InfoList& out) {
  auto places = place_ranks(map);
  for (int r = 0; r < map.world_size; ++r) {
    const RankPlace& p = places[r];
    InfoList proc;
    proc.add_rank(PMIX_RANK, r);
    const int app = app_of(map, r);
    proc.add_u32(PMIX_APPNUM, static_cast<uint32_t>(app));
    proc.add_rank(PMIX_GLOBAL_RANK, r);
    proc.add_rank(PMIX_APP_RANK, static_cast<uint32_t>(r - app_leader(map, app)));
    proc.add_u16(PMIX_LOCAL_RANK, static_cast<uint16_t>(p.local_rank));
    proc.add_u16(PMIX_NODE_RANK, static_cast<uint16_t>(p.local_rank));
    proc.add_string(PMIX_HOSTNAME, map.node_hosts[p.node]);
    proc.add_u32(PMIX_NODEID, static_cast<uint32_t>(p.node));
    proc.add_bool(PMIX_SPAWNED, !map.parent_nspace.empty());
    out.add_array(PMIX_PROC_DATA, proc);
  }
}

// The apps: their number, and for each its number, size and leader (an
// PMIX_APP_INFO_ARRAY, as PRRTE registers them). The job-level APP_SIZE and
// APPLDR are app 0's, for clients that ask without naming an app.
void add_app_info(const JobMap& map, InfoList& out) {
  const std::vector<int> sizes = map.app_sizes.empty() ? std::vector<int>{map.world_size} : map.app_sizes;
  out.add_u32(PMIX_JOB_NUM_APPS, static_cast<uint32_t>(sizes.size()));
  out.add_u32(PMIX_APP_SIZE, static_cast<uint32_t>(sizes[0]));
  out.add_rank(PMIX_APPLDR, 0);
  for (size_t k = 0; k < sizes.size(); ++k) {
    InfoList app;
    app.add_u32(PMIX_APPNUM, static_cast<uint32_t>(k));
    app.add_u32(PMIX_APP_SIZE, static_cast<uint32_t>(sizes[k]));
    app.add_rank(PMIX_APPLDR, static_cast<uint32_t>(app_leader(map, static_cast<int>(k))));
    out.add_array(PMIX_APP_INFO_ARRAY, app);
  }
}

}  // namespace

void build_nspace_info(const JobMap& map, const std::string& nsdir, const std::string& topo_xml, InfoList& out) {
  const auto& local = map.node_ranks[map.node_rank];
  const uint32_t world = static_cast<uint32_t>(map.world_size);
  // Job level.
  out.add_string(PMIX_JOBID, map.nspace);
  out.add_u32(PMIX_JOB_SIZE, world);
  out.add_u32(PMIX_UNIV_SIZE, static_cast<uint32_t>(universe_size(map)));
  out.add_u32(PMIX_MAX_PROCS, static_cast<uint32_t>(universe_size(map)));
  add_app_info(map, out);
  out.add_u32(PMIX_NUM_NODES, static_cast<uint32_t>(map.node_hosts.size()));
  out.add_string(PMIX_NODE_MAP, generate(PMIx_generate_regex, hosts_string(map), "PMIx_generate_regex"));
  out.add_string(PMIX_PROC_MAP, generate(PMIx_generate_ppn, ppn_string(map), "PMIx_generate_ppn"));
  out.add_string(PMIX_TMPDIR, map.tmpdir);
  out.add_string(PMIX_NSDIR, nsdir);
  out.add_bool(PMIX_TDIR_RMCLEAN, true);
  if (!map.parent_nspace.empty()) {
    // MPI_Comm_spawn's children: who spawned them.
    out.add_bool(PMIX_SPAWNED, true);
    pmix_proc_t parent;
    PMIX_LOAD_PROCID(&parent, map.parent_nspace.c_str(), static_cast<pmix_rank_t>(map.parent_rank));
    PMIx_Value_load(&out.add_raw(PMIX_PARENT_ID).value, &parent, PMIX_PROC);
  }
  // Node level (this host).
  out.add_string(PMIX_HOSTNAME, map.node_hosts[map.node_rank]);
  out.add_u32(PMIX_NODEID, static_cast<uint32_t>(map.node_rank));
  out.add_u32(PMIX_LOCAL_SIZE, static_cast<uint32_t>(local.size()));
  out.add_u32(PMIX_NODE_SIZE, static_cast<uint32_t>(local.size()));
  out.add_string(PMIX_LOCAL_PEERS, local_peers_string(map));
  if (!local.empty()) out.add_rank(PMIX_LOCALLDR, static_cast<uint32_t>(*std::min_element(local.begin(), local.end())));
  if (!topo_xml.empty()) out.add_string(PMIX_LOCAL_TOPO, topo_xml);
  // Process level.
  add_proc_data(map, out);
}

}  // namespace dl::mpi::pmix
