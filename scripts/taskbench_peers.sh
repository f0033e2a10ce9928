#!/usr/bin/env bash
# Builds the outside peers of the Task Bench harness (bench/taskbench) outside the repository,
# from the sources it is given, and records how: Task Bench's core library, its OpenMP
# implementation (openmp/main) and its MPI implementation (mpi/nonblock: non-blocking
# point-to-point messages, the variant the paper's MPI figures are drawn from), and
# bench/taskbench/peers/taskflow.cc (this repository's Taskflow implementation, against
# Task Bench's core and Taskflow's headers). Nothing of either project enters the repository.
#
# Sources, each a directory holding the tree (a checkout or an export) or a git directory
# (exported at its HEAD, or at the commit given after an @):
#   CAUSEWAY_TASKBENCH_SRC   Task Bench (github.com/StanfordLegion/task-bench)
#   CAUSEWAY_TASKFLOW_SRC    Taskflow (github.com/taskflow/taskflow), header-only
# Build directory: CAUSEWAY_TASKBENCH_PEERS (default ${XDG_CACHE_HOME:-$HOME/.cache}/causeway-taskbench-peers).
# Compilers: CXX (default g++), CC (default gcc), MPICXX (default mpicxx).
#
# It leaves bin/openmp, bin/mpi and bin/taskflow in the build directory, and manifest.txt:
# the sources' commits, the compilers' versions and every compile and link line. It prints
# the harness options that run them (scripts/taskbench.sh --peer NAME=PATH ...).
#
# Task Bench's core checks every task's inputs with assert(); it is built with its own
# Makefile's flags, which do not define NDEBUG, and so is everything here.
#
# Usage: CAUSEWAY_TASKBENCH_SRC=... CAUSEWAY_TASKFLOW_SRC=... scripts/taskbench_peers.sh
set -euo pipefail
repository=$(cd "$(dirname "$0")/.." && pwd)

die() { printf 'taskbench_peers: error: %s\n' "$*" >&2; exit 1; }
say() { printf 'taskbench_peers: %s\n' "$*" >&2; }

build=${CAUSEWAY_TASKBENCH_PEERS:-${XDG_CACHE_HOME:-$HOME/.cache}/causeway-taskbench-peers}
CXX=${CXX:-g++}
CC=${CC:-gcc}
MPICXX=${MPICXX:-mpicxx}
[[ -n ${CAUSEWAY_TASKBENCH_SRC:-} ]] || die "set CAUSEWAY_TASKBENCH_SRC to Task Bench's sources (a tree or a git directory)"
[[ -n ${CAUSEWAY_TASKFLOW_SRC:-} ]] || die "set CAUSEWAY_TASKFLOW_SRC to Taskflow's sources (a tree or a git directory)"
case $build/ in
  "$repository"/*) die "the build directory $build is inside the repository: the peers are built outside it" ;;
esac
for tool in "$CXX" "$CC" "$MPICXX" make git; do
  command -v "$tool" >/dev/null || die "$tool not found"
done

# Copies source $1 into directory $2 and prints where it came from (a commit, where known).
import_source() {
  local source=${1%@*} revision=HEAD into=$2
  [[ $1 == *@* ]] && revision=${1##*@}
  rm -rf "$into"
  mkdir -p "$into"
  if git --git-dir="$source" rev-parse --verify --quiet "$revision^{commit}" >/dev/null 2>&1 &&
    [[ $(git --git-dir="$source" rev-parse --is-bare-repository 2>/dev/null) == true || -f $source/HEAD ]]; then
    git --git-dir="$source" archive "$revision" | tar -x -C "$into"
    printf 'git %s commit %s (%s)' "$source" "$(git --git-dir="$source" rev-parse "$revision^{commit}")" \
      "$(git --git-dir="$source" describe --tags --always "$revision" 2>/dev/null || echo no tag)"
  elif [[ -d $source ]]; then
    cp -a "$source"/. "$into"/
    rm -rf "$into/.git"
    if commit=$(git -C "$source" rev-parse HEAD 2>/dev/null); then
      local dirty=""
      [[ -z $(git -C "$source" status --porcelain 2>/dev/null) ]] || dirty=", with uncommitted changes"
      printf 'tree %s at commit %s (%s%s)' "$source" "$commit" \
        "$(git -C "$source" describe --tags --always 2>/dev/null || echo no tag)" "$dirty"
    else
      printf 'tree %s (not a git checkout: commit unknown)' "$source"
    fi
  else
    die "$source is neither a directory nor a git directory"
  fi
}

mkdir -p "$build"
build=$(cd "$build" && pwd)
say "building in $build"
taskbench_origin=$(import_source "$CAUSEWAY_TASKBENCH_SRC" "$build/task-bench")
taskflow_origin=$(import_source "$CAUSEWAY_TASKFLOW_SRC" "$build/taskflow")
[[ -f $build/task-bench/core/core.h && -f $build/task-bench/openmp/main.cc && -f $build/task-bench/mpi/nonblock.cc ]] ||
  die "$CAUSEWAY_TASKBENCH_SRC does not hold Task Bench (core/core.h, openmp/main.cc, mpi/nonblock.cc)"
[[ -f $build/taskflow/taskflow/taskflow.hpp ]] ||
  die "$CAUSEWAY_TASKFLOW_SRC does not hold Taskflow (taskflow/taskflow.hpp)"

log=$build/build.log
: >"$log"
# Task Bench's own Makefiles, their own flags; the log keeps every command they ran.
make -C "$build/task-bench/core" CC="$CC" CXX="$CXX" >>"$log" 2>&1 || die "Task Bench's core does not build (see $log)"
make -C "$build/task-bench/openmp" CXX="$CXX" main >>"$log" 2>&1 || die "Task Bench's OpenMP implementation does not build (see $log)"
make -C "$build/task-bench/mpi" MPICXX="$MPICXX" nonblock >>"$log" 2>&1 || die "Task Bench's MPI implementation does not build (see $log)"
# The Taskflow implementation: C++20 (Taskflow 4 needs it), optimised like Task Bench's OpenMP
# implementation (-O3 -march=native), against the same core library.
taskflow_flags=(-std=c++20 -O3 -march=native -pthread -Wall)
taskflow_command=("$CXX" "${taskflow_flags[@]}" -I"$build/taskflow" -I"$build/task-bench/core"
  "$repository/bench/taskbench/peers/taskflow.cc" -L"$build/task-bench/core" -lcore_s -o "$build/taskflow-main")
printf '%s\n' "${taskflow_command[*]}" >>"$log"
"${taskflow_command[@]}" >>"$log" 2>&1 || die "the Taskflow implementation does not build (see $log)"

mkdir -p "$build/bin"
ln -sf "$build/task-bench/openmp/main" "$build/bin/openmp"
ln -sf "$build/task-bench/mpi/nonblock" "$build/bin/mpi"
ln -sf "$build/taskflow-main" "$build/bin/taskflow"

repository_commit=$(git -C "$repository" rev-parse HEAD 2>/dev/null || echo unknown)
{
  printf '# Outside peers of causeway-taskbench, built %s on %s\n\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$(uname -srm)"
  printf 'Task Bench: %s\n' "$taskbench_origin"
  printf 'Taskflow:   %s (TF_VERSION %s)\n' "$taskflow_origin" \
    "$(sed -n 's/^#define TF_VERSION \([0-9]*\).*/\1/p' "$build/taskflow/taskflow/taskflow.hpp")"
  printf 'taskflow.cc: causeway commit %s\n\n' "$repository_commit"
  printf 'CXX    %s: %s\n' "$CXX" "$("$CXX" --version | head -n 1)"
  printf 'CC     %s: %s\n' "$CC" "$("$CC" --version | head -n 1)"
  printf 'MPICXX %s: %s\n' "$MPICXX" "$("$MPICXX" --showme 2>/dev/null || "$MPICXX" -show 2>/dev/null || echo '?')"
  printf 'MPI:   %s\n\n' "$(mpirun --version 2>/dev/null | head -n 1 || echo 'mpirun not found')"
  printf 'binaries:\n  openmp   %s\n  mpi      %s\n  taskflow %s\n\n' \
    "$build/task-bench/openmp/main" "$build/task-bench/mpi/nonblock" "$build/taskflow-main"
  printf 'compile and link lines:\n'
  grep -E "^($CXX|$CC|$MPICXX|ar|g\+\+|gcc|cc|mpicxx) " "$log" | sed 's/^/  /'
} >"$build/manifest.txt"
cat "$build/manifest.txt" >&2

printf '%s\n' "--peer openmp=$build/bin/openmp --peer mpi=$build/bin/mpi --peer taskflow=$build/bin/taskflow"
