/* mgt_mpi.c - the MPI side of mgt's processes, built by `ninja mpi` into build/libmgt_mpi.so.

   mgt.h and the programs built on it never link MPI: a program started by an MPI launcher opens
   this library with dlopen (mgt_mpi_load) and calls MPI only through the table below, so ./mgt
   starts on machines without MPI and one process needs nothing of it. The table carries plain C
   types (no MPI_Comm, no MPI_Request), so mgt.h does not depend on any MPI's headers or ABI: only
   this file is compiled against them, with the launcher's own `mpicc`.

   Rank threads call MPI themselves (MPI_THREAD_MULTIPLE): non-blocking point-to-point, polled by
   the caller against its deadline. Collectives and send/recv use two duplicates of
   MPI_COMM_WORLD, startup exchanges a third, so no message of one kind can match another's. */
#include <limits.h> /* defines: INT_MAX */
#include <mpi.h>    /* defines: MPI_Init_thread, MPI_Isend, MPI_Irecv, MPI_Testall, MPI_Allgather */
#include <stdio.h>  /* defines: snprintf */
#include <stdlib.h> /* defines: malloc, free */
#include <string.h> /* defines: strlen */

#include "mgt.h" /* defines: mgt_mpi_api, MGT_MPI_ABI */

#define CHUNK (1 << 30) /* bytes per MPI message: MPI counts are int */

static MPI_Comm channels[MGT_MPI_CHANNELS]; /* collectives, send/recv, startup */
static int started, tag_ub;

typedef struct request { /* one logical message, in CHUNK pieces sent or received in order */
    int n;
    MPI_Request r[1];
} request;

static void error_text(int code, char *why, size_t cap) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "MPI error %d", code);
    snprintf(why, cap, "%s", text);
}

static int init(int *process, int *processes, char *host, size_t host_cap, char *why, size_t cap) {
    int provided = 0, rc, i, flag = 0, len = 0, *ub = NULL;
    char name[MPI_MAX_PROCESSOR_NAME];
    if (!started) {
        rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
        if (rc != MPI_SUCCESS) { error_text(rc, why, cap); return -1; }
        if (provided < MPI_THREAD_MULTIPLE) {
            /* every rank thread calls MPI itself: anything less would serialise or corrupt them */
            snprintf(why, cap, "this MPI provides thread level %d, mgt needs MPI_THREAD_MULTIPLE (%d): rank threads call MPI "
                     "concurrently; use an MPI built with thread support (Open MPI and MPICH are)", provided, MPI_THREAD_MULTIPLE);
            MPI_Finalize();
            return -1;
        }
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN); /* errors come back to mgt, which names the call */
        for (i = 0; i < MGT_MPI_CHANNELS; i++) {
            MPI_Comm_dup(MPI_COMM_WORLD, &channels[i]);
            MPI_Comm_set_errhandler(channels[i], MPI_ERRORS_RETURN);
        }
        MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
        tag_ub = flag && ub ? *ub : 32767; /* the standard's minimum */
        started = 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, process);
    MPI_Comm_size(MPI_COMM_WORLD, processes);
    MPI_Get_processor_name(name, &len);
    snprintf(host, host_cap, "%s", name);
    return 0;
}

static int max_tag(void) { return tag_ub; }

static void finalize(void) {
    int i;
    if (!started) return;
    for (i = 0; i < MGT_MPI_CHANNELS; i++) MPI_Comm_free(&channels[i]);
    MPI_Finalize();
    started = 0;
}

static void abort_all(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

static void *post(int is_send, void *buf, size_t bytes, int process, int tag, int channel, char *why, size_t cap) {
    int n = bytes ? (int)((bytes + CHUNK - 1) / CHUNK) : 1, i, rc = MPI_SUCCESS;
    request *q = (request *)malloc(sizeof *q + sizeof(MPI_Request) * (size_t)n);
    if (!q) { snprintf(why, cap, "out of memory"); return NULL; }
    q->n = n;
    for (i = 0; i < n && rc == MPI_SUCCESS; i++) {
        size_t off = (size_t)i * CHUNK, len = bytes - off < (size_t)CHUNK ? bytes - off : (size_t)CHUNK;
        if (!bytes) len = 0;
        rc = is_send ? MPI_Isend((char *)buf + off, (int)len, MPI_BYTE, process, tag, channels[channel], &q->r[i])
                     : MPI_Irecv((char *)buf + off, (int)len, MPI_BYTE, process, tag, channels[channel], &q->r[i]);
    }
    if (rc != MPI_SUCCESS) {
        error_text(rc, why, cap);
        free(q); /* posted pieces are lost with the world: the caller fails it */
        return NULL;
    }
    return q;
}
static void *isend(const void *buf, size_t bytes, int process, int tag, int channel, char *why, size_t cap) {
    return post(1, (void *)buf, bytes, process, tag, channel, why, cap);
}
static void *irecv(void *buf, size_t bytes, int process, int tag, int channel, char *why, size_t cap) {
    return post(0, buf, bytes, process, tag, channel, why, cap);
}

/* 1 when done (the request is freed), 0 when not yet, -1 on an error (freed, why says it) */
static int test(void *request_, char *why, size_t cap) {
    request *q = (request *)request_;
    int done = 0, rc = MPI_Testall(q->n, q->r, &done, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) { error_text(rc, why, cap); free(q); return -1; }
    if (done) free(q);
    return done;
}

static void cancel(void *request_) {
    request *q = (request *)request_;
    int i;
    for (i = 0; i < q->n; i++)
        if (q->r[i] != MPI_REQUEST_NULL) {
            MPI_Cancel(&q->r[i]);
            MPI_Request_free(&q->r[i]);
        }
    free(q);
}

static int allgather(const void *send, void *recv, size_t bytes, char *why, size_t cap) {
    int rc;
    if (bytes > INT_MAX) { snprintf(why, cap, "allgather of %zu bytes: more than an int", bytes); return -1; }
    rc = MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, channels[MGT_MPI_STARTUP]);
    if (rc != MPI_SUCCESS) { error_text(rc, why, cap); return -1; }
    return 0;
}

static const mgt_mpi_api api = {MGT_MPI_ABI, init, max_tag, finalize, abort_all, isend, irecv, test, cancel, allgather};

const mgt_mpi_api *mgt_mpi_api_get(void);
const mgt_mpi_api *mgt_mpi_api_get(void) { return &api; }
