/*
 * zimp MPI: the MPI 3.1 subset listed in docs/mpi.md, over zimp channels.
 *
 * Build programs with `zimpcc` (it puts this folder on the include path, so
 * `#include <mpi.h>` finds this file) and run them with `zimprun -n N prog`.
 * Only the functions declared here exist: a program that calls any other
 * MPI function fails at link time rather than meeting a stub.
 *
 * Handles are plain ints (like MPICH), so MPI_COMM_WORLD and friends are
 * integer constant expressions usable in file-scope static initializers.
 * Thread support: up to MPI_THREAD_SERIALIZED.
 */
#ifndef ZIMP_MPI_H
#define ZIMP_MPI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define ZIMP_MPI_API __attribute__((visibility("default")))
#else
#define ZIMP_MPI_API
#endif

#define MPI_VERSION 3
#define MPI_SUBVERSION 1
#define ZIMP_MPI 1 /* this is zimp's MPI (test with #ifdef ZIMP_MPI) */

/* ---- basic types ---- */
typedef intptr_t MPI_Aint;
typedef long long MPI_Offset;
typedef long long MPI_Count;
typedef int MPI_Fint;

typedef int MPI_Comm;
typedef int MPI_Group;
typedef int MPI_Datatype;
typedef int MPI_Op;
typedef int MPI_Request;
typedef int MPI_Errhandler;
typedef int MPI_Info;
typedef int MPI_Message;

typedef struct MPI_Status {
    int MPI_SOURCE;
    int MPI_TAG;
    int MPI_ERROR;
    int zimp_cancelled;       /* private: MPI_Test_cancelled */
    long long zimp_bytes;     /* private: bytes received (MPI_Get_count) */
} MPI_Status;

/* ---- handle values (kind in the high byte, index below) ---- */
#define MPI_COMM_NULL ((MPI_Comm)0x44000000)
#define MPI_COMM_WORLD ((MPI_Comm)0x44000001)
#define MPI_COMM_SELF ((MPI_Comm)0x44000002)

#define MPI_GROUP_NULL ((MPI_Group)0x48000000)
#define MPI_GROUP_EMPTY ((MPI_Group)0x48000001)

#define MPI_REQUEST_NULL ((MPI_Request)0x2c000000)
#define MPI_MESSAGE_NULL ((MPI_Message)0x2d000000)
#define MPI_MESSAGE_NO_PROC ((MPI_Message)0x2d000001)
#define MPI_INFO_NULL ((MPI_Info)0x1c000000)
#define MPI_INFO_ENV ((MPI_Info)0x1c000001)

#define MPI_ERRHANDLER_NULL ((MPI_Errhandler)0x14000000)
#define MPI_ERRORS_ARE_FATAL ((MPI_Errhandler)0x14000001)
#define MPI_ERRORS_RETURN ((MPI_Errhandler)0x14000002)

#define MPI_OP_NULL ((MPI_Op)0x18000000)
#define MPI_MAX ((MPI_Op)0x18000001)
#define MPI_MIN ((MPI_Op)0x18000002)
#define MPI_SUM ((MPI_Op)0x18000003)
#define MPI_PROD ((MPI_Op)0x18000004)
#define MPI_LAND ((MPI_Op)0x18000005)
#define MPI_BAND ((MPI_Op)0x18000006)
#define MPI_LOR ((MPI_Op)0x18000007)
#define MPI_BOR ((MPI_Op)0x18000008)
#define MPI_LXOR ((MPI_Op)0x18000009)
#define MPI_BXOR ((MPI_Op)0x1800000a)
#define MPI_MINLOC ((MPI_Op)0x1800000b)
#define MPI_MAXLOC ((MPI_Op)0x1800000c)
#define MPI_REPLACE ((MPI_Op)0x1800000d)

/* Type constructors, as MPI_Type_get_envelope reports them. */
#define MPI_COMBINER_NAMED 1
#define MPI_COMBINER_DUP 2
#define MPI_COMBINER_CONTIGUOUS 3
#define MPI_COMBINER_VECTOR 4
#define MPI_COMBINER_HVECTOR_INTEGER 5
#define MPI_COMBINER_HVECTOR 6
#define MPI_COMBINER_INDEXED 7
#define MPI_COMBINER_HINDEXED_INTEGER 8
#define MPI_COMBINER_HINDEXED 9
#define MPI_COMBINER_INDEXED_BLOCK 10
#define MPI_COMBINER_STRUCT_INTEGER 11
#define MPI_COMBINER_STRUCT 12
#define MPI_COMBINER_SUBARRAY 13
#define MPI_COMBINER_DARRAY 14
#define MPI_COMBINER_F90_REAL 15
#define MPI_COMBINER_F90_COMPLEX 16
#define MPI_COMBINER_F90_INTEGER 17
#define MPI_COMBINER_RESIZED 18
#define MPI_COMBINER_HINDEXED_BLOCK 19

/* Predefined datatypes; the index order is the table in src/mpi/datatype.c. */
#define MPI_DATATYPE_NULL ((MPI_Datatype)0x4c000000)
#define MPI_CHAR ((MPI_Datatype)0x4c000001)
#define MPI_SIGNED_CHAR ((MPI_Datatype)0x4c000002)
#define MPI_UNSIGNED_CHAR ((MPI_Datatype)0x4c000003)
#define MPI_BYTE ((MPI_Datatype)0x4c000004)
#define MPI_WCHAR ((MPI_Datatype)0x4c000005)
#define MPI_SHORT ((MPI_Datatype)0x4c000006)
#define MPI_UNSIGNED_SHORT ((MPI_Datatype)0x4c000007)
#define MPI_INT ((MPI_Datatype)0x4c000008)
#define MPI_UNSIGNED ((MPI_Datatype)0x4c000009)
#define MPI_LONG ((MPI_Datatype)0x4c00000a)
#define MPI_UNSIGNED_LONG ((MPI_Datatype)0x4c00000b)
#define MPI_LONG_LONG_INT ((MPI_Datatype)0x4c00000c)
#define MPI_LONG_LONG MPI_LONG_LONG_INT
#define MPI_UNSIGNED_LONG_LONG ((MPI_Datatype)0x4c00000d)
#define MPI_FLOAT ((MPI_Datatype)0x4c00000e)
#define MPI_DOUBLE ((MPI_Datatype)0x4c00000f)
#define MPI_LONG_DOUBLE ((MPI_Datatype)0x4c000010)
#define MPI_C_BOOL ((MPI_Datatype)0x4c000011)
#define MPI_INT8_T ((MPI_Datatype)0x4c000012)
#define MPI_INT16_T ((MPI_Datatype)0x4c000013)
#define MPI_INT32_T ((MPI_Datatype)0x4c000014)
#define MPI_INT64_T ((MPI_Datatype)0x4c000015)
#define MPI_UINT8_T ((MPI_Datatype)0x4c000016)
#define MPI_UINT16_T ((MPI_Datatype)0x4c000017)
#define MPI_UINT32_T ((MPI_Datatype)0x4c000018)
#define MPI_UINT64_T ((MPI_Datatype)0x4c000019)
#define MPI_AINT ((MPI_Datatype)0x4c00001a)
#define MPI_OFFSET ((MPI_Datatype)0x4c00001b)
#define MPI_COUNT ((MPI_Datatype)0x4c00001c)
#define MPI_C_FLOAT_COMPLEX ((MPI_Datatype)0x4c00001d)
#define MPI_C_DOUBLE_COMPLEX ((MPI_Datatype)0x4c00001e)
#define MPI_C_LONG_DOUBLE_COMPLEX ((MPI_Datatype)0x4c00001f)
#define MPI_PACKED ((MPI_Datatype)0x4c000020)
#define MPI_FLOAT_INT ((MPI_Datatype)0x4c000021)
#define MPI_DOUBLE_INT ((MPI_Datatype)0x4c000022)
#define MPI_LONG_INT ((MPI_Datatype)0x4c000023)
#define MPI_2INT ((MPI_Datatype)0x4c000024)
#define MPI_SHORT_INT ((MPI_Datatype)0x4c000025)
#define MPI_LONG_DOUBLE_INT ((MPI_Datatype)0x4c000026)
/* Fortran types, for C programs that name them (no Fortran binding). */
#define MPI_CHARACTER ((MPI_Datatype)0x4c000027)
#define MPI_INTEGER ((MPI_Datatype)0x4c000028)
#define MPI_REAL ((MPI_Datatype)0x4c000029)
#define MPI_DOUBLE_PRECISION ((MPI_Datatype)0x4c00002a)
#define MPI_LOGICAL ((MPI_Datatype)0x4c00002b)
#define MPI_2INTEGER ((MPI_Datatype)0x4c00002c)
#define MPI_2REAL ((MPI_Datatype)0x4c00002d)
#define MPI_2DOUBLE_PRECISION ((MPI_Datatype)0x4c00002e)
#define MPI_COMPLEX ((MPI_Datatype)0x4c00002f)
#define MPI_DOUBLE_COMPLEX ((MPI_Datatype)0x4c000030)
#define MPI_INTEGER1 ((MPI_Datatype)0x4c000031)
#define MPI_INTEGER2 ((MPI_Datatype)0x4c000032)
#define MPI_INTEGER4 ((MPI_Datatype)0x4c000033)
#define MPI_INTEGER8 ((MPI_Datatype)0x4c000034)
#define MPI_REAL4 ((MPI_Datatype)0x4c000035)
#define MPI_REAL8 ((MPI_Datatype)0x4c000036)
#define MPI_REAL16 ((MPI_Datatype)0x4c000037)
#define MPI_COMPLEX8 ((MPI_Datatype)0x4c000038)
#define MPI_COMPLEX16 ((MPI_Datatype)0x4c000039)
#define MPI_COMPLEX32 ((MPI_Datatype)0x4c00003a)
/* C++ types, usable from C (no C++ binding). */
#define MPI_CXX_BOOL ((MPI_Datatype)0x4c00003b)
#define MPI_CXX_FLOAT_COMPLEX ((MPI_Datatype)0x4c00003c)
#define MPI_CXX_DOUBLE_COMPLEX ((MPI_Datatype)0x4c00003d)
#define MPI_CXX_LONG_DOUBLE_COMPLEX ((MPI_Datatype)0x4c00003e)
/* MPI_C_COMPLEX is MPI_C_FLOAT_COMPLEX under its own name (a handle of its own). */
#define MPI_C_COMPLEX ((MPI_Datatype)0x4c00003f)
#define MPI_INTEGER16 ((MPI_Datatype)0x4c000040)   /* a 16-byte integer (__int128) */
#define ZIMP_MPI_NUM_PREDEFINED_TYPES 0x41

/* ---- special values ---- */
#define MPI_ANY_SOURCE (-2)
#define MPI_PROC_NULL (-1)
#define MPI_ROOT (-3)
#define MPI_ANY_TAG (-1)
#define MPI_UNDEFINED (-32766)
#define MPI_KEYVAL_INVALID (-1)
#define MPI_BOTTOM ((void *)0)
#define MPI_IN_PLACE ((void *)-1)
#define MPI_STATUS_IGNORE ((MPI_Status *)0)  /* NULL, like Open MPI: no array-bound warnings */
#define MPI_STATUSES_IGNORE ((MPI_Status *)0)
#define MPI_ERRCODES_IGNORE ((int *)0)
#define MPI_BSEND_OVERHEAD 64

#define MPI_MAX_PROCESSOR_NAME 256
#define MPI_MAX_ERROR_STRING 512
#define MPI_MAX_OBJECT_NAME 128
#define MPI_MAX_LIBRARY_VERSION_STRING 256
#define MPI_MAX_INFO_KEY 255
#define MPI_MAX_INFO_VAL 1024

#define MPI_IDENT 0
#define MPI_CONGRUENT 1
#define MPI_SIMILAR 2
#define MPI_UNEQUAL 3

#define MPI_THREAD_SINGLE 0
#define MPI_THREAD_FUNNELED 1
#define MPI_THREAD_SERIALIZED 2
#define MPI_THREAD_MULTIPLE 3

#define MPI_COMM_TYPE_SHARED 1

#define MPI_GRAPH 1
#define MPI_CART 2
#define MPI_DIST_GRAPH 3

/* Predefined attribute keys (MPI_Comm_get_attr on MPI_COMM_WORLD). */
#define MPI_TAG_UB 0x64400001
#define MPI_HOST 0x64400002
#define MPI_IO 0x64400003
#define MPI_WTIME_IS_GLOBAL 0x64400004
#define MPI_UNIVERSE_SIZE 0x64400005
#define MPI_APPNUM 0x64400006
#define MPI_LASTUSEDCODE 0x64400007

/* ---- error classes ---- */
#define MPI_SUCCESS 0
#define MPI_ERR_BUFFER 1
#define MPI_ERR_COUNT 2
#define MPI_ERR_TYPE 3
#define MPI_ERR_TAG 4
#define MPI_ERR_COMM 5
#define MPI_ERR_RANK 6
#define MPI_ERR_ROOT 7
#define MPI_ERR_GROUP 8
#define MPI_ERR_OP 9
#define MPI_ERR_TOPOLOGY 10
#define MPI_ERR_DIMS 11
#define MPI_ERR_ARG 12
#define MPI_ERR_UNKNOWN 13
#define MPI_ERR_TRUNCATE 14
#define MPI_ERR_OTHER 15
#define MPI_ERR_INTERN 16
#define MPI_ERR_IN_STATUS 17
#define MPI_ERR_PENDING 18
#define MPI_ERR_REQUEST 19
#define MPI_ERR_ACCESS 20
#define MPI_ERR_AMODE 21
#define MPI_ERR_BAD_FILE 22
#define MPI_ERR_CONVERSION 23
#define MPI_ERR_DUP_DATAREP 24
#define MPI_ERR_FILE_EXISTS 25
#define MPI_ERR_FILE_IN_USE 26
#define MPI_ERR_FILE 27
#define MPI_ERR_INFO 28
#define MPI_ERR_INFO_KEY 29
#define MPI_ERR_INFO_VALUE 30
#define MPI_ERR_INFO_NOKEY 31
#define MPI_ERR_IO 32
#define MPI_ERR_NAME 33
#define MPI_ERR_NO_MEM 34
#define MPI_ERR_NOT_SAME 35
#define MPI_ERR_NO_SPACE 36
#define MPI_ERR_NO_SUCH_FILE 37
#define MPI_ERR_PORT 38
#define MPI_ERR_QUOTA 39
#define MPI_ERR_READ_ONLY 40
#define MPI_ERR_SERVICE 41
#define MPI_ERR_SPAWN 42
#define MPI_ERR_UNSUPPORTED_DATAREP 43
#define MPI_ERR_UNSUPPORTED_OPERATION 44
#define MPI_ERR_WIN 45
#define MPI_ERR_BASE 46
#define MPI_ERR_LOCKTYPE 47
#define MPI_ERR_KEYVAL 48
#define MPI_ERR_RMA_CONFLICT 49
#define MPI_ERR_RMA_SYNC 50
#define MPI_ERR_SIZE 51
#define MPI_ERR_DISP 52
#define MPI_ERR_ASSERT 53
#define MPI_ERR_RMA_RANGE 54
#define MPI_ERR_RMA_ATTACH 55
#define MPI_ERR_RMA_SHARED 56
#define MPI_ERR_RMA_FLAVOR 57
/* Extension (the ULFM name): a process this call depends on has died. */
#define MPIX_ERR_PROC_FAILED 58
#define MPI_ERR_LASTCODE 63

/* ---- callback types ---- */
typedef void MPI_User_function(void *invec, void *inoutvec, int *len, MPI_Datatype *datatype);
typedef void MPI_Comm_errhandler_function(MPI_Comm *comm, int *error_code, ...);
typedef int MPI_Comm_copy_attr_function(MPI_Comm oldcomm, int comm_keyval, void *extra_state,
                                        void *attribute_val_in, void *attribute_val_out, int *flag);
typedef int MPI_Comm_delete_attr_function(MPI_Comm comm, int comm_keyval, void *attribute_val,
                                          void *extra_state);
/* MPI-1 names of the same callbacks (attribute values as void *). */
typedef int MPI_Copy_function(MPI_Comm oldcomm, int keyval, void *extra_state,
                              void *attribute_val_in, void *attribute_val_out, int *flag);
typedef int MPI_Delete_function(MPI_Comm comm, int keyval, void *attribute_val, void *extra_state);

ZIMP_MPI_API int zimp_mpi_null_copy_fn(MPI_Comm, int, void *, void *, void *, int *);
ZIMP_MPI_API int zimp_mpi_dup_fn(MPI_Comm, int, void *, void *, void *, int *);
ZIMP_MPI_API int zimp_mpi_null_delete_fn(MPI_Comm, int, void *, void *);
#define MPI_COMM_NULL_COPY_FN ((MPI_Comm_copy_attr_function *)zimp_mpi_null_copy_fn)
#define MPI_COMM_DUP_FN ((MPI_Comm_copy_attr_function *)zimp_mpi_dup_fn)
#define MPI_COMM_NULL_DELETE_FN ((MPI_Comm_delete_attr_function *)zimp_mpi_null_delete_fn)
#define MPI_NULL_COPY_FN ((MPI_Copy_function *)zimp_mpi_null_copy_fn)
#define MPI_DUP_FN ((MPI_Copy_function *)zimp_mpi_dup_fn)
#define MPI_NULL_DELETE_FN ((MPI_Delete_function *)zimp_mpi_null_delete_fn)
typedef int MPI_Type_copy_attr_function(MPI_Datatype oldtype, int type_keyval, void *extra_state,
                                        void *attribute_val_in, void *attribute_val_out, int *flag);
typedef int MPI_Type_delete_attr_function(MPI_Datatype datatype, int type_keyval, void *attribute_val,
                                          void *extra_state);
#define MPI_TYPE_NULL_COPY_FN ((MPI_Type_copy_attr_function *)zimp_mpi_null_copy_fn)
#define MPI_TYPE_DUP_FN ((MPI_Type_copy_attr_function *)zimp_mpi_dup_fn)
#define MPI_TYPE_NULL_DELETE_FN ((MPI_Type_delete_attr_function *)zimp_mpi_null_delete_fn)

/* ---- environment ---- */
ZIMP_MPI_API int MPI_Init(int *argc, char ***argv);
ZIMP_MPI_API int MPI_Init_thread(int *argc, char ***argv, int required, int *provided);
ZIMP_MPI_API int MPI_Query_thread(int *provided);
ZIMP_MPI_API int MPI_Is_thread_main(int *flag);
ZIMP_MPI_API int MPI_Initialized(int *flag);
ZIMP_MPI_API int MPI_Finalize(void);
ZIMP_MPI_API int MPI_Finalized(int *flag);
ZIMP_MPI_API int MPI_Abort(MPI_Comm comm, int errorcode);
ZIMP_MPI_API int MPI_Get_processor_name(char *name, int *resultlen);
ZIMP_MPI_API int MPI_Get_version(int *version, int *subversion);
ZIMP_MPI_API int MPI_Get_library_version(char *version, int *resultlen);
ZIMP_MPI_API double MPI_Wtime(void);
ZIMP_MPI_API double MPI_Wtick(void);

/* ---- errors ---- */
ZIMP_MPI_API int MPI_Error_string(int errorcode, char *string, int *resultlen);
ZIMP_MPI_API int MPI_Error_class(int errorcode, int *errorclass);
ZIMP_MPI_API int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler);
ZIMP_MPI_API int MPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler *errhandler);
ZIMP_MPI_API int MPI_Comm_create_errhandler(MPI_Comm_errhandler_function *fn, MPI_Errhandler *errhandler);
ZIMP_MPI_API int MPI_Comm_call_errhandler(MPI_Comm comm, int errorcode);
ZIMP_MPI_API int MPI_Errhandler_free(MPI_Errhandler *errhandler);

/* ---- point to point ---- */
ZIMP_MPI_API int MPI_Send(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
ZIMP_MPI_API int MPI_Ssend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
ZIMP_MPI_API int MPI_Rsend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
ZIMP_MPI_API int MPI_Bsend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
ZIMP_MPI_API int MPI_Recv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                          MPI_Status *status);
ZIMP_MPI_API int MPI_Isend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                           MPI_Request *request);
ZIMP_MPI_API int MPI_Issend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                            MPI_Request *request);
ZIMP_MPI_API int MPI_Irsend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                            MPI_Request *request);
ZIMP_MPI_API int MPI_Ibsend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                            MPI_Request *request);
ZIMP_MPI_API int MPI_Irecv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                           MPI_Request *request);
ZIMP_MPI_API int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                              void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                              MPI_Comm comm, MPI_Status *status);
ZIMP_MPI_API int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype datatype, int dest, int sendtag,
                                      int source, int recvtag, MPI_Comm comm, MPI_Status *status);
ZIMP_MPI_API int MPI_Buffer_attach(void *buffer, int size);
ZIMP_MPI_API int MPI_Buffer_detach(void *buffer_addr, int *size);

ZIMP_MPI_API int MPI_Send_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                               MPI_Request *request);
ZIMP_MPI_API int MPI_Ssend_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                                MPI_Request *request);
ZIMP_MPI_API int MPI_Rsend_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                                MPI_Request *request);
ZIMP_MPI_API int MPI_Bsend_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                                MPI_Request *request);
ZIMP_MPI_API int MPI_Recv_init(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                               MPI_Request *request);
ZIMP_MPI_API int MPI_Start(MPI_Request *request);
ZIMP_MPI_API int MPI_Startall(int count, MPI_Request array_of_requests[]);

ZIMP_MPI_API int MPI_Wait(MPI_Request *request, MPI_Status *status);
ZIMP_MPI_API int MPI_Waitall(int count, MPI_Request array_of_requests[], MPI_Status array_of_statuses[]);
ZIMP_MPI_API int MPI_Waitany(int count, MPI_Request array_of_requests[], int *index, MPI_Status *status);
ZIMP_MPI_API int MPI_Waitsome(int incount, MPI_Request array_of_requests[], int *outcount,
                              int array_of_indices[], MPI_Status array_of_statuses[]);
ZIMP_MPI_API int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status);
ZIMP_MPI_API int MPI_Testall(int count, MPI_Request array_of_requests[], int *flag,
                             MPI_Status array_of_statuses[]);
ZIMP_MPI_API int MPI_Testany(int count, MPI_Request array_of_requests[], int *index, int *flag,
                             MPI_Status *status);
ZIMP_MPI_API int MPI_Testsome(int incount, MPI_Request array_of_requests[], int *outcount,
                              int array_of_indices[], MPI_Status array_of_statuses[]);
ZIMP_MPI_API int MPI_Request_free(MPI_Request *request);
typedef int MPI_Grequest_query_function(void *extra_state, MPI_Status *status);
typedef int MPI_Grequest_free_function(void *extra_state);
typedef int MPI_Grequest_cancel_function(void *extra_state, int complete);
ZIMP_MPI_API int MPI_Grequest_start(MPI_Grequest_query_function *query_fn, MPI_Grequest_free_function *free_fn,
                                    MPI_Grequest_cancel_function *cancel_fn, void *extra_state,
                                    MPI_Request *request);
ZIMP_MPI_API int MPI_Grequest_complete(MPI_Request request);
ZIMP_MPI_API int MPI_Request_get_status(MPI_Request request, int *flag, MPI_Status *status);
ZIMP_MPI_API int MPI_Cancel(MPI_Request *request);
ZIMP_MPI_API int MPI_Test_cancelled(const MPI_Status *status, int *flag);

ZIMP_MPI_API int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status);
ZIMP_MPI_API int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status);
ZIMP_MPI_API int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message *message, MPI_Status *status);
ZIMP_MPI_API int MPI_Improbe(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message,
                             MPI_Status *status);
ZIMP_MPI_API int MPI_Mrecv(void *buf, int count, MPI_Datatype datatype, MPI_Message *message, MPI_Status *status);
ZIMP_MPI_API int MPI_Imrecv(void *buf, int count, MPI_Datatype datatype, MPI_Message *message,
                            MPI_Request *request);
ZIMP_MPI_API int MPI_Get_count(const MPI_Status *status, MPI_Datatype datatype, int *count);
ZIMP_MPI_API int MPI_Get_elements(const MPI_Status *status, MPI_Datatype datatype, int *count);
ZIMP_MPI_API int MPI_Get_elements_x(const MPI_Status *status, MPI_Datatype datatype, MPI_Count *count);
ZIMP_MPI_API int MPI_Status_set_elements(MPI_Status *status, MPI_Datatype datatype, int count);
ZIMP_MPI_API int MPI_Status_set_elements_x(MPI_Status *status, MPI_Datatype datatype, MPI_Count count);
ZIMP_MPI_API int MPI_Status_set_cancelled(MPI_Status *status, int flag);
ZIMP_MPI_API int MPI_Type_size_x(MPI_Datatype datatype, MPI_Count *size);
ZIMP_MPI_API int MPI_Type_get_extent_x(MPI_Datatype datatype, MPI_Count *lb, MPI_Count *extent);
ZIMP_MPI_API int MPI_Type_get_true_extent_x(MPI_Datatype datatype, MPI_Count *true_lb, MPI_Count *true_extent);

/* ---- datatypes ---- */
ZIMP_MPI_API int MPI_Type_size(MPI_Datatype datatype, int *size);
ZIMP_MPI_API int MPI_Type_get_extent(MPI_Datatype datatype, MPI_Aint *lb, MPI_Aint *extent);
ZIMP_MPI_API int MPI_Type_get_true_extent(MPI_Datatype datatype, MPI_Aint *true_lb, MPI_Aint *true_extent);
ZIMP_MPI_API int MPI_Type_contiguous(int count, MPI_Datatype oldtype, MPI_Datatype *newtype);
ZIMP_MPI_API int MPI_Type_vector(int count, int blocklength, int stride, MPI_Datatype oldtype,
                                 MPI_Datatype *newtype);
ZIMP_MPI_API int MPI_Type_create_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype,
                                         MPI_Datatype *newtype);
ZIMP_MPI_API int MPI_Type_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype,
                                  MPI_Datatype *newtype);
ZIMP_MPI_API int MPI_Type_indexed(int count, const int array_of_blocklengths[],
                                  const int array_of_displacements[], MPI_Datatype oldtype,
                                  MPI_Datatype *newtype);
ZIMP_MPI_API int MPI_Type_create_indexed_block(int count, int blocklength, const int array_of_displacements[],
                                               MPI_Datatype oldtype, MPI_Datatype *newtype);
ZIMP_MPI_API int MPI_Type_create_hindexed(int count, const int array_of_blocklengths[],
                                          const MPI_Aint array_of_displacements[], MPI_Datatype oldtype,
                                          MPI_Datatype *newtype);
ZIMP_MPI_API int MPI_Type_hindexed(int count, int array_of_blocklengths[], MPI_Aint array_of_displacements[],
                                   MPI_Datatype oldtype, MPI_Datatype *newtype);
ZIMP_MPI_API int MPI_Type_create_struct(int count, const int array_of_blocklengths[],
                                        const MPI_Aint array_of_displacements[],
                                        const MPI_Datatype array_of_types[], MPI_Datatype *newtype);
ZIMP_MPI_API int MPI_Type_create_resized(MPI_Datatype oldtype, MPI_Aint lb, MPI_Aint extent,
                                         MPI_Datatype *newtype);
ZIMP_MPI_API int MPI_Type_dup(MPI_Datatype oldtype, MPI_Datatype *newtype);
ZIMP_MPI_API int MPI_Type_create_hindexed_block(int count, int blocklength, const MPI_Aint array_of_displacements[],
                                                MPI_Datatype oldtype, MPI_Datatype *newtype);
ZIMP_MPI_API int MPI_Type_get_envelope(MPI_Datatype datatype, int *num_integers, int *num_addresses,
                                       int *num_datatypes, int *combiner);
ZIMP_MPI_API int MPI_Type_get_contents(MPI_Datatype datatype, int max_integers, int max_addresses,
                                       int max_datatypes, int array_of_integers[],
                                       MPI_Aint array_of_addresses[], MPI_Datatype array_of_datatypes[]);
ZIMP_MPI_API int MPI_Type_commit(MPI_Datatype *datatype);
ZIMP_MPI_API int MPI_Type_free(MPI_Datatype *datatype);
ZIMP_MPI_API int MPI_Type_get_name(MPI_Datatype datatype, char *type_name, int *resultlen);
ZIMP_MPI_API int MPI_Type_set_name(MPI_Datatype datatype, const char *type_name);
#define MPI_TYPECLASS_REAL 1
#define MPI_TYPECLASS_INTEGER 2
#define MPI_TYPECLASS_COMPLEX 3
ZIMP_MPI_API int MPI_Type_match_size(int typeclass, int size, MPI_Datatype *datatype);
ZIMP_MPI_API int MPI_Type_create_keyval(MPI_Type_copy_attr_function *type_copy_attr_fn,
                                        MPI_Type_delete_attr_function *type_delete_attr_fn, int *type_keyval,
                                        void *extra_state);
ZIMP_MPI_API int MPI_Type_free_keyval(int *type_keyval);
ZIMP_MPI_API int MPI_Type_set_attr(MPI_Datatype datatype, int type_keyval, void *attribute_val);
ZIMP_MPI_API int MPI_Type_get_attr(MPI_Datatype datatype, int type_keyval, void *attribute_val, int *flag);
ZIMP_MPI_API int MPI_Type_delete_attr(MPI_Datatype datatype, int type_keyval);
#define MPI_ORDER_C 56
#define MPI_ORDER_FORTRAN 57
#define MPI_DISTRIBUTE_BLOCK 121
#define MPI_DISTRIBUTE_CYCLIC 122
#define MPI_DISTRIBUTE_NONE 123
#define MPI_DISTRIBUTE_DFLT_DARG (-49767)
ZIMP_MPI_API int MPI_Type_create_subarray(int ndims, const int array_of_sizes[], const int array_of_subsizes[],
                                          const int array_of_starts[], int order, MPI_Datatype oldtype,
                                          MPI_Datatype *newtype);
ZIMP_MPI_API int MPI_Type_create_darray(int size, int rank, int ndims, const int array_of_gsizes[],
                                        const int array_of_distribs[], const int array_of_dargs[],
                                        const int array_of_psizes[], int order, MPI_Datatype oldtype,
                                        MPI_Datatype *newtype);
/* "external32" only: every basic element big-endian, at its native size. */
ZIMP_MPI_API int MPI_Pack_external(const char datarep[], const void *inbuf, int incount, MPI_Datatype datatype,
                                   void *outbuf, MPI_Aint outsize, MPI_Aint *position);
ZIMP_MPI_API int MPI_Unpack_external(const char datarep[], const void *inbuf, MPI_Aint insize, MPI_Aint *position,
                                     void *outbuf, int outcount, MPI_Datatype datatype);
ZIMP_MPI_API int MPI_Pack_external_size(const char datarep[], int incount, MPI_Datatype datatype, MPI_Aint *size);
/* Handle conversions: a handle is its own Fortran integer. */
ZIMP_MPI_API MPI_Fint MPI_Comm_c2f(MPI_Comm comm);
ZIMP_MPI_API MPI_Comm MPI_Comm_f2c(MPI_Fint comm);
ZIMP_MPI_API MPI_Fint MPI_Type_c2f(MPI_Datatype datatype);
ZIMP_MPI_API MPI_Datatype MPI_Type_f2c(MPI_Fint datatype);
ZIMP_MPI_API MPI_Fint MPI_Group_c2f(MPI_Group group);
ZIMP_MPI_API MPI_Group MPI_Group_f2c(MPI_Fint group);
ZIMP_MPI_API MPI_Fint MPI_Request_c2f(MPI_Request request);
ZIMP_MPI_API MPI_Request MPI_Request_f2c(MPI_Fint request);
ZIMP_MPI_API MPI_Fint MPI_Op_c2f(MPI_Op op);
ZIMP_MPI_API MPI_Op MPI_Op_f2c(MPI_Fint op);
ZIMP_MPI_API MPI_Fint MPI_Info_c2f(MPI_Info info);
ZIMP_MPI_API MPI_Info MPI_Info_f2c(MPI_Fint info);
ZIMP_MPI_API MPI_Fint MPI_Errhandler_c2f(MPI_Errhandler errhandler);
ZIMP_MPI_API MPI_Errhandler MPI_Errhandler_f2c(MPI_Fint errhandler);
ZIMP_MPI_API MPI_Fint MPI_Message_c2f(MPI_Message message);
ZIMP_MPI_API MPI_Message MPI_Message_f2c(MPI_Fint message);
ZIMP_MPI_API MPI_Fint PMPI_Comm_c2f(MPI_Comm comm);
ZIMP_MPI_API MPI_Comm PMPI_Comm_f2c(MPI_Fint comm);
ZIMP_MPI_API MPI_Fint PMPI_Type_c2f(MPI_Datatype datatype);
ZIMP_MPI_API MPI_Datatype PMPI_Type_f2c(MPI_Fint datatype);
ZIMP_MPI_API MPI_Fint PMPI_Group_c2f(MPI_Group group);
ZIMP_MPI_API MPI_Group PMPI_Group_f2c(MPI_Fint group);
ZIMP_MPI_API MPI_Fint PMPI_Request_c2f(MPI_Request request);
ZIMP_MPI_API MPI_Request PMPI_Request_f2c(MPI_Fint request);
ZIMP_MPI_API MPI_Fint PMPI_Op_c2f(MPI_Op op);
ZIMP_MPI_API MPI_Op PMPI_Op_f2c(MPI_Fint op);
ZIMP_MPI_API MPI_Fint PMPI_Info_c2f(MPI_Info info);
ZIMP_MPI_API MPI_Info PMPI_Info_f2c(MPI_Fint info);
ZIMP_MPI_API MPI_Fint PMPI_Errhandler_c2f(MPI_Errhandler errhandler);
ZIMP_MPI_API MPI_Errhandler PMPI_Errhandler_f2c(MPI_Fint errhandler);
ZIMP_MPI_API MPI_Fint PMPI_Message_c2f(MPI_Message message);
ZIMP_MPI_API MPI_Message PMPI_Message_f2c(MPI_Fint message);
ZIMP_MPI_API int MPI_Get_address(const void *location, MPI_Aint *address);
ZIMP_MPI_API int MPI_Address(void *location, MPI_Aint *address);
ZIMP_MPI_API int MPI_Pack(const void *inbuf, int incount, MPI_Datatype datatype, void *outbuf, int outsize,
                          int *position, MPI_Comm comm);
ZIMP_MPI_API int MPI_Unpack(const void *inbuf, int insize, int *position, void *outbuf, int outcount,
                            MPI_Datatype datatype, MPI_Comm comm);
ZIMP_MPI_API int MPI_Pack_size(int incount, MPI_Datatype datatype, MPI_Comm comm, int *size);

/* ---- communicators and groups ---- */
ZIMP_MPI_API int MPI_Comm_rank(MPI_Comm comm, int *rank);
ZIMP_MPI_API int MPI_Comm_size(MPI_Comm comm, int *size);
ZIMP_MPI_API int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm);
ZIMP_MPI_API int MPI_Comm_idup(MPI_Comm comm, MPI_Comm *newcomm, MPI_Request *request);
ZIMP_MPI_API int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm);
ZIMP_MPI_API int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm *newcomm);
ZIMP_MPI_API int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm);
ZIMP_MPI_API int MPI_Comm_free(MPI_Comm *comm);
ZIMP_MPI_API int MPI_Comm_compare(MPI_Comm comm1, MPI_Comm comm2, int *result);
ZIMP_MPI_API int MPI_Intercomm_create(MPI_Comm local_comm, int local_leader, MPI_Comm peer_comm,
                                      int remote_leader, int tag, MPI_Comm *newintercomm);
ZIMP_MPI_API int MPI_Intercomm_merge(MPI_Comm intercomm, int high, MPI_Comm *newintracomm);
ZIMP_MPI_API int MPI_Comm_remote_size(MPI_Comm comm, int *size);
ZIMP_MPI_API int MPI_Comm_remote_group(MPI_Comm comm, MPI_Group *group);
ZIMP_MPI_API int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm *newcomm);
ZIMP_MPI_API int MPI_Group_range_incl(MPI_Group group, int n, int ranges[][3], MPI_Group *newgroup);
ZIMP_MPI_API int MPI_Group_range_excl(MPI_Group group, int n, int ranges[][3], MPI_Group *newgroup);
ZIMP_MPI_API int MPI_Group_union(MPI_Group group1, MPI_Group group2, MPI_Group *newgroup);
ZIMP_MPI_API int MPI_Group_intersection(MPI_Group group1, MPI_Group group2, MPI_Group *newgroup);
ZIMP_MPI_API int MPI_Group_difference(MPI_Group group1, MPI_Group group2, MPI_Group *newgroup);
ZIMP_MPI_API int MPI_Alloc_mem(MPI_Aint size, MPI_Info info, void *baseptr);
ZIMP_MPI_API int MPI_Free_mem(void *base);
ZIMP_MPI_API int MPI_Comm_test_inter(MPI_Comm comm, int *flag);
ZIMP_MPI_API int MPI_Comm_set_name(MPI_Comm comm, const char *comm_name);
ZIMP_MPI_API int MPI_Comm_get_name(MPI_Comm comm, char *comm_name, int *resultlen);
ZIMP_MPI_API int MPI_Comm_group(MPI_Comm comm, MPI_Group *group);
ZIMP_MPI_API int MPI_Group_size(MPI_Group group, int *size);
ZIMP_MPI_API int MPI_Group_rank(MPI_Group group, int *rank);
ZIMP_MPI_API int MPI_Group_incl(MPI_Group group, int n, const int ranks[], MPI_Group *newgroup);
ZIMP_MPI_API int MPI_Group_excl(MPI_Group group, int n, const int ranks[], MPI_Group *newgroup);
ZIMP_MPI_API int MPI_Group_translate_ranks(MPI_Group group1, int n, const int ranks1[], MPI_Group group2,
                                           int ranks2[]);
ZIMP_MPI_API int MPI_Group_compare(MPI_Group group1, MPI_Group group2, int *result);
ZIMP_MPI_API int MPI_Group_free(MPI_Group *group);

ZIMP_MPI_API int MPI_Comm_create_keyval(MPI_Comm_copy_attr_function *copy_fn,
                                        MPI_Comm_delete_attr_function *delete_fn, int *keyval,
                                        void *extra_state);
ZIMP_MPI_API int MPI_Comm_free_keyval(int *keyval);
ZIMP_MPI_API int MPI_Comm_set_attr(MPI_Comm comm, int keyval, void *attribute_val);
ZIMP_MPI_API int MPI_Comm_get_attr(MPI_Comm comm, int keyval, void *attribute_val, int *flag);
ZIMP_MPI_API int MPI_Comm_delete_attr(MPI_Comm comm, int keyval);
ZIMP_MPI_API int MPI_Keyval_create(MPI_Copy_function *copy_fn, MPI_Delete_function *delete_fn, int *keyval,
                                   void *extra_state);
ZIMP_MPI_API int MPI_Keyval_free(int *keyval);
ZIMP_MPI_API int MPI_Attr_put(MPI_Comm comm, int keyval, void *attribute_val);
ZIMP_MPI_API int MPI_Attr_get(MPI_Comm comm, int keyval, void *attribute_val, int *flag);
ZIMP_MPI_API int MPI_Attr_delete(MPI_Comm comm, int keyval);

ZIMP_MPI_API int MPI_Info_create(MPI_Info *info);
ZIMP_MPI_API int MPI_Info_set(MPI_Info info, const char *key, const char *value);
ZIMP_MPI_API int MPI_Info_get(MPI_Info info, const char *key, int valuelen, char *value, int *flag);
ZIMP_MPI_API int MPI_Info_delete(MPI_Info info, const char *key);
ZIMP_MPI_API int MPI_Info_get_nkeys(MPI_Info info, int *nkeys);
ZIMP_MPI_API int MPI_Info_free(MPI_Info *info);

ZIMP_MPI_API int MPI_Dims_create(int nnodes, int ndims, int dims[]);
ZIMP_MPI_API int MPI_Cart_create(MPI_Comm comm_old, int ndims, const int dims[], const int periods[],
                                 int reorder, MPI_Comm *comm_cart);
ZIMP_MPI_API int MPI_Cart_coords(MPI_Comm comm, int rank, int maxdims, int coords[]);
ZIMP_MPI_API int MPI_Cart_rank(MPI_Comm comm, const int coords[], int *rank);
ZIMP_MPI_API int MPI_Cart_shift(MPI_Comm comm, int direction, int disp, int *rank_source, int *rank_dest);
ZIMP_MPI_API int MPI_Cart_get(MPI_Comm comm, int maxdims, int dims[], int periods[], int coords[]);
ZIMP_MPI_API int MPI_Cartdim_get(MPI_Comm comm, int *ndims);
ZIMP_MPI_API int MPI_Topo_test(MPI_Comm comm, int *status);

/* ---- collectives ---- */
ZIMP_MPI_API int MPI_Barrier(MPI_Comm comm);
ZIMP_MPI_API int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm);
ZIMP_MPI_API int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                            int root, MPI_Comm comm);
ZIMP_MPI_API int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                               MPI_Comm comm);
ZIMP_MPI_API int MPI_Reduce_local(const void *inbuf, void *inoutbuf, int count, MPI_Datatype datatype, MPI_Op op);
ZIMP_MPI_API int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                            int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);
ZIMP_MPI_API int MPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                             const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                             MPI_Comm comm);
ZIMP_MPI_API int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                             int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);
ZIMP_MPI_API int MPI_Scatterv(const void *sendbuf, const int sendcounts[], const int displs[],
                              MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                              int root, MPI_Comm comm);
ZIMP_MPI_API int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                               int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
ZIMP_MPI_API int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                                const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                                MPI_Comm comm);
ZIMP_MPI_API int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                              int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
ZIMP_MPI_API int MPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                               MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                               const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm);
ZIMP_MPI_API int MPI_Neighbor_allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                                        void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
ZIMP_MPI_API int MPI_Neighbor_allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                                         void *recvbuf, const int recvcounts[], const int displs[],
                                         MPI_Datatype recvtype, MPI_Comm comm);
ZIMP_MPI_API int MPI_Neighbor_alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                                       void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
ZIMP_MPI_API int MPI_Neighbor_alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                                        MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                                        const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm);
ZIMP_MPI_API int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                                          MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
ZIMP_MPI_API int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                                    MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
ZIMP_MPI_API int MPI_Scan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                          MPI_Comm comm);
ZIMP_MPI_API int MPI_Exscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                            MPI_Comm comm);
ZIMP_MPI_API int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request);
ZIMP_MPI_API int MPI_Ibcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
                            MPI_Request *request);
ZIMP_MPI_API int MPI_Alltoallw(const void *sendbuf, const int sendcounts[], const int sdispls[],
                               const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[],
                               const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm);
ZIMP_MPI_API int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                             int root, MPI_Comm comm, MPI_Request *request);
ZIMP_MPI_API int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                                MPI_Op op, MPI_Comm comm, MPI_Request *request);
ZIMP_MPI_API int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                                           MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                                           MPI_Request *request);
ZIMP_MPI_API int MPI_Ireduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                                     MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request);
ZIMP_MPI_API int MPI_Iscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                           MPI_Comm comm, MPI_Request *request);
ZIMP_MPI_API int MPI_Iexscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                             MPI_Comm comm, MPI_Request *request);
ZIMP_MPI_API int MPI_Igather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                             int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request);
ZIMP_MPI_API int MPI_Igatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                              const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                              MPI_Comm comm, MPI_Request *request);
ZIMP_MPI_API int MPI_Iscatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                              int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request);
ZIMP_MPI_API int MPI_Iscatterv(const void *sendbuf, const int sendcounts[], const int displs[],
                               MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                               int root, MPI_Comm comm, MPI_Request *request);
ZIMP_MPI_API int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                                int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request);
ZIMP_MPI_API int MPI_Iallgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                                 const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                                 MPI_Comm comm, MPI_Request *request);
ZIMP_MPI_API int MPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                               int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request);
ZIMP_MPI_API int MPI_Ialltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                                MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                                const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request);
ZIMP_MPI_API int MPI_Ialltoallw(const void *sendbuf, const int sendcounts[], const int sdispls[],
                                const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[],
                                const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm,
                                MPI_Request *request);

ZIMP_MPI_API int MPI_Op_create(MPI_User_function *user_fn, int commute, MPI_Op *op);
ZIMP_MPI_API int MPI_Op_free(MPI_Op *op);
ZIMP_MPI_API int MPI_Op_commutative(MPI_Op op, int *commute);

#ifdef __cplusplus
}
#endif
#endif /* ZIMP_MPI_H */
