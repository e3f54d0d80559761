/* src/rank.c - a rank: collectives over its groups, block, embedding and head forward and backward,
   a stage's blocks forward and backward */
/* ---- ranks ----------------------------------------------------------------------------------- */

/* one action of a stage's step under interleaved 1F1B or zero-bubble (src/pipeline.c makes the lists) */
enum { MGT__PA_FORWARD, MGT__PA_BACKWARD, MGT__PA_SEND, MGT__PA_RECV, MGT__PA_WEIGHT /* zb: the deferred weight gradients (W) */ };
typedef struct mgt__pipe_action {
    int kind;        /* MGT__PA_* */
    int micro, chunk; /* the micro-batch, and which of the stage's chunks (0 .. V-1) */
    int grad;        /* send and recv: 0 a forward's output, 1 a backward's input gradient */
    int peer;        /* send and recv: the other stage */
    long long t;     /* when, in the unit-cost run; and how it sorts */
    int order, sender, seq;
} mgt__pipe_action;

/* One rank: its slice of the model, its optimizer shard, its communicator. A run has dp x cp x tp
   x pp of them; on CPU each is a thread with its share of the cores. */
struct mgt__rank {
    struct mgt_run *run;
    int rank, dpr, tpr, ppr, cpr, first, last, l0, nblocks;
    int replica;                  /* among the dp x cp ranks with the same parameters (dp_g): dpr x cp + cpr */
    int device;                   /* its GPU, or -1 on the CPU */
    mgt_gpu_reading gpu;          /* the GPU's last reading */
    mgt_backend *be;
    mgt_comm *comm;               /* the rank's communicator (the warm-up swaps in a quiet one) */
    mgt_group tp_g, dp_g, pp_g, emb_g, world_g; /* dp_g: the replicas (dp x cp ranks), over which gradients are summed and ZeRO shards */
    mgt_group cp_g;               /* the context-parallel ranks that share this rank's sequences (the ring of attention) */
    double ring_s;                /* of this step's send/receive seconds, the ring's (a communicator that times each call as it returns) */
    mgt_group kv_g;               /* the TP ranks that hold this rank's key/value heads (one rank unless they are replicated) */
    int *members;                 /* storage of the groups' rank lists */
    mgt__layout lay;
    mgt__shape shape;
    size_t shard;                 /* elements in this rank's shards: the sum of unit.size / replicas */
    void *params;                 /* the compute copy in the storage type: full (zero < 3) */
    float *grads;                 /* fp32 gradients, full (zero < 2) */
    void *pshard;                 /* the compute copy's shard (zero 3) */
    float *gshard;                /* the gradients' shard (zero >= 2) */
    float *m, *v;                 /* AdamW moments: full (zero 0) or the shard */
    float *master;                /* 16-bit storage: fp32 master weights, sharded as m and v; NULL in fp32 */
    void **unit_param;            /* where each unit's parameters (storage type) are now */
    float **unit_grad;            /* and its gradients */
    void *gather[2];              /* zero 3: gathered units */
    int gathered[2];              /* unit in each gather buffer, -1 none */
    long gather_ticket[2];        /* the deferred all-gather that filled it (a prefetch), or -1 */
    float *unit_gbuf[2];          /* zero >= 2: a block's gradients until they are reduce-scattered; two,
                                     so one block's reduce-scatter runs while the next computes */
    float *keep_gbuf[2];          /* zero >= 2: the embedding and head units' gradients, kept for the
                                     step because the tied embedding is reduced at its end */
    float *rs_tmp;                /* zero >= 2: reduce-scatter result before accumulation (slot 0, and the
                                     embedding and head units) */
    float *rs_tmp1;               /* and slot 1's */
    int gslot, gpending[2];       /* the slot the next block takes; the unit whose reduce-scatter each
                                     slot holds, not yet added to the shard (-1 none) */
    long gticket[2];              /* and that reduce-scatter's ticket (mgt_comm.defer) */
    size_t max_unit, max_block, keep_size[2];
    mgt__acts *acts;              /* activation sets: one per micro-batch in flight */
    int nsets;
    mgt__pipe_action *pipe[2]; /* pp_virtual > 1 or zb: the step's actions (mgt__pipeline_actions), [0] training, [1] forward only */
    int npipe[2];
    void *acts_block;
    size_t acts_bytes;
    mgt__grad_scratch gs;
    void *gs_block;
    size_t gs_bytes;
    int *bucket_of_unit;          /* DP all-reduce bucket of each unit (zero 0) */
    void *host_io;                /* host memory for one micro-batch's inputs and targets, then its losses */
    void *mirrored[5];            /* while mirrored (see mgt__mirror): params, pshard, master, m, v */
    int mirror_depth;             /* mirrors nest: the outermost makes and ends the copies */
    double loss_sum, norm;        /* norm: the global gradient norm of the last step, unscaled */
    int skipped;                  /* the last step's update was skipped (non-finite norm) */
    double step_s, comm_s, bubble_s;
    double total_compute_s, total_comm_s, total_bubble_s;
    mgt_comm_stats step_comm;     /* communication of the last step */
    mgt_result result;
    char error[1024];
    pthread_t thread;
    /* a backend with sum_squares_many (GPU): the step's statistics stay in its memory until one
       download, [0] the sum of squares, [1] the loss, then a double per rank of the world */
    double *dstat;
    const float **ss_x;           /* the vectors of this rank's sum of squares, and their lengths */
    size_t *ss_n;
};


/* tensor t's compute copy, in the storage type (typed float * for fp32 tools: index it only when
   shape.elt is 4), and its fp32 gradient */
/* rank `index` of plan p: its coordinates in the grid and its stage's blocks (a rank of this
   process, or another process's as its driver sees it) */
static void mgt__rank_locate(mgt__rank *rk, const mgt_plan *p, int index) {
    rk->rank = index;
    mgt_rank_coords(index, p->replicas, p->tp, &rk->replica, &rk->tpr, &rk->ppr);
    rk->dpr = rk->replica / p->cp;
    rk->cpr = rk->replica % p->cp;
    rk->first = rk->ppr == 0;
    rk->last = rk->ppr == p->pp - 1;
    rk->l0 = mgt__chunk_first(p, rk->ppr); /* its first chunk's first block (with pp_virtual > 1 more chunks follow, pp chunks apart) */
    rk->nblocks = mgt__stage_blocks(p, rk->ppr);
}

static float *mgt__P(mgt__rank *rk, int t) { /* NULL for an absent tensor (t < 0: a bias of a model without) */
    const mgt__tensor *x;
    if (t < 0) return NULL;
    x = &rk->lay.t[t];
    return (float *)(void *)((char *)rk->unit_param[x->unit] + (x->offset - rk->lay.u[x->unit].offset) * rk->shape.elt);
}
static float *mgt__G(mgt__rank *rk, int t) {
    const mgt__tensor *x;
    if (t < 0) return NULL;
    x = &rk->lay.t[t];
    return rk->unit_grad[x->unit] + (x->offset - rk->lay.u[x->unit].offset);
}

/* tensor indices in a rank's layout (-1: the model has no such tensor) */
static int mgt__t_head(const mgt__rank *rk) { return rk->first && rk->run->plan.pp == 1 && rk->run->plan.dims.tied ? 0 : rk->lay.n - 1; } /* the LM head's matrix */
static int mgt__t_wpe(const mgt__rank *rk) { return rk->lay.emb_tensors > 1 ? 1 : -1; }
static int mgt__t_block(const mgt__rank *rk, int b, int k) {
    return rk->lay.slot[k] < 0 ? -1 : (rk->first ? rk->lay.emb_tensors : 0) + b * rk->lay.per_block + rk->lay.slot[k];
}
static int mgt__t_lnf(const mgt__rank *rk) { return (rk->first ? rk->lay.emb_tensors : 0) + rk->nblocks * rk->lay.per_block; }
static int mgt__t_lnf_bias(const mgt__rank *rk) { return rk->run->plan.dims.rms ? -1 : mgt__t_lnf(rk) + 1; }
static int mgt__u_block(const mgt__rank *rk, int b) { return (rk->first ? 1 : 0) + b; }
static int mgt__u_head(const mgt__rank *rk) { return rk->lay.nu - 1; }
static int mgt__is_block_unit(const mgt__rank *rk, int u) { int b = u - (rk->first ? 1 : 0); return b >= 0 && b < rk->nblocks; }

/* collectives that skip groups of one, so a single rank makes no calls at all */
static mgt_result mgt__all_reduce(mgt__rank *rk, const mgt_group *g, float *buf, size_t n) {
    return g->size > 1 ? rk->comm->all_reduce(rk->comm, g, buf, n, MGT_F32) : MGT_OK;
}
/* activations and their gradients in the storage type: the communicator sums 16-bit in fp32 and
   rounds once, so a TP all-reduce rounds as an op's output does */
static mgt_result mgt__all_reduce_act(mgt__rank *rk, const mgt_group *g, void *buf, size_t n) {
    return g->size > 1 ? rk->comm->all_reduce(rk->comm, g, buf, n, rk->be->dtype) : MGT_OK;
}

/* sequence parallelism (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
   Transformer Models"; Megatron-LM's --sequence-parallel): between the tensor-parallel layers each
   TP rank holds its contiguous 1/tp of the rows (mgt__rows). A column-parallel GEMM reads every
   row: its input is all-gathered (R -> N rows). A row-parallel GEMM's partial products are summed
   and scattered (N -> R rows) where an all-reduce summed them. In the storage type: 16-bit sums in
   fp32, rounded once, as the all-reduce's. */
static mgt_result mgt__sp_gather(mgt__rank *rk, const void *mine, void *full) {
    return rk->comm->all_gather(rk->comm, &rk->tp_g, mine, full, (size_t)mgt__rows(&rk->shape) * (size_t)rk->shape.C, rk->be->dtype);
}
static mgt_result mgt__sp_scatter(mgt__rank *rk, const void *full, void *mine) {
    return rk->comm->reduce_scatter(rk->comm, &rk->tp_g, full, mine, (size_t)mgt__rows(&rk->shape) * (size_t)rk->shape.C, rk->be->dtype);
}
/* the TP sum of (N,C) partial products: all-reduced in place, or under sequence parallelism
   reduce-scattered into `mine`, the rank's R rows */
static mgt_result mgt__tp_sum(mgt__rank *rk, void *partial, void *mine) {
    const mgt__shape *s = &rk->shape;
    return s->sp ? mgt__sp_scatter(rk, partial, mine) : mgt__all_reduce_act(rk, &rk->tp_g, partial, (size_t)s->B * s->T * s->C);
}
/* what a GEMM over every row reads of the rank's rows `mine`: themselves, or gathered into `full` */
static mgt_result mgt__all_rows(mgt__rank *rk, const void *mine, void *full, const void **rows) {
    *rows = mine;
    if (!rk->shape.sp) return MGT_OK;
    *rows = full;
    return mgt__sp_gather(rk, mine, full);
}

/* a double summed over a group in member order: all-gathered as raw bytes, so it stays a double
   and every member adds the same numbers in the same order */
static mgt_result mgt__sum_over(mgt__rank *rk, const mgt_group *g, double *value) {
    double stack[64], *all = g->size <= 64 ? stack : (double *)MGT_MALLOC(sizeof(double) * (size_t)g->size), sum = 0;
    int i;
    mgt_result res;
    if (!all) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    res = rk->comm->all_gather(rk->comm, g, value, all, 2, MGT_F32); /* 2 x 4 bytes: one double each */
    for (i = 0; i < g->size && res == MGT_OK; i++) sum += all[i];
    if (all != stack) MGT_FREE(all);
    if (res == MGT_OK) *value = sum;
    return res;
}

/* communication that the compute next does not read, and the point where it must have arrived
   (see mgt_comm.defer) */
static long mgt__comm_defer(mgt__rank *rk) { return rk->comm->defer ? rk->comm->defer(rk->comm) : -1; }
static mgt_result mgt__comm_sync(mgt__rank *rk, long ticket) { return rk->comm->sync ? rk->comm->sync(rk->comm, ticket) : MGT_OK; }

/* ZeRO-3: brings a unit's parameters into a gather buffer (all-gather of the DP shards); a unit
   prefetched earlier is waited for here */
static mgt_result mgt__fetch(mgt__rank *rk, int u) {
    const mgt__unit *un = &rk->lay.u[u];
    size_t s = un->size / (size_t)rk->run->plan.replicas;
    int slot;
    if (rk->run->plan.zero < 3) return MGT_OK;
    for (slot = 0; slot < 2; slot++)
        if (rk->gathered[slot] == u) return mgt__comm_sync(rk, rk->gather_ticket[slot]);
    slot = rk->gathered[0] < 0 ? 0 : 1;
    if (rk->gathered[slot] >= 0) rk->unit_param[rk->gathered[slot]] = NULL;
    rk->gather_ticket[slot] = -1; /* waited for by the compute at once, unless a prefetch defers it */
    MGT__TRY(rk->comm->all_gather(rk->comm, &rk->dp_g, (char *)rk->pshard + un->shard_offset * rk->shape.elt, rk->gather[slot], s, rk->be->dtype));
    rk->gathered[slot] = u;
    rk->unit_param[u] = rk->gather[slot];
    return MGT_OK;
}
/* ZeRO-3: gathers the unit needed next while a slot is free, so that a backend with a second
   stream overlaps it with this unit's compute (on CPU ranks the order is what matters) */
static mgt_result mgt__prefetch(mgt__rank *rk, int u) {
    long ticket;
    if (rk->run->plan.zero < 3 || u < 0 || u >= rk->lay.nu || rk->unit_param[u]) return MGT_OK;
    if (rk->gathered[0] >= 0 && rk->gathered[1] >= 0) return MGT_OK;
    ticket = mgt__comm_defer(rk);
    MGT__TRY(mgt__fetch(rk, u));
    rk->gather_ticket[rk->gathered[0] == u ? 0 : 1] = ticket;
    return MGT_OK;
}
static void mgt__release(mgt__rank *rk, int u) {
    int slot;
    if (rk->run->plan.zero < 3) return;
    for (slot = 0; slot < 2; slot++)
        if (rk->gathered[slot] == u) { rk->gathered[slot] = -1; rk->unit_param[u] = NULL; }
}

/* ZeRO-2/3: a block's gradients are ready: reduce-scatter them and add this rank's slice to its
   gradient shard; the embedding and head units wait for the end of the step (tied embedding) */
/* ZeRO-2/3: the reduce-scatter a slot holds, waited for and added to the gradient shard */
static mgt_result mgt__block_grads_flush(mgt__rank *rk, int slot) {
    int u = rk->gpending[slot];
    if (u < 0) return MGT_OK;
    MGT__TRY(mgt__comm_sync(rk, rk->gticket[slot]));
    rk->be->add_inplace(rk->be, rk->gshard + rk->lay.u[u].shard_offset, slot ? rk->rs_tmp1 : rk->rs_tmp, rk->lay.u[u].size / (size_t)rk->run->plan.replicas);
    rk->gpending[slot] = -1;
    return MGT_OK;
}
/* the block's gradients are complete: their reduce-scatter is issued, and added to the shard when
   the next block's are complete (or at the end of the step), so a communicator with its own
   stream runs it while the next block computes */
static mgt_result mgt__block_grads_done(mgt__rank *rk, int u) {
    int slot = rk->gslot;
    if (rk->run->plan.zero < 2) return MGT_OK;
    MGT__TRY(mgt__block_grads_flush(rk, 1 - slot)); /* the previous block's, which ran while this one computed */
    rk->gticket[slot] = mgt__comm_defer(rk);
    MGT__TRY(rk->comm->reduce_scatter(rk->comm, &rk->dp_g, rk->unit_gbuf[slot], slot ? rk->rs_tmp1 : rk->rs_tmp,
                                      rk->lay.u[u].size / (size_t)rk->run->plan.replicas, MGT_F32));
    rk->gpending[slot] = u;
    rk->gslot = 1 - slot;
    return MGT_OK;
}
static mgt_result mgt__block_grads_begin(mgt__rank *rk, int u) {
    int slot = rk->gslot;
    if (rk->run->plan.zero < 2) return MGT_OK;
    MGT__TRY(mgt__block_grads_flush(rk, slot)); /* the slot's previous block has arrived */
    rk->be->zero(rk->be, rk->unit_gbuf[slot], sizeof(float) * rk->lay.u[u].size);
    rk->unit_grad[u] = rk->unit_gbuf[slot];
    return MGT_OK;
}

/* the block's normalisations: LayerNorm (GPT-2) or RMSNorm (Llama), into the same activations */
static void mgt__norm_forward(mgt__rank *rk, void *out, float *mean, float *rstd, const void *inp, int t_weight, int t_bias, int N) {
    mgt_backend *be = rk->be;
    if (rk->run->plan.dims.rms) be->rmsnorm_forward(be, out, rstd, inp, mgt__P(rk, t_weight), (float)rk->run->plan.cfg.model.norm_eps, N, rk->shape.C);
    else be->layernorm_forward(be, out, mean, rstd, inp, mgt__P(rk, t_weight), mgt__P(rk, t_bias), N, rk->shape.C);
}
static void mgt__norm_backward(mgt__rank *rk, void *dinp, const void *dout, const void *inp, const float *mean, const float *rstd, int t_weight,
                               int t_bias, int N) {
    mgt_backend *be = rk->be;
    if (rk->run->plan.dims.rms) be->rmsnorm_backward(be, dinp, mgt__G(rk, t_weight), dout, inp, mgt__P(rk, t_weight), rstd, N, rk->shape.C);
    else be->layernorm_backward(be, dinp, mgt__G(rk, t_weight), mgt__G(rk, t_bias), dout, inp, mgt__P(rk, t_weight), mean, rstd, N, rk->shape.C);
}

/* ---- context parallelism: the rank's two chunks of the sequence, and ring attention -------------

   With parallel.cp = P the sequence is cut into 2P chunks and context-parallel rank i holds chunks i
   and 2P - 1 - i (rows (2, B, T / 2)), so that every rank has the same share of causal attention's
   work (Megatron-LM's and torchtitan's load balance). Everything but attention is row by row; the
   positions (GPT-2's wpe, RoPE) are the chunks'. Attention is a ring (Liu et al. 2023, "Ring
   Attention"): each rank's key/value block goes around the CP group; at step r a rank holds the
   block of rank i - r, attends its own queries to it (a chunk's own keys causally, an earlier
   chunk's in full, a later one's not at all) and merges the result by log-sum-exp, while the next
   block arrives. The backward passes the blocks around again, with their gradients travelling with
   them, which are home after P steps. */
static int mgt__cp_chunk(int cpr, int cp, int h) { return h == 0 ? cpr : 2 * cp - 1 - cpr; } /* global chunk of local chunk h */
#define MGT__AT(p, i, elt) ((void *)((char *)(p) + (size_t)(i) * (size_t)(elt))) /* element i of a buffer of elt-byte elements */

/* RoPE on a qkv buffer (or its gradient), at the positions of the rank's rows */
static void mgt__rope(mgt__rank *rk, void *qkv, int backward) {
    const mgt__shape *s = &rk->shape;
    const mgt_dims *d = &rk->run->plan.dims;
    int NKVl = s->KVl / d->hs, h, Tc = s->T / 2, W = s->Cl + 2 * s->KVl;
    float theta = (float)rk->run->plan.cfg.model.rope_theta;
    void (*op)(mgt_backend *, void *, int, int, int, int, int, float, int) = backward ? rk->be->rope_backward : rk->be->rope_forward;
    if (s->cp == 1) { op(rk->be, qkv, s->B, s->T, s->NHl, NKVl, d->hs, theta, 0); return; }
    for (h = 0; h < 2; h++)
        op(rk->be, MGT__AT(qkv, (size_t)h * s->B * Tc * W, s->elt), s->B, Tc, s->NHl, NKVl, d->hs, theta, mgt__cp_chunk(rk->cpr, s->cp, h) * Tc);
}

/* the ring's neighbours */
static int mgt__cp_next(const mgt__rank *rk) { return rk->cp_g.ranks[(rk->cpr + 1) % rk->cp_g.size]; }
static int mgt__cp_prev(const mgt__rank *rk) { return rk->cp_g.ranks[(rk->cpr + rk->cp_g.size - 1) % rk->cp_g.size]; }

/* a block on to the next rank of the ring while the previous rank's arrives; its seconds are kept
   apart from the pipeline's (the bubble) */
static mgt_result mgt__ring_pass(mgt__rank *rk, const void *send, void *recv, size_t count, int dtype) {
    double before = rk->comm->stats.seconds[MGT_COLL_SEND_RECV];
    mgt_result res = rk->comm->sendrecv(rk->comm, mgt__cp_next(rk), send, mgt__cp_prev(rk), recv, count, dtype);
    rk->ring_s += rk->comm->stats.seconds[MGT_COLL_SEND_RECV] - before;
    return res;
}

/* the pairs of (query chunk, key/value chunk) that attend at ring step `step`, for forward and
   backward alike: calls visit(q chunk, kv chunk, causal, first of the query chunk) */
#define MGT__RING_PAIRS(rk, step, BODY)                                                                             \
    do {                                                                                                           \
        int mgt__qh, mgt__kh, mgt__kv_owner = ((rk)->cpr - (step) + (rk)->shape.cp) % (rk)->shape.cp;                   \
        for (mgt__qh = 0; mgt__qh < 2; mgt__qh++)                                                                  \
            for (mgt__kh = 0; mgt__kh < 2; mgt__kh++) {                                                            \
                int qi = mgt__cp_chunk((rk)->cpr, (rk)->shape.cp, mgt__qh), kj = mgt__cp_chunk(mgt__kv_owner, (rk)->shape.cp, mgt__kh); \
                int qh = mgt__qh, kh = mgt__kh, causal = qi == kj, first = (step) == 0 && mgt__kh == 0;           \
                if (kj > qi) continue; /* a later chunk: masked whole */                                           \
                (void)first;                                                                                       \
                BODY;                                                                                              \
            }                                                                                                      \
    } while (0)

/* forward: atty (N, Cl) and the log-sum-exps (att) of the layer from its qkv */
static mgt_result mgt__ring_attention_forward(mgt__rank *rk, mgt__layer_acts *a) {
    mgt_backend *be = rk->be;
    const mgt__shape *s = &rk->shape;
    mgt__grad_scratch *g = &rk->gs;
    int B = s->B, Tc = s->T / 2, N = B * s->T, KV2 = 2 * s->KVl, W = s->Cl + KV2, NKVl = s->KVl / rk->run->plan.dims.hs, step, dt = be->dtype;
    size_t rows = (size_t)B * Tc, e = s->elt;
    be->copy_cols(be, g->kv[0], dt, KV2, MGT__AT(a->qkv, s->Cl, e), dt, W, (size_t)N, KV2);
    for (step = 0; step < s->cp; step++) {
        int cur = step & 1;
        long ticket = -1;
        if (step + 1 < s->cp) { /* the next block arrives while this one is attended to */
            ticket = mgt__comm_defer(rk);
            MGT__TRY(mgt__ring_pass(rk, g->kv[cur], g->kv[1 - cur], (size_t)N * KV2, dt));
        }
        MGT__RING_PAIRS(rk, step,
                        be->attention_part_forward(be, g->o + (size_t)qh * rows * s->Cl, (float *)a->att + (size_t)qh * B * s->NHl * Tc,
                                                   MGT__AT(a->qkv, (size_t)qh * rows * W, e), MGT__AT(g->kv[cur], (size_t)kh * rows * KV2, e), KV2, B,
                                                   Tc, s->Cl, s->NHl, NKVl, causal, first));
        MGT__TRY(mgt__comm_sync(rk, ticket));
    }
    be->cast(be, a->atty, dt, g->o, MGT_F32, (size_t)N * s->Cl);
    return MGT_OK;
}

/* backward: dqkv (N, W) from d(atty) */
static mgt_result mgt__ring_attention_backward(mgt__rank *rk, mgt__layer_acts *a, void *dqkv, const void *datty) {
    mgt_backend *be = rk->be;
    const mgt__shape *s = &rk->shape;
    mgt__grad_scratch *g = &rk->gs;
    int B = s->B, Tc = s->T / 2, N = B * s->T, KV2 = 2 * s->KVl, W = s->Cl + KV2, NKVl = s->KVl / rk->run->plan.dims.hs, step, dt = be->dtype;
    size_t rows = (size_t)B * Tc, e = s->elt;
    be->zero(be, g->dq, sizeof(float) * (size_t)N * s->Cl);
    be->zero(be, g->dkv[0], sizeof(float) * (size_t)N * KV2);
    be->copy_cols(be, g->kv[0], dt, KV2, MGT__AT(a->qkv, s->Cl, e), dt, W, (size_t)N, KV2);
    for (step = 0; step < s->cp; step++) {
        int cur = step & 1;
        long ticket = -1;
        if (step + 1 < s->cp) {
            ticket = mgt__comm_defer(rk);
            MGT__TRY(mgt__ring_pass(rk, g->kv[cur], g->kv[1 - cur], (size_t)N * KV2, dt));
        }
        MGT__RING_PAIRS(rk, step,
                        be->attention_part_backward(be, g->dq + (size_t)qh * rows * s->Cl, g->dkv[cur] + (size_t)kh * rows * KV2,
                                                    MGT__AT(datty, (size_t)qh * rows * s->Cl, e), MGT__AT(a->atty, (size_t)qh * rows * s->Cl, e),
                                                    (const float *)a->att + (size_t)qh * B * s->NHl * Tc, MGT__AT(a->qkv, (size_t)qh * rows * W, e),
                                                    MGT__AT(g->kv[cur], (size_t)kh * rows * KV2, e), KV2, B, Tc, s->Cl, s->NHl, NKVl, causal));
        MGT__TRY(mgt__comm_sync(rk, ticket));
        /* the block's gradient goes on with it; after the last step each is back with its owner */
        MGT__TRY(mgt__ring_pass(rk, g->dkv[cur], g->dkv[1 - cur], (size_t)N * KV2, MGT_F32));
    }
    be->copy_cols(be, dqkv, dt, W, g->dq, MGT_F32, s->Cl, (size_t)N, s->Cl);
    be->copy_cols(be, MGT__AT(dqkv, s->Cl, e), dt, W, g->dkv[s->cp & 1], MGT_F32, KV2, (size_t)N, KV2);
    return MGT_OK;
}

/* forward of block b: reads resid[b], writes resid[b+1]. The norms, residual adds and row-parallel
   biases run on the rank's R rows (all N but under sequence parallelism), the GEMMs and attention
   on all N (gathered into gs.full under sequence parallelism, where the row-parallel GEMMs also
   write their partial products before the reduce-scatter) */
static mgt_result mgt__block_forward(mgt__rank *rk, mgt__acts *A, int b) {
    mgt_backend *be = rk->be;
    const mgt__shape *s = &rk->shape;
    const mgt_dims *d = &rk->run->plan.dims;
    mgt__layer_acts *a = &A->layer[b];
    int C = s->C, N = s->B * s->T, R = mgt__rows(s), NKVl = s->KVl / d->hs;
    const void *x = A->resid[b], *rows;
    void *out = A->resid[b + 1], *full = rk->gs.full;
#define MGT__BP(k) mgt__P(rk, mgt__t_block(rk, b, k))
#define MGT__BT(k) mgt__t_block(rk, b, k)
    mgt__norm_forward(rk, a->ln1, a->ln1_mean, a->ln1_rstd, x, MGT__BT(MGT__LN1W), MGT__BT(MGT__LN1B), R);
    MGT__TRY(mgt__all_rows(rk, a->ln1, full, &rows));
    be->matmul_forward(be, a->qkv, rows, MGT__BP(MGT__QKVW), MGT__BP(MGT__QKVB), N, C, s->Cl + 2 * s->KVl);
    if (d->rope) mgt__rope(rk, a->qkv, 0);
    if (s->cp > 1) MGT__TRY(mgt__ring_attention_forward(rk, a));
    else be->attention_forward(be, a->atty, a->att, a->qkv, s->B, s->T, s->Cl, s->NHl, NKVl);
    be->matmul_forward(be, s->sp ? full : a->res2, a->atty, MGT__BP(MGT__PROJW), NULL, N, s->Cl, C);
    MGT__TRY(mgt__tp_sum(rk, s->sp ? full : a->res2, a->res2)); /* row-parallel: sum the partial products */
    if (!d->rms && MGT__BT(MGT__PROJB) >= 0) /* GPT-2: the residual and LayerNorm in one pass */
        be->residual_layernorm_forward(be, a->res2, a->ln2, a->ln2_mean, a->ln2_rstd, x, MGT__BP(MGT__PROJB), MGT__BP(MGT__LN2W), MGT__BP(MGT__LN2B), R, C);
    else {
        be->bias_residual(be, a->res2, x, MGT__BP(MGT__PROJB), R, C);
        mgt__norm_forward(rk, a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, MGT__BT(MGT__LN2W), MGT__BT(MGT__LN2B), R);
    }
    MGT__TRY(mgt__all_rows(rk, a->ln2, full, &rows));
    if (d->swiglu) {
        be->matmul_forward(be, a->fch, rows, MGT__BP(MGT__FCW), MGT__BP(MGT__FCB), N, C, s->Fl);
        be->swiglu_forward(be, a->fch_gelu, a->fch, N, s->Hl);
    } else
        be->matmul_gelu_forward(be, a->fch_gelu, a->fch, rows, MGT__BP(MGT__FCW), MGT__BP(MGT__FCB), N, C, s->Fl);
    be->matmul_forward(be, s->sp ? full : out, a->fch_gelu, MGT__BP(MGT__FCPROJW), NULL, N, s->Hl, C);
    MGT__TRY(mgt__tp_sum(rk, s->sp ? full : out, out));
    be->bias_residual(be, out, a->res2, MGT__BP(MGT__FCPROJB), R, C);
#undef MGT__BP
#undef MGT__BT
    return MGT_OK;
}

/* backward of block b: gs.dres holds d(resid[b+1]) on entry and d(resid[b]) on exit, the rank's R
   rows. Under sequence parallelism gs.full takes, in turn: dres gathered for the MLP's row-parallel
   GEMM, ln2 gathered again for c_fc's weight gradient (the norms keep only their R rows), ln2's
   gradient reduce-scattered, dres gathered for attention's row-parallel GEMM, ln1 gathered again,
   ln1's gradient reduce-scattered. Under pp_schedule = zb (shape.zb) this is the input-gradient
   pass B: the matmuls' weight gradients wait for mgt__block_weight_grads (W), their output gradients
   kept in the block's activations (gathered straight there under sequence parallelism, copied
   otherwise), and the norms' inputs are not gathered again here but there; the norms' own weight
   gradients come with their input gradients, in B. */
static mgt_result mgt__block_backward(mgt__rank *rk, mgt__acts *A, int b) {
    mgt_backend *be = rk->be;
    const mgt__shape *s = &rk->shape;
    const mgt_dims *d = &rk->run->plan.dims;
    mgt__layer_acts *a = &A->layer[b];
    mgt__grad_scratch *g = &rk->gs;
    int C = s->C, N = s->B * s->T, R = mgt__rows(s), NKVl = s->KVl / d->hs, zb = s->zb;
    const void *rows = NULL, *dout;
    const void *dln = s->sp ? g->full : g->dln; /* a norm's output gradient, the rank's rows, summed over TP */
    void *dfch = zb ? a->dfch : g->dfch, *dqkv = zb ? a->dqkv : g->dqkv;
#define MGT__BP(k) mgt__P(rk, mgt__t_block(rk, b, k))
#define MGT__BG(k) (zb ? NULL : mgt__G(rk, mgt__t_block(rk, b, k))) /* zb: in W */
#define MGT__BT(k) mgt__t_block(rk, b, k)
    /* the biases' gradients come with their matmul's (the CUDA backend: in its weight GEMM); a
       row-parallel layer's bias is whole on every TP rank, its gradient the column sums of every
       row of dres (gathered under sequence parallelism), the same on each */
    MGT__TRY(mgt__all_rows(rk, g->dres, zb ? a->dmlp : g->full, &dout));
    if (zb && dout != a->dmlp) be->cast(be, a->dmlp, be->dtype, dout, be->dtype, (size_t)N * C);
    if (d->swiglu) { /* d(swiglu output) in dact, then d(gate, up) in dfch */
        be->matmul_backward(be, g->dact, MGT__BG(MGT__FCPROJW), MGT__BG(MGT__FCPROJB), dout, a->fch_gelu, MGT__BP(MGT__FCPROJW), N, s->Hl, C);
        be->swiglu_backward(be, dfch, a->fch, g->dact, N, s->Hl);
    } else
        be->matmul_gelu_backward(be, dfch, MGT__BG(MGT__FCPROJW), MGT__BG(MGT__FCPROJB), dout, a->fch_gelu, MGT__BP(MGT__FCPROJW), a->fch, N,
                                 s->Hl, C);
    if (!zb) MGT__TRY(mgt__all_rows(rk, a->ln2, g->full, &rows));
    be->matmul_backward(be, g->dln, MGT__BG(MGT__FCW), MGT__BG(MGT__FCB), dfch, rows, MGT__BP(MGT__FCW), N, C, s->Fl);
    MGT__TRY(mgt__tp_sum(rk, g->dln, g->full)); /* column-parallel: sum the input gradients */
    mgt__norm_backward(rk, g->dres, dln, a->res2, a->ln2_mean, a->ln2_rstd, MGT__BT(MGT__LN2W), MGT__BT(MGT__LN2B), R);
    /* dln carries d(atty) (N,Cl), then d(ln1) */
    MGT__TRY(mgt__all_rows(rk, g->dres, zb ? a->dattn : g->full, &dout));
    if (zb && dout != a->dattn) be->cast(be, a->dattn, be->dtype, dout, be->dtype, (size_t)N * C);
    be->matmul_backward(be, g->dln, MGT__BG(MGT__PROJW), MGT__BG(MGT__PROJB), dout, a->atty, MGT__BP(MGT__PROJW), N, s->Cl, C);
    if (s->cp > 1) MGT__TRY(mgt__ring_attention_backward(rk, a, dqkv, g->dln));
    else be->attention_backward(be, dqkv, g->dln, a->qkv, a->atty, a->att, s->B, s->T, s->Cl, s->NHl, NKVl);
    if (d->rope) mgt__rope(rk, dqkv, 1);
    if (!zb) MGT__TRY(mgt__all_rows(rk, a->ln1, g->full, &rows));
    be->matmul_backward(be, g->dln, MGT__BG(MGT__QKVW), MGT__BG(MGT__QKVB), dqkv, rows, MGT__BP(MGT__QKVW), N, C, s->Cl + 2 * s->KVl);
    MGT__TRY(mgt__tp_sum(rk, g->dln, g->full));
    mgt__norm_backward(rk, g->dres, dln, A->resid[b], a->ln1_mean, a->ln1_rstd, MGT__BT(MGT__LN1W), MGT__BT(MGT__LN1B), R);
#undef MGT__BP
#undef MGT__BG
#undef MGT__BT
    return MGT_OK;
}

/* pp_schedule = zb, the weight-gradient pass W of block b: its four matmuls' weight and bias
   gradients from the output gradients B kept and the inputs the forward kept (the norms' outputs
   gathered again under sequence parallelism, as the joint backward does); reads no weights */
static mgt_result mgt__block_weight_grads(mgt__rank *rk, mgt__acts *A, int b) {
    mgt_backend *be = rk->be;
    const mgt__shape *s = &rk->shape;
    mgt__layer_acts *a = &A->layer[b];
    int C = s->C, N = s->B * s->T;
    const void *rows;
#define MGT__BG(k) mgt__G(rk, mgt__t_block(rk, b, k))
    be->matmul_backward(be, NULL, MGT__BG(MGT__FCPROJW), MGT__BG(MGT__FCPROJB), a->dmlp, a->fch_gelu, NULL, N, s->Hl, C);
    MGT__TRY(mgt__all_rows(rk, a->ln2, rk->gs.full, &rows));
    be->matmul_backward(be, NULL, MGT__BG(MGT__FCW), MGT__BG(MGT__FCB), a->dfch, rows, NULL, N, C, s->Fl);
    be->matmul_backward(be, NULL, MGT__BG(MGT__PROJW), MGT__BG(MGT__PROJB), a->dattn, a->atty, NULL, N, s->Cl, C);
    MGT__TRY(mgt__all_rows(rk, a->ln1, rk->gs.full, &rows));
    be->matmul_backward(be, NULL, MGT__BG(MGT__QKVW), MGT__BG(MGT__QKVB), a->dqkv, rows, NULL, N, C, s->Cl + 2 * s->KVl);
#undef MGT__BG
    return MGT_OK;
}

/* the first stage's embedding: vocabulary-parallel lookups summed over TP (under sequence
   parallelism, reduce-scattered: the rank's rows), positions added once */
static mgt_result mgt__embed_forward(mgt__rank *rk, mgt__acts *A) {
    const mgt__shape *s = &rk->shape;
    void *partial = s->sp ? rk->gs.full : A->resid[0];
    MGT__TRY(mgt__fetch(rk, 0));
    const float *wpe = rk->tpr == 0 ? mgt__P(rk, mgt__t_wpe(rk)) : NULL;
    if (s->cp == 1) rk->be->encoder_forward(rk->be, partial, A->inputs, mgt__P(rk, 0), rk->tpr * s->Vl, s->Vl, wpe, s->B, s->T, s->C);
    else { /* each chunk with its positions */
        int h, Tc = s->T / 2;
        size_t rows = (size_t)s->B * Tc;
        for (h = 0; h < 2; h++)
            rk->be->encoder_forward(rk->be, MGT__AT(partial, h * rows * s->C, s->elt), A->inputs + h * rows, mgt__P(rk, 0), rk->tpr * s->Vl, s->Vl,
                                    wpe ? MGT__AT(wpe, (size_t)mgt__cp_chunk(rk->cpr, s->cp, h) * Tc * s->C, s->elt) : NULL, s->B, Tc, s->C);
    }
    return mgt__tp_sum(rk, partial, A->resid[0]);
}

/* the last stage's head: final LayerNorm, vocabulary-parallel logits and cross-entropy. Each TP
   rank sees only its Vl logits; the softmax statistics of all are gathered (3 floats a row), never
   the logits. Returns the summed loss; with grad_scale != 0 the logits become their gradients. */
static mgt_result mgt__head_forward(mgt__rank *rk, mgt__acts *A, float grad_scale, double *loss_sum) {
    const mgt__shape *s = &rk->shape;
    mgt_backend *be = rk->be;
    int N = s->B * s->T, i, V = rk->run->plan.cfg.model.vocab_size, u_head = mgt__u_head(rk);
    float *part = A->xent + (size_t)rk->tpr * (size_t)N * 3;
    const void *rows;
    double sum = 0;
    MGT__TRY(mgt__fetch(rk, u_head));
    MGT__TRY(mgt__fetch(rk, rk->lay.t[mgt__t_head(rk)].unit));
    mgt__norm_forward(rk, A->lnf, A->lnf_mean, A->lnf_rstd, A->resid[s->nblocks], mgt__t_lnf(rk), mgt__t_lnf_bias(rk), mgt__rows(s));
    MGT__TRY(mgt__all_rows(rk, A->lnf, rk->gs.full, &rows)); /* the logits of every row */
    be->matmul_forward(be, A->logits, rows, mgt__P(rk, mgt__t_head(rk)), NULL, N, s->C, s->Vl);
    be->xent_partial(be, part, A->logits, A->targets, N, rk->tpr * s->Vl, s->Vl, V);
    if (rk->tp_g.size > 1) MGT__TRY(rk->comm->all_gather(rk->comm, &rk->tp_g, part, A->xent, (size_t)N * 3, MGT_F32));
    be->xent_finish(be, A->losses, A->logits, A->xent, s->tp, A->targets, N, rk->tpr * s->Vl, s->Vl, V, grad_scale);
    if (rk->dstat) be->sum_doubles(be, rk->dstat + 1, A->losses, (size_t)N, 1); /* stays on the device until the step's download */
    else {
        be->download(be, rk->host_io, A->losses, sizeof(double) * (size_t)N);
        for (i = 0; i < N; i++) sum += ((const double *)rk->host_io)[i];
    }
    *loss_sum = sum;
    mgt__release(rk, u_head);
    mgt__release(rk, rk->lay.t[mgt__t_head(rk)].unit);
    return MGT_OK;
}

static mgt_result mgt__head_backward(mgt__rank *rk, mgt__acts *A) {
    const mgt__shape *s = &rk->shape;
    mgt_backend *be = rk->be;
    int N = s->B * s->T, R = mgt__rows(s), t_lnf = mgt__t_lnf(rk), t_wte = mgt__t_head(rk);
    const void *rows;
    MGT__TRY(mgt__fetch(rk, mgt__u_head(rk)));
    MGT__TRY(mgt__fetch(rk, rk->lay.t[t_wte].unit));
    if (s->zb) /* the head's weight gradient waits for W (mgt__head_weight_grad) */
        be->matmul_backward(be, rk->gs.dln, NULL, NULL, A->logits, NULL, mgt__P(rk, t_wte), N, s->C, s->Vl);
    else {
        MGT__TRY(mgt__all_rows(rk, A->lnf, rk->gs.full, &rows)); /* gathered again for the head's weight gradient */
        be->matmul_backward(be, rk->gs.dln, mgt__G(rk, t_wte), NULL, A->logits, rows, mgt__P(rk, t_wte), N, s->C, s->Vl);
    }
    MGT__TRY(mgt__tp_sum(rk, rk->gs.dln, rk->gs.full));
    be->zero(be, rk->gs.dres, (size_t)R * s->C * s->elt);
    mgt__norm_backward(rk, rk->gs.dres, s->sp ? rk->gs.full : rk->gs.dln, A->resid[s->nblocks], A->lnf_mean, A->lnf_rstd, t_lnf, mgt__t_lnf_bias(rk), R);
    mgt__release(rk, mgt__u_head(rk));
    mgt__release(rk, rk->lay.t[t_wte].unit);
    return MGT_OK;
}

/* pp_schedule = zb: the head's weight gradient (W), from the logits' gradient and ln_f's output the
   micro-batch's activations keep */
static mgt_result mgt__head_weight_grad(mgt__rank *rk, mgt__acts *A) {
    const mgt__shape *s = &rk->shape;
    int t_wte = mgt__t_head(rk);
    const void *rows;
    MGT__TRY(mgt__fetch(rk, rk->lay.t[t_wte].unit));
    MGT__TRY(mgt__all_rows(rk, A->lnf, rk->gs.full, &rows));
    rk->be->matmul_backward(rk->be, NULL, mgt__G(rk, t_wte), NULL, A->logits, rows, NULL, s->B * s->T, s->C, s->Vl);
    mgt__release(rk, rk->lay.t[t_wte].unit);
    return MGT_OK;
}

/* forward of blocks [b0, b1) of this stage for one micro-batch, after the embedding when `embed`
   (activations already received on later stages) */
static mgt_result mgt__blocks_forward(mgt__rank *rk, mgt__acts *A, int b0, int b1, int embed) {
    int b;
    if (embed) {
        MGT__TRY(mgt__fetch(rk, 0));
        if (b1 > b0) MGT__TRY(mgt__prefetch(rk, mgt__u_block(rk, b0)));
        MGT__TRY(mgt__embed_forward(rk, A));
        mgt__release(rk, 0);
    }
    for (b = b0; b < b1; b++) {
        int u = mgt__u_block(rk, b);
        MGT__TRY(mgt__fetch(rk, u));
        if (b + 1 < b1) MGT__TRY(mgt__prefetch(rk, u + 1));
        MGT__TRY(mgt__block_forward(rk, A, b));
        mgt__release(rk, u);
    }
    return MGT_OK;
}
/* forward of this stage for one micro-batch */
static mgt_result mgt__stage_forward(mgt__rank *rk, mgt__acts *A) { return mgt__blocks_forward(rk, A, 0, rk->nblocks, rk->first); }

/* the DP all-reduce of bucket k once the last micro-batch's backward finished its units */
static mgt_result mgt__bucket_done(mgt__rank *rk, int u) {
    const mgt_plan *p = &rk->run->plan;
    int k, first = u, last = u;
    if (p->zero != 0 || rk->dp_g.size == 1) return MGT_OK;
    k = rk->bucket_of_unit[u];
    while (first > 0 && rk->bucket_of_unit[first - 1] == k) first--;
    while (last + 1 < rk->lay.nu && rk->bucket_of_unit[last + 1] == k) last++;
    if (u != first) return MGT_OK; /* backward finishes a bucket at its lowest unit */
    mgt__comm_defer(rk); /* read again only by the update */
    return mgt__all_reduce(rk, &rk->dp_g, rk->grads + rk->lay.u[first].offset,
                           rk->lay.u[last].offset + rk->lay.u[last].size - rk->lay.u[first].offset);
}

/* recompute = selective: block b's norm and GELU (or SwiGLU) outputs again, from the residual
   streams and the GEMM output it kept; no communication, a few passes over memory */
static void mgt__block_recompute_selective(mgt__rank *rk, mgt__acts *A, int b) {
    const mgt__shape *s = &rk->shape;
    mgt__layer_acts *a = &A->layer[b];
    int N = s->B * s->T, R = mgt__rows(s); /* the norms on the rank's rows (sequence parallelism: 1/tp of them) */
    mgt__norm_forward(rk, a->ln1, a->ln1_mean, a->ln1_rstd, A->resid[b], mgt__t_block(rk, b, MGT__LN1W), mgt__t_block(rk, b, MGT__LN1B), R);
    mgt__norm_forward(rk, a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, mgt__t_block(rk, b, MGT__LN2W), mgt__t_block(rk, b, MGT__LN2B), R);
    if (rk->run->plan.dims.swiglu) rk->be->swiglu_forward(rk->be, a->fch_gelu, a->fch, N, s->Hl);
    else rk->be->gelu_forward(rk->be, a->fch_gelu, a->fch, (size_t)N * s->Hl);
}

/* backward of blocks [b0, b1) of this stage for one micro-batch, after the head when `head`, then
   the embedding's when `embed`; gs.dres holds the gradient of the blocks' output (received from the
   next stage) unless `head`. last_micro: the last backward of these units in the step */
static mgt_result mgt__blocks_backward(mgt__rank *rk, mgt__acts *A, int b0, int b1, int head, int embed, int last_micro) {
    int b, recompute = rk->shape.recompute;
    if (head) {
        MGT__TRY(mgt__head_backward(rk, A));
        if (last_micro && !rk->shape.zb) MGT__TRY(mgt__bucket_done(rk, mgt__u_head(rk))); /* with pp = 1 the head is unit nu - 1, never 0 */
    }
    for (b = b1 - 1; b >= b0; b--) {
        int u = mgt__u_block(rk, b);
        MGT__TRY(mgt__fetch(rk, u));
        if (b > b0) MGT__TRY(mgt__prefetch(rk, u - 1));
        MGT__TRY(mgt__block_grads_begin(rk, u));
        if (recompute == MGT_RECOMPUTE_FULL) MGT__TRY(mgt__block_forward(rk, A, b)); /* rebuild this block's activations from resid[b] */
        if (recompute == MGT_RECOMPUTE_SELECTIVE && !rk->shape.zb) mgt__block_recompute_selective(rk, A, b); /* zb: B reads none of them, W rebuilds them */
        MGT__TRY(mgt__block_backward(rk, A, b));
        mgt__release(rk, u);
        MGT__TRY(mgt__block_grads_done(rk, u));
        if (last_micro && !rk->shape.zb) MGT__TRY(mgt__bucket_done(rk, u)); /* zb: complete after W */
    }
    if (embed) {
        const mgt__shape *s = &rk->shape;
        const void *dout;
        MGT__TRY(mgt__fetch(rk, 0));
        MGT__TRY(mgt__all_rows(rk, rk->gs.dres, rk->gs.full, &dout)); /* each TP rank's vocabulary rows take every row's gradient */
        float *dwpe = mgt__G(rk, mgt__t_wpe(rk));
        if (s->cp == 1) rk->be->encoder_backward(rk->be, mgt__G(rk, 0), dwpe, dout, A->inputs, rk->tpr * s->Vl, s->Vl, s->B, s->T, s->C);
        else {
            int h, Tc = s->T / 2;
            size_t rows = (size_t)s->B * Tc;
            for (h = 0; h < 2; h++)
                rk->be->encoder_backward(rk->be, mgt__G(rk, 0), dwpe ? dwpe + (size_t)mgt__cp_chunk(rk->cpr, s->cp, h) * Tc * s->C : NULL,
                                         MGT__AT(dout, h * rows * s->C, s->elt), A->inputs + h * rows, rk->tpr * s->Vl, s->Vl, s->B, Tc, s->C);
        }
        mgt__release(rk, 0);
        if (last_micro && !rk->shape.zb) MGT__TRY(mgt__bucket_done(rk, 0));
    }
    return MGT_OK;
}

/* pp_schedule = zb, the weight-gradient pass W of blocks [b0, b1) (and the head's first when `head`)
   for one micro-batch, in the order of its backward; recompute = selective first rebuilds a block's
   norm and GELU outputs, which the blocks share. last_micro: the step's last W, after which each
   unit's gradients are complete (the embedding's, from B, when `embed`: it ends a DP bucket) */
static mgt_result mgt__blocks_weight_grads(mgt__rank *rk, mgt__acts *A, int b0, int b1, int head, int embed, int last_micro) {
    int b;
    if (head) {
        MGT__TRY(mgt__head_weight_grad(rk, A));
        if (last_micro) MGT__TRY(mgt__bucket_done(rk, mgt__u_head(rk)));
    }
    for (b = b1 - 1; b >= b0; b--) {
        int u = mgt__u_block(rk, b);
        if (rk->shape.recompute == MGT_RECOMPUTE_SELECTIVE) mgt__block_recompute_selective(rk, A, b);
        MGT__TRY(mgt__block_weight_grads(rk, A, b));
        if (last_micro) MGT__TRY(mgt__bucket_done(rk, u));
    }
    if (embed && last_micro) MGT__TRY(mgt__bucket_done(rk, 0));
    return MGT_OK;
}
/* backward of this stage for one micro-batch */
static mgt_result mgt__stage_backward(mgt__rank *rk, mgt__acts *A, int last_micro) {
    return mgt__blocks_backward(rk, A, 0, rk->nblocks, rk->last, rk->first, last_micro);
}
