/* mpi/coverage.py reads the functions of this MPI from its header, run
 * through its compiler wrapper: mpicc -E -P mpi/mpi_header.c. */
#include <mpi.h>
