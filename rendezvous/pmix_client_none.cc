// query_pmix in a build without libpmix (DLAUNCH_PMIX=OFF, or libpmix-dev
// missing): CMake builds this file instead of pmix_client.cc.
#include "errors/error.h"
#include "rendezvous/pmix_client.h"

namespace dl::rdzv {

PmixJobInfo query_pmix() {
  throw IoError("PMIX_RANK/PMIX_NAMESPACE are set but this dlaunch was built without libpmix");
}

}  // namespace dl::rdzv
