#!/usr/bin/env bash
# Task Bench's METG(50 %) for causeway's executor and device queues beside rayon, tokio and std
# threads, in one run (bench/taskbench, crate causeway-taskbench): builds it in release, runs the
# sweep and leaves in target/taskbench the table (metg.md: METG per pattern, width and system,
# median and range over the alternating blocks, and the queues variant's waits issued and how
# they were resolved), every measured point (points.csv) and one plot per pattern and width
# (<pattern>-w<width>.svg: efficiency against task granularity, one line per system).
#
# With --docs it also copies the stencil_1d plots into the guide (docs/src/taskbench/), which
# docs/src/taskbench.md shows beside the table (copied into the chapter by hand, with its reading). Every other argument goes to the
# harness (`--help` lists them: patterns, widths, systems, blocks, repeats, iterations, workers).
# The default run takes some minutes on a two-core machine.
#
# Outside peers (Task Bench's OpenMP and MPI implementations, and a Taskflow implementation) run
# in the same blocks when named with --peer NAME=PATH; scripts/taskbench_peers.sh builds them
# outside the repository and prints those options. Each MPI run starts mpirun (a fraction of a
# second), so a sweep with the peers takes a few times longer.
#
# Usage: scripts/taskbench.sh [--docs] [harness options]
set -euo pipefail
cd "$(dirname "$0")/.."

die() { printf 'taskbench: error: %s\n' "$*" >&2; exit 1; }

docs=false
out=target/taskbench
arguments=()
previous=
for argument in "$@"; do
  if [[ $argument == --docs ]]; then
    docs=true
  else
    # The plots --docs copies are where the harness writes them: its --out, when given.
    [[ $previous == --out ]] && out=$argument
    arguments+=("$argument")
  fi
  previous=$argument
done

cargo build --release --quiet -p causeway-taskbench || die "the harness does not build"
target=$(cargo metadata --format-version 1 --no-deps |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
"$target/release/causeway-taskbench" --out "$out" "${arguments[@]}" ||
  die "the sweep failed (a refused parameter, or a run whose checksum was wrong: see above)"

if $docs; then
  mkdir -p docs/src/taskbench
  cp "$out"/stencil_1d-w*.svg docs/src/taskbench/
  printf 'taskbench: stencil_1d plots copied to docs/src/taskbench/\n'
fi
