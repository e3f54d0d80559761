#!/usr/bin/env bash
# Two "hosts" on this machine (issue 17): network namespaces joined by a veth pair, one Open MPI job
# with a process in each, launched by mpirun's rsh mechanism through an agent that runs the remote
# daemon with `ip netns exec` instead of ssh; MPI between the processes crosses the veth over TCP
# (--mca btl tcp,self: shared memory is for processes of one host). Each layout trained by the two
# hosts writes the metrics.jsonl of the same layout in one process, bit for bit.
# Needs root (ip netns, veth) and Open MPI; not in the suite for that reason. Usage: sudo tests/netns_mpi.sh
# Cleans up its namespaces, veth and agent on exit. GPU ranks across these hosts cannot use the NCCL
# fake: its sockets are in the abstract namespace, which is per network namespace (as real NCCL
# would need the hosts' network).
set -u
cd "$(dirname "$0")/.."
root=$PWD
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (ip netns add, veth); run with sudo"; exit 77; }
command -v mpirun >/dev/null && command -v ip >/dev/null || { echo "SKIP: needs mpirun and ip (iproute2)"; exit 77; }
[ -x ./mgt ] && [ -s build/libmgt_mpi.so ] && [ -s build/testdata/tiny_train.bin ] ||
  { echo "FAIL: needs ./mgt, build/libmgt_mpi.so and build/testdata (ninja mgt mpi; tests/run.sh makes the data)"; exit 1; }
a=mgtA$$ b=mgtB$$ net=10.78.$(($$ % 200)) tmp=$(mktemp -d)
cleanup() { ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
ip netns add "$a" && ip netns add "$b" && ip link add "v$a" type veth peer name "v$b" &&
  ip link set "v$a" netns "$a" && ip link set "v$b" netns "$b" &&
  ip -n "$a" addr add "$net.1/24" dev "v$a" && ip -n "$b" addr add "$net.2/24" dev "v$b" &&
  ip -n "$a" link set "v$a" up && ip -n "$b" link set "v$b" up && ip -n "$a" link set lo up && ip -n "$b" link set lo up ||
  { echo "FAIL: could not make the namespaces and their veth"; exit 1; }
cat > "$tmp/agent" <<EOF
#!/bin/sh
# mpirun's rsh agent: "agent HOST COMMAND" runs COMMAND (orted, as a shell line) in HOST's namespace
case \$1 in $net.1) ns=$a ;; $net.2) ns=$b ;; *) echo "agent: unknown host \$1" >&2; exit 1 ;; esac
shift
exec ip netns exec "\$ns" /bin/sh -c "\$*"
EOF
chmod +x "$tmp/agent"
cp tests/presets/tiny.ini "$tmp/" && cp build/testdata/tiny_train.bin "$tmp/tk_train.bin" && cp build/testdata/tiny_val.bin "$tmp/tk_val.bin"
cd "$tmp" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 MGT_MPI_LIBRARY=$root/build/libmgt_mpi.so
launch() { timeout 120 ip netns exec "$a" mpirun --host "$net.1,$net.2" -np 2 --mca plm_rsh_agent "$tmp/agent" --mca btl tcp,self \
  --mca oob_tcp_if_include "$net.0/24" --mca btl_tcp_if_include "$net.0/24" -x MGT_MPI_LIBRARY "$@"; }
# where the processes run: one in each namespace, or the test means nothing
where=$(launch sh -c 'echo "$OMPI_COMM_WORLD_RANK $(ip netns identify $$)"' 2>&1 | sort | tr '\n' ' ')
[ "$where" = "0 $a 1 $b " ] || { echo "FAIL: mpirun did not start a process in each namespace: $where"; exit 1; }
echo "ok  mpirun --host $net.1,$net.2 through the agent: process 0 in namespace $a, process 1 in $b"
summary() { sed -e 's/"\(elapsed_s\|tokens_per_s\|step_s\|mfu\|compute_s\|comm_s\|bubble_s\|s\)":[-0-9.e+]*//g' "$1"; }
fails=0
for layout in "parallel.dp=2" "parallel.pp=2" "parallel.dp=2 parallel.zero=3"; do
  sets=(--no-tui --set train.steps=6 --set train.eval_every=3 --set checkpoint.every=0)
  for s in $layout; do sets+=(--set "$s"); done
  name=$(echo "$layout" | tr -c 'a-z0-9' _)
  "$root/mgt" train tiny.ini "${sets[@]}" --set checkpoint.dir="c1$name" --set log.metrics="one$name.jsonl" > "log1$name" 2>&1
  launch "$root/mgt" train tiny.ini "${sets[@]}" --set checkpoint.dir="c2$name" --set log.metrics="two$name.jsonl" > "log2$name" 2>&1
  rc=$?
  if [ $rc -eq 0 ] && diff <(summary "one$name.jsonl") <(summary "two$name.jsonl") > /dev/null; then
    echo "ok  $layout: one process in namespace $a ($net.1), one in $b ($net.2), over TCP: metrics identical to one process ($(grep -o 'final loss [0-9.]*' "log2$name"))"
  else
    echo "FAIL $layout: exit $rc"; tail -8 "log2$name"; fails=$((fails + 1))
  fi
done
[ $fails -eq 0 ] && echo "netns_mpi: all passed"
[ $fails -eq 0 ]
