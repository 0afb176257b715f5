#!/usr/bin/env bash
# Installs every Debian 12 package weft needs to build, test and benchmark.
# Run as root (or with sudo). Safe to run again.
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# mpich is for bench/run_mpi_compare.sh and examples/mpi_bootstrap.c (built
# with mpicc.mpich, run under mpiexec.mpich); Open MPI keeps the mpirun/mpicc
# alternatives (Debian gives it priority 50 against MPICH's 40), which the
# PMIx tests use.
$SUDO apt-get install -y -qq --no-install-recommends \
  build-essential cmake ninja-build pkg-config git ca-certificates \
  libhwloc-dev libucx-dev ucx-utils libpmix-dev libibverbs-dev librdmacm-dev ibverbs-providers \
  libgtest-dev libbenchmark-dev \
  openmpi-bin libopenmpi-dev mpich libmpich-dev \
  clang-14 clang-format-14 libclang-rt-14-dev procps librsvg2-bin \
  qemu-system-x86 busybox-static iproute2 ibverbs-utils perftest python3 \
  lammps lammps-examples hpcc >/dev/null
# The last line is the soft-RoCE VM lane (tests/rxe/run-in-vm.sh): qemu boots
# Debian's kernel (fetched there with apt-get download) with rdma_rxe;
# busybox-static is its initramfs; the guest uses the host's rdma (iproute2),
# perftest and python3 through its read-only view of this root. librsvg2-bin
# (rsvg-convert, the line before) turns weft-bench's SVG plots into PNG.
# lammps, lammps-examples and hpcc: real MPI applications nobody here
# wrote, drained under libweft-mpi (mpi.lammps.openmpi.n4 with LAMMPS's own
# melt input, mpi.hpcc.openmpi.n4 with HPCC's example input).
