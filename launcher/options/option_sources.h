#pragma once
// Where `dlaunch [run]` option defaults come from besides the built-in ones:
// a system config file, a user config file and DLAUNCH_<OPTION> environment
// variables. Precedence, highest first: command line > DLAUNCH_<OPTION> >
// user config > system config > built in (docs/dlaunch.md, "Option defaults").
//
// Pure: files are read here, but nothing of Program_options is; options.cc
// stores the settings into its variables_map below the command line's.
#include <string>
#include <vector>

#include "rendezvous/bootstrap.h"

namespace dl::launcher {

// One option of the run table, as options.cc describes it.
struct OptionSpec {
  std::string name;          // long name, without dashes: "kill-grace"
  std::string short_name;    // "-n" for -n; "" when it has none
  bool takes_value = false;  // false for switches (--tag-output): true/false in a config file
};

// One default that won its option's group (below).
struct OptionSetting {
  std::string name;    // long name, as in OptionSpec
  std::string value;   // as written; for a switch "true" (a false switch yields no setting)
  std::string origin;  // "env DLAUNCH_KILL_GRACE", "user config /home/a/.config/dlaunch/config:3"
};

// The two config files: DLAUNCH_SYSTEM_CONFIG or /etc/dlaunch/config, and
// DLAUNCH_CONFIG or $XDG_CONFIG_HOME/dlaunch/config or
// $HOME/.config/dlaunch/config. `explicit_*` when an env variable named it:
// then a missing file is an error rather than "no file".
struct ConfigPaths {
  std::string system, user;
  bool explicit_system = false, explicit_user = false;
};
ConfigPaths config_paths(const rdzv::Environment& env);

struct OptionDefaults {
  ConfigPaths paths;
  bool system_read = false, user_read = false;  // the file existed and was read
  std::vector<OptionSetting> settings;          // at most one source per group, in table order
};

// Reads both files and the environment against `table`. Throws ParseError
// "FILE:LINE: expected ..." for a bad line (unknown option with a did-you-mean,
// an option that cannot be a default and why, a switch that is not
// true/false, an option set twice in one file), UsageError for a bad
// DLAUNCH_<OPTION> value of a switch, and read_user_file's UsageError for a
// file that exists but will not be read (not a regular file, over 1 MiB,
// unreadable), or a DLAUNCH_CONFIG/DLAUNCH_SYSTEM_CONFIG that names none;
// UsageError too for a config file that another user could have written
// (owned by neither this user nor root, or group- or other-writable: it can
// name a program to run), naming its owner or mode and the fix.
OptionDefaults load_option_defaults(const std::vector<OptionSpec>& table, const rdzv::Environment& env);

// The variable that sets `option`: DLAUNCH_ and the name upper-cased, '-' as
// '_' ("kill-grace" -> "DLAUNCH_KILL_GRACE"); "" when the option cannot be a
// default, or its name is one dlaunch already uses for something else
// (reserved_env_names()).
std::string env_name_for(const std::string& option);
// Why `option` cannot be a default ("" when it can).
std::string not_a_default(const std::string& option);
// DLAUNCH_* names that are not option defaults (the ranks' environment, the
// job token, the config paths, test hooks).
const std::vector<std::string>& reserved_env_names();

// Options that set one thing: a higher-precedence source that gives any of
// them hides the lower sources' settings of all of them (a --host on the
// command line hides a hostfile from a config file). Returns the group of
// `option` (itself alone when it is in none).
std::vector<std::string> option_group(const std::string& option);

// The help text's last part: the files (read, absent), the precedence, and
// each setting with its origin.
std::string describe_defaults(const OptionDefaults& d);

}  // namespace dl::launcher
