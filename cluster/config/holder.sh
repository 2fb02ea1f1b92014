#!/bin/bash
# The holder of a local cluster's namespaces (cluster/src/isolation.rs). Started as
#   unshare --mount --net --propagation private -- bash holder.sh CGROUP_ROOT NODE_ADDRESS DIR UNREACHABLE...
# it makes the new mount and network namespace fit for a control plane and a real node,
# prints `ready`, and then holds them until its standard input closes: the program that
# started it holds the other end, so that happens when the cluster stops and when that
# program dies, however it dies. It then kills every process of the cluster (all of them
# live in the cgroup subtree CGROUP_ROOT) and removes the subtree, and the cluster's
# directory DIR unless DIR is `-` (kept). The mounts and network devices go with the
# namespaces, once their last process is gone.
#
#   bash holder.sh --sweep CGROUP_ROOT   # the same teardown, for a holder that was killed
set -u

# Every cgroup hierarchy's copy of a path.
hierarchies() { for h in /sys/fs/cgroup/*/; do [ -e "$h/cgroup.procs" ] && echo "${h%/}"; done; }

pids_in() { find "$1" -name cgroup.procs -exec cat {} + 2>/dev/null; }

teardown() {
  local root=$1 h pids freezer=/sys/fs/cgroup/freezer/$1 round
  for round in $(seq 100); do
    # Frozen, nothing forks between the listing and the kill (and no listed PID is reused:
    # a PID in cgroup.procs belongs to a process that has not been reaped).
    [ -d "$freezer" ] && echo FROZEN >"$freezer/freezer.state" 2>/dev/null
    pids=
    for h in $(hierarchies); do [ -d "$h/$root" ] && pids="$pids $(pids_in "$h/$root")"; done
    # shellcheck disable=SC2086
    [ -n "${pids// /}" ] && kill -9 $pids 2>/dev/null
    [ -d "$freezer" ] && echo THAWED >"$freezer/freezer.state" 2>/dev/null
    [ -z "${pids// /}" ] && break
    sleep 0.05
  done
  for h in $(hierarchies); do
    [ -d "$h/$root" ] && find "$h/$root" -depth -type d -exec rmdir {} + 2>/dev/null
  done
  return 0
}

if [ "${1:-}" = --sweep ]; then
  teardown "$2"
  exit 0
fi

root=$1 address=$2 dir=$3
shift 3

# The cluster's cgroup subtree in every hierarchy (cpuset needs its CPUs and memory nodes
# before a process may join).
for h in $(hierarchies); do
  mkdir -p "$h/$root/system"
  if [ -e "$h/cpuset.cpus" ]; then
    for f in cpuset.cpus cpuset.mems; do
      cat "$h/$f" >"$h/$root/$f"
      cat "$h/$f" >"$h/$root/system/$f"
    done
  fi
done

fail() { echo "holder: $*" >&2; teardown "$root"; exit 1; }

# Mounts, private to the namespace: tmpfs over the host's /run (containerd's sockets, runc's
# state, pods' network namespaces), /var/lib and /var/log (the fixed paths the kubelet and
# CNI write whatever their settings say: device-plugins, CNI's cache, container log links),
# so nothing of the cluster lands in the host's copies and nothing of the host's shows.
for d in /run /var/lib /var/log; do
  mount -t tmpfs -o mode=0755 tmpfs "$d" || fail "mount a tmpfs on $d"
done
mkdir -p /var/lib/cni /var/lib/kubelet/device-plugins /var/log/containers /var/log/pods
# The kubelet sets these host-wide settings when they differ: it finds them set, and a
# write would land in the file, not the kernel.
mkdir -p /run/sysctl
for s in vm/overcommit_memory=1 vm/panic_on_oom=0 kernel/panic=10 kernel/panic_on_oops=1 \
  kernel/keys/root_maxkeys=1000000 kernel/keys/root_maxbytes=25000000; do
  f=${s%%=*} v=${s#*=}
  echo "$v" >"/run/sysctl/${f//\//.}"
  mount --bind "/run/sysctl/${f//\//.}" "/proc/sys/$f" || fail "bind over /proc/sys/$f"
done

# The network: loopback, and the node's address on one end of a veth pair whose other end
# is in the namespace too (a kubelet refuses a loopback address, and there is no dummy
# driver). The default route leads nowhere; kwok's fake pod and node addresses are
# unreachable at once rather than after a timeout.
ip link set lo up || fail "bring up lo"
ip link add node0 type veth peer name node0-peer || fail "create the node's veth pair"
ip addr add "$address/24" dev node0 || fail "address node0"
ip link set node0 up && ip link set node0-peer up || fail "bring up node0"
ip route add default via "${address%.*}.1" dev node0 onlink || fail "route"
for range in "$@"; do ip route add unreachable "$range" || fail "route $range"; done

echo ready
# Hold the namespaces until the owner is gone (EOF), then tear down.
while read -r _; do :; done
teardown "$root"
# The owner removes it after a normal stop; after its death, nobody else would. The
# kubelet's volume mounts under it are this namespace's: detach them first.
if [ "$dir" != - ]; then
  awk -v d="$dir/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r | while read -r m; do umount -l "$m"; done
  rm -rf "$dir"
fi
