#pragma once
// libpmix and hwloc are loaded by dlaunch-agent when the PMIx server needs
// them, not when the agent starts (as libssh is for dlaunch,
// remote/ssh/libssh_loader.h).
//
// dl_pmix is compiled against their headers; in dlaunch-agent (built with
// DLAUNCH_LAZY_PMIX, the default) pmix_loader.cc defines each libpmix and
// hwloc function dl_pmix calls as a forwarder that, on its first call,
// dlopens the library by its SONAME and looks the real function up. The
// agent's main thread then starts without mapping libpmix, hwloc, libevent,
// munge and udev (about 0.8 ms of CPU, most of it the kernel's mmaps and
// page faults, measured in docs/benchmarks.md); the PMIx server's thread
// calls preload() when the first rank connects (MPI_Init), so a job whose
// ranks never call MPI_Init never loads them (a rank's environment names the
// headers' version, not the library's). An agent with --no-pmix never
// loads them either. Neither binary carries a RUNPATH: a library ld.so does
// not find by SONAME is tried at the path the build found it.
//
// A libpmix or hwloc function that mpi/pmix starts to call must be added
// to the list in pmix_loader.cc (dlaunch-agent's link fails, naming it, until
// it is), or the build configured with -DDLAUNCH_LAZY_PMIX=OFF. Test
// programs link the libraries directly and never use the forwarders.

namespace dl::mpi::pmix {

// Loads libpmix and hwloc now (once; later calls return at once). Throws
// IoError naming the library and what to install when one cannot be
// loaded. Without the forwarders (linked directly) it does nothing.
void preload();
// True once libpmix is mapped into this process (always, when linked directly).
bool libpmix_loaded();

}  // namespace dl::mpi::pmix
