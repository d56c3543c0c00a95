// The forwarders of libssh_loader.h: one per libssh function remote/ssh
// calls, with libssh's own prototype, resolved on first call.
#include "remote/ssh/libssh_loader.h"

#include <dlfcn.h>
#include <libssh/callbacks.h>
#include <libssh/libssh.h>

#include <atomic>
#include <mutex>
#include <string>

#include "errors/error.h"
#include "wire/shared_library.h"

namespace dl::ssh {

namespace {
std::once_flag g_once;
void* g_handle = nullptr;
std::string g_error;

void* handle() {
  std::call_once(g_once, [] {
    // RTLD_LOCAL: libssh's symbols do not become visible to anything else
    // loaded later; every call goes through the forwarders below.
    const auto lib = wire::open_shared_library({DLAUNCH_LIBSSH_SONAME}, RTLD_NOW | RTLD_LOCAL);
    g_handle = lib.handle;
    if (g_handle == nullptr)
      g_error = std::string("cannot load libssh (") + DLAUNCH_LIBSSH_SONAME + "), which reaching remote hosts needs: " +
                lib.why() + "; install libssh (Debian: apt install libssh-4)";
  });
  if (g_handle == nullptr) throw IoError(g_error);
  return g_handle;
}
}  // namespace

bool libssh_loaded() { return wire::shared_library_loaded(DLAUNCH_LIBSSH_SONAME); }

// The address of libssh's `name`; throws IoError when libssh or the function
// is missing. Cached by the caller.
void* libssh_symbol(const char* name) {
  void* f = ::dlsym(handle(), name);
  if (f == nullptr)
    throw IoError(std::string("the libssh loaded (") + DLAUNCH_LIBSSH_SONAME + ") has no " + name +
                  ": it is older than the one dlaunch was built with");
  return f;
}

}  // namespace dl::ssh

#if DLAUNCH_LAZY_LIBSSH
// One forwarder: libssh's prototype (return type, name, parameters) and the
// arguments to pass on. The address found is kept, so later calls cost one
// atomic load and an indirect call.
#define DL_LIBSSH(ret, name, params, args)                                               \
  extern "C" ret name params {                                                           \
    static std::atomic<void*> dl_slot_{nullptr};                                         \
    void* dl_fn_ = dl_slot_.load(std::memory_order_acquire);                             \
    if (dl_fn_ == nullptr) dl_slot_.store(dl_fn_ = dl::ssh::libssh_symbol(#name), std::memory_order_release); \
    return reinterpret_cast<decltype(&::name)>(dl_fn_) args;                             \
  }

// What remote/ssh calls today.
DL_LIBSSH(ssh_session, ssh_new, (void), ())
DL_LIBSSH(void, ssh_free, (ssh_session s), (s))
DL_LIBSSH(int, ssh_connect, (ssh_session s), (s))
DL_LIBSSH(void, ssh_disconnect, (ssh_session s), (s))
DL_LIBSSH(const char*, ssh_get_error, (void* e), (e))
DL_LIBSSH(socket_t, ssh_get_fd, (ssh_session s), (s))
DL_LIBSSH(int, ssh_options_set, (ssh_session s, enum ssh_options_e t, const void* v), (s, t, v))
DL_LIBSSH(int, ssh_options_get, (ssh_session s, enum ssh_options_e t, char** v), (s, t, v))
DL_LIBSSH(int, ssh_options_get_port, (ssh_session s, unsigned int* p), (s, p))
DL_LIBSSH(int, ssh_options_parse_config, (ssh_session s, const char* f), (s, f))
DL_LIBSSH(void, ssh_string_free_char, (char* p), (p))
DL_LIBSSH(int, ssh_get_server_publickey, (ssh_session s, ssh_key* k), (s, k))
DL_LIBSSH(int, ssh_get_publickey_hash, (const ssh_key k, enum ssh_publickey_hash_type t, unsigned char** h, size_t* n),
          (k, t, h, n))
DL_LIBSSH(char*, ssh_get_fingerprint_hash, (enum ssh_publickey_hash_type t, unsigned char* h, size_t n), (t, h, n))
DL_LIBSSH(void, ssh_clean_pubkey_hash, (unsigned char** h), (h))
DL_LIBSSH(void, ssh_key_free, (ssh_key k), (k))
DL_LIBSSH(enum ssh_keytypes_e, ssh_key_type, (const ssh_key k), (k))
DL_LIBSSH(const char*, ssh_key_type_to_char, (enum ssh_keytypes_e t), (t))
DL_LIBSSH(enum ssh_known_hosts_e, ssh_session_is_known_server, (ssh_session s), (s))
DL_LIBSSH(int, ssh_session_update_known_hosts, (ssh_session s), (s))
DL_LIBSSH(int, ssh_userauth_none, (ssh_session s, const char* u), (s, u))
DL_LIBSSH(int, ssh_userauth_list, (ssh_session s, const char* u), (s, u))
DL_LIBSSH(int, ssh_userauth_publickey_auto, (ssh_session s, const char* u, const char* p), (s, u, p))
DL_LIBSSH(ssh_channel, ssh_channel_new, (ssh_session s), (s))
DL_LIBSSH(void, ssh_channel_free, (ssh_channel c), (c))
DL_LIBSSH(int, ssh_channel_open_session, (ssh_channel c), (c))
DL_LIBSSH(int, ssh_channel_request_exec, (ssh_channel c, const char* cmd), (c, cmd))
DL_LIBSSH(int, ssh_channel_write, (ssh_channel c, const void* d, uint32_t n), (c, d, n))
DL_LIBSSH(int, ssh_channel_send_eof, (ssh_channel c), (c))
DL_LIBSSH(int, ssh_channel_close, (ssh_channel c), (c))
DL_LIBSSH(int, ssh_channel_is_open, (ssh_channel c), (c))
DL_LIBSSH(int, ssh_channel_is_eof, (ssh_channel c), (c))
DL_LIBSSH(int, ssh_channel_get_exit_status, (ssh_channel c), (c))
DL_LIBSSH(ssh_session, ssh_channel_get_session, (ssh_channel c), (c))
DL_LIBSSH(int, ssh_channel_read_timeout, (ssh_channel c, void* d, uint32_t n, int err, int ms), (c, d, n, err, ms))
DL_LIBSSH(int, ssh_channel_read_nonblocking, (ssh_channel c, void* d, uint32_t n, int err), (c, d, n, err))
DL_LIBSSH(int, ssh_set_channel_callbacks, (ssh_channel c, ssh_channel_callbacks cb), (c, cb))

// What an event-driven use of libssh calls besides (sessions polled
// together, non-blocking channels, agent and key authentication): listed
// ahead so that such a rewrite of remote/ssh links as it is. A forwarder
// that is never called never looks its function up.
DL_LIBSSH(ssh_event, ssh_event_new, (void), ())
DL_LIBSSH(void, ssh_event_free, (ssh_event e), (e))
DL_LIBSSH(int, ssh_event_add_session, (ssh_event e, ssh_session s), (e, s))
DL_LIBSSH(int, ssh_event_remove_session, (ssh_event e, ssh_session s), (e, s))
DL_LIBSSH(int, ssh_event_add_fd, (ssh_event e, socket_t fd, short ev, ssh_event_callback cb, void* u), (e, fd, ev, cb, u))
DL_LIBSSH(int, ssh_event_remove_fd, (ssh_event e, socket_t fd), (e, fd))
DL_LIBSSH(int, ssh_event_dopoll, (ssh_event e, int ms), (e, ms))
DL_LIBSSH(void, ssh_set_blocking, (ssh_session s, int b), (s, b))
DL_LIBSSH(int, ssh_is_blocking, (ssh_session s), (s))
DL_LIBSSH(int, ssh_blocking_flush, (ssh_session s, int ms), (s, ms))
DL_LIBSSH(int, ssh_is_connected, (ssh_session s), (s))
DL_LIBSSH(int, ssh_get_status, (ssh_session s), (s))
DL_LIBSSH(int, ssh_get_poll_flags, (ssh_session s), (s))
DL_LIBSSH(int, ssh_get_error_code, (void* e), (e))
DL_LIBSSH(const char*, ssh_get_disconnect_message, (ssh_session s), (s))
DL_LIBSSH(int, ssh_set_callbacks, (ssh_session s, ssh_callbacks cb), (s, cb))
DL_LIBSSH(int, ssh_add_channel_callbacks, (ssh_channel c, ssh_channel_callbacks cb), (c, cb))
DL_LIBSSH(int, ssh_remove_channel_callbacks, (ssh_channel c, ssh_channel_callbacks cb), (c, cb))
DL_LIBSSH(int, ssh_channel_poll, (ssh_channel c, int err), (c, err))
DL_LIBSSH(int, ssh_channel_poll_timeout, (ssh_channel c, int ms, int err), (c, ms, err))
DL_LIBSSH(int, ssh_channel_read, (ssh_channel c, void* d, uint32_t n, int err), (c, d, n, err))
DL_LIBSSH(int, ssh_channel_is_closed, (ssh_channel c), (c))
DL_LIBSSH(int, ssh_channel_request_env, (ssh_channel c, const char* n, const char* v), (c, n, v))
DL_LIBSSH(int, ssh_userauth_agent, (ssh_session s, const char* u), (s, u))
DL_LIBSSH(int, ssh_userauth_publickey, (ssh_session s, const char* u, const ssh_key k), (s, u, k))
DL_LIBSSH(int, ssh_userauth_try_publickey, (ssh_session s, const char* u, const ssh_key k), (s, u, k))
DL_LIBSSH(int, ssh_pki_import_privkey_file,
          (const char* f, const char* pass, ssh_auth_callback cb, void* data, ssh_key* k), (f, pass, cb, data, k))
DL_LIBSSH(int, ssh_pki_import_pubkey_file, (const char* f, ssh_key* k), (f, k))
DL_LIBSSH(int, ssh_session_export_known_hosts_entry, (ssh_session s, char** e), (s, e))
DL_LIBSSH(char*, ssh_get_hexa, (const unsigned char* w, size_t n), (w, n))
#endif  // DLAUNCH_LAZY_LIBSSH
