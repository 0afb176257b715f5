/*
 * persistent.h — the persistent collectives the MPI test programs in
 * tests/mpi use: MPI-4's (MPICH 4), or Open MPI 4.1's MPIX_ forms of the
 * same calls (its pcollreq extension). PERSISTENT_COLLECTIVES is defined
 * where either is.
 */
#ifndef WEFT_TESTS_MPI_PERSISTENT_H
#define WEFT_TESTS_MPI_PERSISTENT_H

#include <mpi.h>
#if defined(OPEN_MPI) && MPI_VERSION < 4
#include <mpi-ext.h>
#endif

#if MPI_VERSION >= 4
#define PERSISTENT_COLLECTIVES 1
#define ALLREDUCE_INIT MPI_Allreduce_init
#define BCAST_INIT MPI_Bcast_init
#elif defined(OMPI_HAVE_MPI_EXT_PCOLLREQ)
#define PERSISTENT_COLLECTIVES 1
#define ALLREDUCE_INIT MPIX_Allreduce_init
#define BCAST_INIT MPIX_Bcast_init
#endif

#endif
