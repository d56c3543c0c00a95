#pragma once
// Internal to mpi/pmix: the pmix_info_t lists handed to libpmix, built from
// a JobMap. Every key and why it is there is listed in docs/mpi.md.
#include <pmix.h>
#include <pmix_server.h>

#include <cstdint>
#include <string>
#include <vector>

#include "mpi/job_map.h"

namespace dl::mpi::pmix {

// An owning list of pmix_info_t (libpmix copies what it is given).
class InfoList {
 public:
  InfoList() = default;
  InfoList(const InfoList&) = delete;
  InfoList& operator=(const InfoList&) = delete;
  ~InfoList();

  void add_string(const char* key, const std::string& value);
  void add_u32(const char* key, uint32_t value);
  void add_u16(const char* key, uint16_t value);
  void add_rank(const char* key, uint32_t value);
  void add_bool(const char* key, bool value);
  // key = a PMIX_DATA_ARRAY of `inner`'s entries (copied).
  void add_array(const char* key, InfoList& inner);
  // A constructed entry whose value the caller loads.
  pmix_info_t& add_raw(const char* key) { return next(key); }

  pmix_info_t* data() { return items_.data(); }
  size_t size() const { return items_.size(); }

 private:
  pmix_info_t& next(const char* key);
  std::vector<pmix_info_t> items_;
};

// Everything PMIx_server_register_nspace gets for this job on this host;
// topo_xml (may be empty) becomes PMIX_LOCAL_TOPO. Throws IoError when
// PMIx_generate_regex/ppn fail.
void build_nspace_info(const JobMap& map, const std::string& nsdir, const std::string& topo_xml, InfoList& out);

}  // namespace dl::mpi::pmix
