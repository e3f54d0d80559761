/* ---- communication: the mgt_comm table --------------------------------------------------------
   (fragment for mgt.h's public part, inside its extern "C" block; see wip/comm_local.h for the
   in-process backend.) One mgt_comm per rank. Collectives work over a group; every member calls
   the same collectives on that group in the same order (op, count, dtype and root equal), or all
   of them get MGT_ERROR_COMM with a message naming both calls. Reductions sum the members'
   contributions in group order (member 0 + member 1 + ...), element by element, so results are the
   same on every member and do not depend on timing; bf16 and f16 are summed in fp32 and rounded
   once, to nearest even. After any communication error the whole world has failed: every pending
   and later call returns MGT_ERROR_COMM at once. */

/* moves into MGT_RESULTS on integration as X(MGT_ERROR_COMM, -9, "communication error"), with
   MGT__RESULT_END becoming -10 */
#ifndef MGT_ERROR_COMM
#define MGT_ERROR_COMM ((mgt_result)-9)
#endif

/* element types of communication buffers; bf16 and f16 are reduced in fp32, f64 in fp64 */
enum { MGT_F32, MGT_BF16, MGT_F16, MGT_F64 };
#define MGT__COMM_DECLARED 1 /* lets tests/test_comm.c include the wip/ fragments only when needed */
enum {
    MGT_COLL_ALL_REDUCE,
    MGT_COLL_REDUCE_SCATTER,
    MGT_COLL_ALL_GATHER,
    MGT_COLL_BROADCAST,
    MGT_COLL_SEND_RECV,
    MGT_COLL_BARRIER,
    MGT_COLL_COUNT
};
/* "all-reduce", "reduce-scatter", "all-gather", "broadcast", "send/recv", "barrier" */
MGTDEF const char *mgt_coll_name(int coll);

typedef struct mgt_group {
    int id;           /* the same on every member, different for every group of the world */
    int size;         /* members */
    int index;        /* this rank's position among them */
    const int *ranks; /* global ranks of the members, in group order */
} mgt_group;

typedef struct mgt_comm_stats { /* per rank, cumulative, written only by the rank's own thread */
    long long calls[MGT_COLL_COUNT];
    /* bytes this rank contributed/received: all-reduce count*elt; reduce-scatter the send buffer;
       all-gather the receive buffer; broadcast count*elt; send and recv count*elt each */
    double bytes[MGT_COLL_COUNT];
    double seconds[MGT_COLL_COUNT]; /* wall time inside the calls, waiting included */
} mgt_comm_stats;

typedef struct mgt_comm mgt_comm; /* one per rank */
struct mgt_comm {
    int rank, world;
    /* sum, in place */
    mgt_result (*all_reduce)(mgt_comm *c, const mgt_group *g, void *buf, size_t count, int dtype);
    /* send holds size*recv_count; member i receives the sum of block i;
       recv may alias send + index*recv_count (no other overlap) */
    mgt_result (*reduce_scatter)(mgt_comm *c, const mgt_group *g, const void *send, void *recv,
                                 size_t recv_count, int dtype);
    /* recv gets size*send_count, block i from member i; send may alias recv + index*send_count */
    mgt_result (*all_gather)(mgt_comm *c, const mgt_group *g, const void *send, void *recv,
                             size_t send_count, int dtype);
    mgt_result (*broadcast)(mgt_comm *c, const mgt_group *g, void *buf, size_t count, int dtype,
                            int root_index);
    /* peer: global rank; buffered: returns once the data is copied */
    mgt_result (*send)(mgt_comm *c, int peer, const void *buf, size_t count, int dtype);
    /* blocks until the matching send; messages between a pair arrive in order */
    mgt_result (*recv)(mgt_comm *c, int peer, void *buf, size_t count, int dtype);
    mgt_result (*barrier)(mgt_comm *c, const mgt_group *g);
    mgt_comm_stats stats;
    void *impl;
};
