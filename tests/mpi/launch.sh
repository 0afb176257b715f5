# launch.sh — sourced by tests/mpi/*_test.sh: mpi_launch runs an MPI job
# under Open MPI's mpirun or MPICH's mpiexec, bounded by timeout, with
# libweft-mpi preloaded or not.
#   mpi_launch KIND LAUNCHER RANKS PRELOAD|- OUT PROGRAM [ARGS...]
# stdout goes to OUT, stderr to OUT.err; extra environment for the ranks in
# the array MPI_ENV (NAME=VALUE ...). A sanitizer build's layer needs its
# runtime loaded first (ASan refuses to start after another library), so
# the runtime the layer links is preloaded ahead of it.
mpi_launch() {
    local kind=$1 launcher=$2 ranks=$3 lib=$4 out=$5
    shift 5
    local vars=("${MPI_ENV[@]}")
    if [ "$lib" != - ]; then
        local asan
        asan=$(ldd "$lib" 2>/dev/null | awk '/libasan/ {print $3}')
        vars+=("LD_PRELOAD=${asan:+$asan }$lib")
    fi
    # MPI's libraries have no frame pointers: LeakSanitizer's fast unwinder
    # stops in them, and tests/lsan.supp's library names never match their
    # own leaks. The slow unwinder sees whose they are.
    if ldd "$1" 2>/dev/null | grep -q libasan; then
        local opts="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
        export ASAN_OPTIONS=$opts
    fi
    local env=() v
    for v in "${vars[@]}"; do
        if [ "$kind" = openmpi ]; then env+=(-x "$v"); else env+=(-genv "${v%%=*}" "${v#*=}"); fi
    done
    if [ "$kind" = openmpi ]; then
        timeout 150 "$launcher" --oversubscribe -n "$ranks" "${env[@]}" "$@" >"$out" 2>"$out.err"
    else
        timeout 150 "$launcher" -n "$ranks" "${env[@]}" "$@" >"$out" 2>"$out.err"
    fi
}
