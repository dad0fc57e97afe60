/*
 * MPI_Init/MPI_Finalize and the environment calls (versions, processor
 * name, clocks, MPI_Abort).
 */
#include "mpi_int.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int init_all(void)
{
    int rc = zm_types_init();
    if (!rc)
        rc = zm_ops_init();
    if (!rc)
        rc = zm_transport_init();
    if (!rc)
        rc = zm_comms_init();
    if (rc)
        return rc;
    zm.initialized = true;
    zm.t0 = zm_now_ns();
    /* MPI_COMM_WORLD's one-to-many channel: every rank is here now. */
    struct zm_comm *world = zm_comm_get(MPI_COMM_WORLD);
    rc = zm_bcast_setup(world);
    if (!rc && (rc = zm_barrier(world)) == 0) {
        zm_spread_over_cpus();        /* every rank leaves together, spread over the CPUs */
        zm_shm_barrier_forget(world);
    }
    return rc;
}

static int init_common(int required, const char *fn)
{
    if (zm.initialized || zm.finalized) {
        fprintf(stderr, "zimp-mpi: %s called twice (or after MPI_Finalize)\n", fn);
        return MPI_ERR_OTHER;
    }
    /* A level that is none of the four gets MPI_THREAD_SINGLE, as in MPICH
     * (Open MPI raises an error); at most SERIALIZED is provided. */
    if (required < MPI_THREAD_SINGLE || required > MPI_THREAD_MULTIPLE)
        required = MPI_THREAD_SINGLE;
    zm.thread_level = required > MPI_THREAD_SERIALIZED ? MPI_THREAD_SERIALIZED : required;
    int rc = init_all();
    if (rc) {
        /* Nothing works without the transport: report and stop, as MPI_ERRORS_ARE_FATAL would. */
        zm_abort_job(rc, rc == MPIX_ERR_PROC_FAILED
                             ? "MPI_Init: a rank of the job died while the job's channels were set up"
                             : "MPI_Init: cannot set up the job's channels (was it started by zimprun?)");
    }
    if (zm_tracing(ZIMP_TRACE_INFO))
        zm_trace_life(ZIMP_TRACE_MPI_INIT);
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Init(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    return init_common(MPI_THREAD_SINGLE, "MPI_Init");
}

ZIMP_MPI_API int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    (void)argc, (void)argv;
    int rc = init_common(required, "MPI_Init_thread");
    if (provided)
        *provided = zm.thread_level;
    return rc;
}

ZIMP_MPI_API int MPI_Query_thread(int *provided)
{
    if (!provided)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_ARG, "MPI_Query_thread");
    *provided = zm.thread_level;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Is_thread_main(int *flag)
{
    if (!flag)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_ARG, "MPI_Is_thread_main");
    *flag = 1;   /* at most SERIALIZED: whichever thread calls is the one that may */
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Initialized(int *flag)
{
    if (!flag)
        return MPI_ERR_ARG;
    *flag = zm.initialized;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Finalized(int *flag)
{
    if (!flag)
        return MPI_ERR_ARG;
    *flag = zm.finalized;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Finalize(void)
{
    ZM_CHECK_INIT("MPI_Finalize");
    if (zm_tracing(ZIMP_TRACE_INFO))
        zm_trace_life(ZIMP_TRACE_MPI_FINALIZE);
    /*
     * A barrier first: no rank leaves while another may still read its
     * buffers (rendezvous) or wait for its messages. A dead rank makes it
     * fail, which does not stop the local teardown.
     */
    int arc = zm_comm_self_attrs_delete();
    zm_tx_flush();                        /* buffered messages still on their way out */
    int rc = zm_barrier(zm_comm_get(MPI_COMM_WORLD));
    if (!rc)
        rc = arc;
    zm_comms_fini();
    zm_transport_fini();
    zm.finalized = true;
    return rc ? zm_raise(MPI_COMM_WORLD, rc, "MPI_Finalize") : MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Abort(MPI_Comm comm, int errorcode)
{
    (void)comm;                           /* the whole job goes, whatever the communicator */
    char why[64];
    snprintf(why, sizeof why, "MPI_Abort(%d)", errorcode);
    zm_abort_job(errorcode, why);
}

ZIMP_MPI_API int MPI_Get_processor_name(char *name, int *resultlen)
{
    if (!name || !resultlen)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_ARG, "MPI_Get_processor_name");
    if (gethostname(name, MPI_MAX_PROCESSOR_NAME) != 0)
        snprintf(name, MPI_MAX_PROCESSOR_NAME, "localhost");
    name[MPI_MAX_PROCESSOR_NAME - 1] = 0;
    *resultlen = (int)strlen(name);
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Get_version(int *version, int *subversion)
{
    if (!version || !subversion)
        return MPI_ERR_ARG;
    *version = MPI_VERSION;
    *subversion = MPI_SUBVERSION;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Get_library_version(char *version, int *resultlen)
{
    if (!version || !resultlen)
        return MPI_ERR_ARG;
    int n = snprintf(version, MPI_MAX_LIBRARY_VERSION_STRING, "zimp MPI %d.%d.%d (MPI %d.%d subset over zimp channels)",
                     ZIMP_VERSION_MAJOR, ZIMP_VERSION_MINOR, ZIMP_VERSION_PATCH, MPI_VERSION, MPI_SUBVERSION);
    *resultlen = n < MPI_MAX_LIBRARY_VERSION_STRING ? n : MPI_MAX_LIBRARY_VERSION_STRING - 1;
    return MPI_SUCCESS;
}

/* Wall-clock seconds since an arbitrary point (CLOCK_MONOTONIC: one clock for all ranks). */
ZIMP_MPI_API double MPI_Wtime(void)
{
    return (double)zm_now_ns() * 1e-9;
}

ZIMP_MPI_API double MPI_Wtick(void)
{
    struct timespec res;
    if (clock_getres(CLOCK_MONOTONIC, &res) != 0)
        return 1e-9;
    return (double)res.tv_sec + (double)res.tv_nsec * 1e-9;
}
