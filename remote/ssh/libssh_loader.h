#pragma once
// libssh is loaded when a remote host needs it, not when dlaunch starts.
//
// dl_ssh is compiled against libssh's headers but not linked with it:
// libssh_loader.cc defines every libssh function this folder calls as a small
// forwarder that, on its first call, dlopens libssh (and with it libcrypto
// and Kerberos) and looks the real function up. A local job, `dlaunch
// --version` and every command that reaches no host never map libssh
// (docs/design.md, "libssh is loaded on first use"); the first ssh session
// pays its loading once.
//
// A function of libssh that remote/ssh starts to call must be added to the
// list in libssh_loader.cc (the link fails, naming it, until it is), or the
// build configured with -DDLAUNCH_LAZY_LIBSSH=OFF, which links libssh as
// before.

namespace dl::ssh {

// True once libssh has been loaded into this process (by the first call of
// any libssh function through the forwarders; always true when libssh is
// linked directly).
bool libssh_loaded();

}  // namespace dl::ssh
