#include "doctor/options.h"

#include <boost/program_options.hpp>
#include <sstream>

#include "errors/error.h"
#include "errors/user_file.h"
#include "errors/user_number.h"

namespace po = boost::program_options;

namespace dl::doctor {

namespace {
// A number option read by parse_seconds or parse_number into `field` when
// the options are stored: nan, inf and values out of range are refused.
template <class Parse>
po::typed_value<std::string>* number(double* field, Parse parse) {
  return po::value<std::string>()->notifier([=](const std::string& text) { *field = parse(text); });
}
auto seconds(const char* option) {
  return [option](const std::string& t) { return parse_seconds(option, t, kMaxWaitSeconds); };
}

po::options_description describe(DoctorOptions& o) {
  po::options_description d("dlaunch doctor options");
  d.add_options()
    ("help,h", "show this help")
    ("hostfile", po::value(&o.hostfile), "hostfile to check (OpenMPI, MPICH or DeepSpeed format)")
    ("machinefile", po::value(&o.hostfile), "alias of --hostfile")
    ("host,H", po::value(&o.hosts), "host list: h1:2,h2:2,node[01-04]")
    ("np,n", po::value(&o.np), "check that the hosts give at least this many slots")
    ("ssh-config", po::value(&o.ssh_config), "ssh client config file (like ssh -F)")
    ("ssh-timeout", number(&o.ssh_timeout_s, seconds("--ssh-timeout")), "ssh connect timeout per host, seconds")
    ("ssh-accept-new", po::bool_switch(&o.ssh_accept_new), "accept unknown host keys (never changed ones)")
    ("ssh-parallel", po::value(&o.ssh_parallel), "ssh sessions opened at once")
    ("prefix", po::value(&o.prefix), "install prefix of dlaunch on remote hosts (DIR/bin/dlaunch)")
    ("launcher", po::value(&o.launcher), "how peers are started: libssh, ssh (the OpenSSH client) or auto (libssh)")
    ("fanout", po::value(&o.fanout), "with more remote hosts than this, peers start peers (a launch tree); 0: all from here")
    ("program", po::value(&o.program), "a program the job will run: must be executable at this path everywhere")
    ("x,x", po::value(&o.exports)->composing(), "a variable to compare across hosts (-x VAR)")
    ("gpus-per-node", po::value(&o.gpus_per_node), "GPUs every host must have")
    ("clock-threshold", number(&o.clock_threshold_s, seconds("--clock-threshold")),
     "seconds a clock may be off the launcher's")
    ("connect-timeout", number(&o.connect_timeout_s, seconds("--connect-timeout")),
     "seconds one host may take to reach another")
    ("link-factor", number(&o.link_factor, [](const std::string& t) { return parse_number("--link-factor", t, 1, 1e6); }),
     "flag a pair this many times slower than a typical host's best pair")
    ("link-seconds", number(&o.link_seconds, seconds("--link-seconds")),
     "seconds of bandwidth test per direction and pair")
    ("links", po::value(&o.links), "which pairs stage 5 tests: full (every pair), sparse (a ring and random matchings), auto")
    ("link-parallel", po::value(&o.link_parallel), "pairs measured at once, and hosts probing at once in the network stage (0: a whole round, every host)")
    ("quick", po::bool_switch(&o.quick), "stop after the remote environment (stages 1-3)")
    ("verbose,v", po::bool_switch(&o.verbose), "a table row for every host, however many")
    ("json", po::bool_switch(&o.json), "write the report as JSON on stdout")
    ("write-healthy", po::value(&o.write_healthy), "write a hostfile of the hosts that passed")
    ("peer", po::bool_switch(&o.peer), "internal: the remote side of the doctor")
    ("cuda-probe", po::bool_switch(&o.cuda_probe), "internal: print what the CUDA driver sees on this host");
  return d;
}

}  // namespace

std::vector<std::string> doctor_option_names() {
  DoctorOptions o;
  std::vector<std::string> out;
  const auto desc = describe(o);
  for (const auto& od : desc.options()) {
    if (od->long_name() == "peer" || od->long_name() == "cuda-probe") continue;  // internal
    if (od->long_name().size() > 1) out.push_back("--" + od->long_name());
    const std::string shortname = od->canonical_display_name(po::command_line_style::allow_dash_for_short);
    if (shortname.size() == 2 && shortname[0] == '-') out.push_back(shortname);
  }
  return out;
}

namespace {
std::string normalize(const std::string& a) {
  if (a == "-np" || a == "-hostfile" || a == "-machinefile" || a == "-host") return "-" + a;
  return a;
}

void validate(const DoctorOptions& o) {
  if (o.peer || o.cuda_probe) return;
  if (!o.hostfile.empty() && !o.hosts.empty()) throw UsageError("give either --hostfile or -H, not both");
  if (o.np < 0) throw UsageError("-n must be positive, got " + std::to_string(o.np));
  if (o.ssh_parallel < 1) throw UsageError("--ssh-parallel must be at least 1");
  if (o.fanout < 0 || o.fanout == 1) throw UsageError("--fanout takes 0 (every peer from here) or at least 2, got " + std::to_string(o.fanout));
  if (o.links != "auto" && o.links != "full" && o.links != "sparse")
    throw UsageError("--links takes full, sparse or auto, got '" + o.links + "'");
  if (o.link_parallel < -1) throw UsageError("--link-parallel takes 0 (a whole round) or more pairs, got " + std::to_string(o.link_parallel));
  if (!o.ssh_config.empty()) read_user_file(o.ssh_config, "--ssh-config", "give an ssh client config file (ssh -F)");
  if (!o.program.empty() && o.program[0] != '/')
    throw UsageError("--program wants an absolute path (the same path on every host), got '" + o.program + "'");
}
}  // namespace

DoctorOptions parse_doctor_options(const std::vector<std::string>& args, bool* help) {
  DoctorOptions o;
  auto desc = describe(o);
  std::vector<std::string> norm;
  for (const auto& a : args) norm.push_back(normalize(a));
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(norm).options(desc).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(std::string("dlaunch doctor: ") + e.what() + "; `dlaunch help doctor` lists the options");
  }
  *help = vm.count("help") > 0;
  if (!*help) validate(o);
  return o;
}

std::string doctor_options_help() {
  DoctorOptions o;
  std::ostringstream s;
  s << "usage: dlaunch doctor (--hostfile FILE | -H LIST) [options]\n\n"
       "Checks the hosts a job would run on, stage by stage (hostfile, ssh, remote\n"
       "environment, network, links, all_reduce), and names each problem with its fix.\n"
       "Exit 0: healthy; 1: a problem was found; 2: bad usage. Manual: docs/doctor.md\n\n"
    << describe(o);
  return s.str();
}

}  // namespace dl::doctor
