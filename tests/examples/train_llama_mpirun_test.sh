#!/usr/bin/env bash
# The main example as two processes started by Open MPI's mpirun (Debian's
# openmpi-bin, which ./bazelw installs), training over Gloo: the runtime reads
# OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK/LOCAL_SIZE (no dtrun, no RANK), rank 0
# hosts the store on 127.0.0.1, and the losses equal the in-process run's.
# Skips, saying so, where mpirun is absent.
set -euo pipefail
cd "${TEST_SRCDIR}/dtensor"
if ! command -v mpirun >/dev/null; then
  echo "SKIP: mpirun not found (Debian: apt-get install openmpi-bin;" \
    "./bazelw installs it)"
  exit 0
fi
losses() { grep -o 'loss [0-9.]*' | awk '{print $2}'; }
args=(--mesh dp=2,tp=1 --steps 3 --seed 2)
inprocess=$(examples/train_llama "${args[@]}" | losses)
# A free port for the store, so that parallel tests do not collide.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("", 0));
print(s.getsockname()[1])')
mpi_output=$(MASTER_PORT=$port mpirun -n 2 --allow-run-as-root --oversubscribe \
  -x MASTER_PORT examples/train_llama --backend gloo "${args[@]}" 2>&1)
echo "$mpi_output"
mpi=$(losses <<<"$mpi_output")
[[ $(wc -l <<<"$mpi") -eq 3 ]] || { echo "expected 3 loss values"; exit 1; }
[[ "$mpi" == "$inprocess" ]] ||
  { echo "mpirun losses differ: $mpi vs $inprocess"; exit 1; }
echo "PASS"
