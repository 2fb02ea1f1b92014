# Sourced by the scripts that need a registry: creates $work (a temp dir), starts Debian's
# docker-registry on 127.0.0.1 with an ephemeral port ($port; $registry_port instead when
# set) and storage under $work, and stops it (by PID, $registry_pid) and removes $work on
# exit. Plain config, not the packaged one (which turns on auth).
work=$(mktemp -d)
registry_pid=
cleanup_registry() {
  if [ -n "$registry_pid" ]; then kill "$registry_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup_registry EXIT
port=${registry_port:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')}
printf 'version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: /nonexistent\nhttp:\n  addr: 127.0.0.1:5000\n' > "$work/config.yml"
REGISTRY_HTTP_ADDR=127.0.0.1:$port REGISTRY_STORAGE_FILESYSTEM_ROOTDIRECTORY=$work/data \
  docker-registry serve "$work/config.yml" >/dev/null 2>&1 &
registry_pid=$!
for _ in $(seq 200); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || { echo "docker-registry did not start on 127.0.0.1:$port" >&2; exit 1; }
