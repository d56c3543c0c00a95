#pragma once
// Which machine an agent runs on, as the launcher compares them: two -H
// entries or hostfile lines whose agents report the same identity are one
// machine under two names (`-H node1,node1-ib`), whose ranks would share its
// GPUs with LOCAL_RANK counted twice from 0.
#include <string>

namespace dl::machine {

// "<machine-id>/<boot id>/net:<inode>": /etc/machine-id (absent: empty), the
// kernel's boot id (/proc/sys/kernel/random/boot_id, new at each boot) and
// the inode of this process's network namespace (/proc/self/ns/net). The
// namespace is part of it because hosts made of network namespaces (the
// test cluster, containers with their own network) share the kernel, and so
// the machine-id and the boot id, yet are hosts of their own to dlaunch,
// each with its own addresses and sshd. Returns "" when the boot id or the
// namespace cannot be read (no /proc): unknown, never equal to another.
// Reads two small files and one stat: no cost worth a flag.
std::string machine_identity();

}  // namespace dl::machine
