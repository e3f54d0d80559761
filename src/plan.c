/* src/plan.c - a rank's plan in closed form (mgt_plan_rank: its memory and traffic), and whether a run fits this machine (mgt_plan_fit) */
/* ---- the plan in closed form: the sizes mgt__rank_init allocates, from the shapes alone ----- */

static size_t mgt__pad16(size_t n) { return (n + 15) & ~(size_t)15; }
static size_t mgt__overlap(size_t a0, size_t a1, size_t b0, size_t b1) { /* of [a0, a1) and [b0, b1) */
    size_t lo = a0 > b0 ? a0 : b0, hi = a1 < b1 ? a1 : b1;
    return hi > lo ? hi - lo : 0;
}

/* a rank's sizes, from the plan: its slice of the model's shapes and its stage (the parameters:
   each tensor padded to 16 floats, each unit to 16 x dp; LayerNorm has a bias, RMSNorm none; the
   linear layers' biases follow [model] bias) */
typedef struct mgt__rank_sizes {
    size_t C, T, B, N, Cl, Hl, Q, F, Vl; /* model width, sequence, micro-batch, tokens; the rank's slices of width, heads, qkv, MLP, vocabulary */
    size_t R;                            /* rows of the residual stream it holds: N, or N / tp under sequence parallelism (mgt__rows) */
    size_t norm, block, emb, head;       /* floats of a norm, a block's unit, the embedding's and the head's (0: not on this stage) */
    size_t S, shard, keep;               /* the rank's parameters, its DP shard, the units outside blocks */
    size_t e, f;                         /* bytes of the storage type and of fp32 */
    int replica, tpr, ppr, nb, first, last, M, kvr, dtype, sp, V, cp; /* replica: dpr x cp + cpr; V: chunks per stage (pp_virtual) */
} mgt__rank_sizes;

static void mgt__rank_sizes_of(const mgt_plan *p, int rank, mgt__rank_sizes *z) {
    const mgt_config *cfg = &p->cfg;
    const mgt_dims *d = &p->dims;
    size_t unit_align = 16 * (size_t)p->replicas;
    memset(z, 0, sizeof *z);
    z->dtype = cfg->precision.dtype == MGT_DTYPE_BF16 ? MGT_BF16 : cfg->precision.dtype == MGT_DTYPE_FP16 ? MGT_F16 : MGT_F32;
    mgt_rank_coords(rank, p->replicas, p->tp, &z->replica, &z->tpr, &z->ppr);
    z->cp = p->cp;
    z->first = z->ppr == 0;
    z->last = z->ppr == p->pp - 1;
    z->nb = mgt__stage_blocks(p, z->ppr);
    z->V = mgt__plan_chunks(p);
    z->M = p->micro_steps;
    z->C = (size_t)cfg->model.d_model; z->T = (size_t)(cfg->model.seq_len / p->cp); z->B = (size_t)cfg->train.micro_batch; z->N = z->B * z->T;
    z->sp = cfg->parallel.sp && p->tp > 1;
    z->R = z->N / (z->sp ? (size_t)p->tp : 1);
    z->Cl = z->C / (size_t)p->tp; z->Hl = (size_t)d->H / (size_t)p->tp; z->Vl = (size_t)p->Vp / (size_t)p->tp;
    z->Q = z->Cl + 2 * (size_t)(mgt__kv_local(d, p->tp) * d->hs); z->F = (size_t)d->fc / (size_t)p->tp;
    z->kvr = mgt__kv_replicas(d, p->tp);
    z->e = mgt__dtype_size(z->dtype); /* parameters (the compute copy), activations; gradients stay fp32 */
    z->f = sizeof(float);
    z->norm = (d->rms ? 1 : 2) * mgt__pad16(z->C);
#define MGT__UNIT(x) (((x) + unit_align - 1) / unit_align * unit_align)
    z->block = MGT__UNIT(2 * z->norm + mgt__pad16(z->Q * z->C) + mgt__pad16(z->C * z->Cl) + mgt__pad16(z->F * z->C) + mgt__pad16(z->C * z->Hl) +
                         (d->bias ? mgt__pad16(z->Q) + mgt__pad16(z->F) + 2 * mgt__pad16(z->C) : 0));
    z->emb = z->first ? MGT__UNIT(mgt__pad16(z->Vl * z->C) + (d->rope ? 0 : mgt__pad16((size_t)cfg->model.seq_len * z->C))) : 0;
    z->head = z->last ? MGT__UNIT(z->norm + (!d->tied || p->pp > 1 ? mgt__pad16(z->Vl * z->C) : 0)) : 0;
#undef MGT__UNIT
    z->S = z->emb + (size_t)z->nb * z->block + z->head;
    z->shard = z->S / (size_t)p->replicas;
    z->keep = z->emb + z->head;
}

/* the CUDA backend's own memory (its reserve: issue 13), and NCCL's and the context's estimates */
static void mgt__plan_rank_cuda(const mgt_plan *p, const mgt__rank_sizes *z, mgt_rank_plan *o) {
    const mgt_config *cfg = &p->cfg;
    const mgt_dims *d = &p->dims;
    size_t per_block = (size_t)(6 + 2 * !d->rms + 4 * d->bias), /* tensors of a block */ ss = (z->S / 65536 + (size_t)(4 + per_block * (size_t)z->nb + 2) + 1) * sizeof(double);
    size_t oc = z->Q > z->F ? z->Q : z->F, k, f = z->f;
    int kinds[7], g;
    size_t NHl = (size_t)(cfg->model.n_head / p->tp), hs = z->Cl / NHl;
    /* flash attention's backward: dout . out per row and head; under cp ring attention's backward
       (kernels/ring_attention.cu) needs the same per row and head of a chunk, T / 2, so no more */
    o->cuda_attention = z->B * NHl * z->T * f;
    if (mgt_cudnn_attention_serves(z->dtype, (int)hs, (int)NHl, (int)((z->Q - z->Cl) / 2 / hs))) /* cuDNN's: also its fp32 dq accumulator */
        o->cuda_attention = (o->cuda_attention + 255) / 256 * 256 + z->B * NHl * z->T * hs * f;
    o->cuda_scratch = o->cuda_attention; /* the largest of what ops ask for */
    if ((k = 128 * 2 * z->C * f) > o->cuda_scratch) o->cuda_scratch = k; /* LayerNorm's partial sums (128 parts) */
    if ((k = 64 * oc * f) > o->cuda_scratch) o->cuda_scratch = k;       /* the widest bias's (64 parts) */
    for (k = 1; k < z->N;) k <<= 1;
    if ((k *= 8) > o->cuda_scratch) o->cuda_scratch = k;                 /* the embedding backward's sort: 8-byte keys, a power of two */
    if (ss > o->cuda_scratch) o->cuda_scratch = ss;                      /* the chunks of the multi-tensor norm */
    o->cuda_cublas = (size_t)32 << 20;                                   /* sm_90 and later; 4 MiB before */
    o->mem[MGT_MEM_WORKSPACE] = o->cuda_scratch + o->cuda_cublas;
    /* NCCL: a communicator per group of more than one rank (a group of the whole world uses the
       world's), about 300 MiB each on NVLink: 32 channels x the Simple (4 MiB), LL128 (4.5 MiB)
       and LL (0.25 MiB) buffers, NCCL's defaults; NCCL_BUFFSIZE and NCCL_NCHANNELS change it */
    kinds[0] = p->tp; kinds[1] = p->replicas; kinds[2] = p->pp; kinds[3] = p->pp > 1 && (z->first || z->last) ? 2 : 1; kinds[4] = p->world; kinds[5] = z->kvr; kinds[6] = p->cp;
    for (g = 0; g < 7; g++) o->cuda_communicators += kinds[g] > 1 && (kinds[g] < p->world || g == 4);
    o->cuda_nccl_estimate = (size_t)o->cuda_communicators * ((size_t)300 << 20);
    o->cuda_context_estimate = (size_t)500 << 20; /* the CUDA context and the modules it loads: about 500 MiB on an H100 */
}

/* traffic per step, as the communicator counts it (bytes the rank sends or receives) */
static void mgt__plan_rank_traffic(const mgt_plan *p, const mgt__rank_sizes *z, mgt_rank_plan *o) {
    const mgt_config *cfg = &p->cfg;
    const mgt_dims *d = &p->dims;
    size_t f = z->f, e = z->e;
    double act = (double)(z->N * z->C * e), per_micro_tp = 0; /* activations move in the storage type */
    int recompute = cfg->train.recompute == MGT_RECOMPUTE_FULL, M = z->M, nb = z->nb, first = z->first, last = z->last;
    if (p->tp > 1 && !z->sp) {
        per_micro_tp = (double)nb * (2 + 2 + (recompute ? 2 : 0)) * act + (first ? act : 0) + (last ? act : 0);
        o->bytes[MGT_COLL_ALL_REDUCE] += M * per_micro_tp;
    }
    if (z->sp) { /* sequence parallelism, per micro-batch (a reduce-scatter or an all-gather counts its whole (N,C) buffer, as an
                    all-reduce does; on a ring each moves half an all-reduce's bytes). A block's forward: an all-gather before each
                    column-parallel GEMM (ln1, ln2), a reduce-scatter after each row-parallel one; its backward: dres gathered before
                    each row-parallel GEMM, ln1 and ln2 gathered again for the column-parallel weight gradients (the extra traffic:
                    the norms keep only their rows), their input gradients reduce-scattered; recompute reruns the forward's. The
                    embedding: a reduce-scatter forward, dres gathered backward. The head: lnf gathered forward and again backward,
                    its input gradient reduce-scattered. */
        o->bytes[MGT_COLL_REDUCE_SCATTER] += M * act * ((double)nb * (4 + (recompute ? 2 : 0)) + (first ? 1 : 0) + (last ? 1 : 0));
        o->bytes[MGT_COLL_ALL_GATHER] += M * act * ((double)nb * (6 + (recompute ? 2 : 0)) + (first ? 1 : 0) + (last ? 2 : 0));
    }
    if (p->tp > 1 && last) o->bytes[MGT_COLL_ALL_GATHER] += (double)M * (double)p->tp * (double)(z->N * 3 * f); /* the cross-entropy's statistics */
    if (p->pp > 1) {
        /* forward and backward, in and out, the rank's rows: each of its V chunks receives but the model's first, sends but its last */
        o->bytes[MGT_COLL_SEND_RECV] += (double)M * (double)(z->R * z->C * e) * 2.0 * ((z->V - first) + (z->V - last));
        if ((first || last) && d->tied) o->bytes[MGT_COLL_ALL_REDUCE] += (double)(z->Vl * z->C * f); /* the tied embedding */
    }
    if (z->cp > 1) { /* ring attention, per block and micro-batch (mgt__ring_attention_*): forward, cp - 1 key/value blocks (N, 2 KVl)
                      passed on in the storage type; backward, the same and cp gradient blocks in fp32; recompute reruns the forward's.
                      A sendrecv counts its send and its receive */
        double kv = (double)(z->N * (z->Q - z->Cl));
        double fwd = 2.0 * (double)(z->cp - 1) * kv * (double)e, bwd = fwd + 2.0 * (double)z->cp * kv * (double)f;
        o->bytes[MGT_COLL_SEND_RECV] += (double)M * (double)nb * (fwd * (recompute ? 2 : 1) + bwd);
    }
    if (p->replicas > 1) {
        double full = (double)(z->S * f), blocks = (double)((size_t)nb * z->block * f), fetches;
        double pfull = full / (double)f * (double)e, pblocks = blocks / (double)f * (double)e; /* parameters: storage type */
        if (p->zero == 0) o->bytes[MGT_COLL_ALL_REDUCE] += full;
        if (p->zero == 1) { o->bytes[MGT_COLL_REDUCE_SCATTER] += full; o->bytes[MGT_COLL_ALL_GATHER] += pfull; }
        if (p->zero >= 2) o->bytes[MGT_COLL_REDUCE_SCATTER] += M * blocks + (double)(z->keep * f);
        if (p->zero == 2) o->bytes[MGT_COLL_ALL_GATHER] += pfull;
        if (p->zero == 3) { /* every use of a unit gathers it: forward and backward of each block, the
                              embedding in both directions, the head (and a tied wte with it) in both */
            fetches = 2.0 * pblocks + (first ? 2.0 * (double)(z->emb * e) : 0) + (last ? 2.0 * (double)(z->head * e) : 0) +
                      (first && last && d->tied ? 2.0 * (double)(z->emb * e) : 0);
            o->bytes[MGT_COLL_ALL_GATHER] += M * fetches;
        }
    }
    if (p->world > 1) o->bytes[MGT_COLL_ALL_GATHER] += (double)p->world * sizeof(double); /* the gradient norm */
    if (z->sp) { /* the norms' gradients summed over TP once a step in fp32, the rank's DP slice of them under ZeRO (mgt__sp_grads):
                    each block's ln_1 (from its start) and ln_2 (after c_attn and attn.c_proj), the head's ln_f (from its start); a
                    norm's weight and bias are one call, the padding between them included */
        size_t run = z->norm - mgt__pad16(z->C) + z->C, o2 = z->norm + mgt__pad16(z->Q * z->C) + mgt__pad16(z->C * z->Cl) + (d->bias ? mgt__pad16(z->Q) + mgt__pad16(z->C) : 0);
        size_t s0 = p->zero >= 1 ? (size_t)z->replica * (z->block / (size_t)p->replicas) : 0, s1 = p->zero >= 1 ? s0 + z->block / (size_t)p->replicas : z->block;
        size_t h0 = p->zero >= 1 ? (size_t)z->replica * (z->head / (size_t)p->replicas) : 0, h1 = p->zero >= 1 ? h0 + z->head / (size_t)p->replicas : z->head;
        o->bytes[MGT_COLL_ALL_REDUCE] += (double)f * ((double)nb * (double)(mgt__overlap(0, run, s0, s1) + mgt__overlap(o2, o2 + run, s0, s1)) +
                                                      (last ? (double)mgt__overlap(0, run, h0, h1) : 0));
    }
    if (z->kvr > 1) { /* replicated key/value heads: their rows of c_attn's weight (and bias) in each block, summed over the kv group
                         once a step in fp32, the rank's DP slice of them under ZeRO (mgt__kv_grads); a block lays out ln_1, c_attn.weight, c_attn.bias */
        size_t s0 = p->zero >= 1 ? (size_t)z->replica * (z->block / (size_t)p->replicas) : 0, s1 = p->zero >= 1 ? s0 + z->block / (size_t)p->replicas : z->block;
        size_t w0 = z->norm + z->Cl * z->C, b0 = z->norm + mgt__pad16(z->Q * z->C) + z->Cl;
        o->bytes[MGT_COLL_ALL_REDUCE] += (double)nb * (double)f *
                                         (double)(mgt__overlap(w0, z->norm + z->Q * z->C, s0, s1) + (d->bias ? mgt__overlap(b0, b0 - z->Cl + z->Q, s0, s1) : 0));
    }
}

MGTDEF mgt_result mgt_plan_rank(const mgt_plan *p, int rank, mgt_rank_plan *o) {
    mgt__rank_sizes z;
    const mgt_dims *d;
    const mgt_config *cfg;
    size_t max_unit, max_block, sets, one, a_resid, a_layer, a_last, a_io, scratch, N, C, e, f;
    int threads;
    if (!p || !o) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_plan_rank: plan and out are required");
    d = &p->dims;
    cfg = &p->cfg;
    if (rank < 0 || rank >= p->world) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_plan_rank: rank %d of %d", rank, p->world);
    memset(o, 0, sizeof *o);
    mgt__rank_sizes_of(p, rank, &z);
    N = z.N; C = z.C; e = z.e; f = z.f;
    max_block = z.nb ? z.block : 0;
    max_unit = z.emb > z.block ? z.emb : z.block;
    max_unit = z.head > max_unit ? z.head : max_unit;
    o->rank = rank; o->dp = z.replica / p->cp; o->cp = z.replica % p->cp; o->tp = z.tpr; o->pp = z.ppr;
    o->first_block = mgt__chunk_first(p, z.ppr); /* with pp_virtual > 1: of its first chunk, and of its last chunk */
    o->last_block = mgt__chunk_first(p, z.ppr + (z.V - 1) * p->pp + 1) - 1;
    o->params = z.S;
    o->shard = z.shard;
    { /* the tensors: the embeddings, each block's (mgt__block_slots), the final norm and an untied or pipelined head */
        int slot[MGT__BLOCK_TENSORS];
        o->tensors = (z.first ? (d->rope ? 1 : 2) : 0) + z.nb * mgt__block_slots(d, slot) + (z.last ? (d->rms ? 1 : 2) + (!d->tied || p->pp > 1) : 0);
    }
    o->mem[MGT_MEM_PARAMS] = e * (p->zero >= 3 ? z.shard : z.S);
    o->mem[MGT_MEM_BUFFERS] = e * (p->zero >= 3 ? 2 * max_unit : 0) + f * (p->zero >= 2 ? (max_unit + max_block) / (size_t)p->replicas : 0);
    o->mem[MGT_MEM_GRADS] = f * (p->zero >= 2 ? z.shard + 2 * max_block + z.keep : z.S);
    o->mem[MGT_MEM_OPTIMIZER] = (z.dtype == MGT_F32 ? 2 : 3) * f * (p->zero >= 1 ? z.shard : z.S); /* moments, and master weights under 16-bit */
    /* activations: one set per micro-batch in flight, and the backward scratch */
    sets = p->pp == 1 ? 1 : cfg->parallel.pp_schedule == 1 ? (size_t)z.M : (size_t)(p->pp - z.ppr < z.M ? p->pp - z.ppr : z.M);
    if (z.V > 1 || mgt__plan_zb(p)) { /* interleaved, zero-bubble: the sets its schedule holds at once (mgt__pipe_sets) */
        int v_sets;
        MGT__TRY(mgt__interleaved_plan(p, z.ppr, NULL, NULL, NULL, NULL, &v_sets));
        sets = (size_t)v_sets;
    }
    /* the residual stream and the norms' inputs and outputs: the rank's R rows (N / tp under sequence parallelism) */
    a_resid = (size_t)(z.nb + 1) * mgt__carve_bytes(z.R * C * e);
    { /* a block's activations (mgt__acts_layout): what recompute = selective rebuilds (ln1, ln2, fch_gelu)
         apart from what every block keeps */
        size_t cheap = 2 * mgt__carve_bytes(z.R * C * e) + mgt__carve_bytes(N * z.Hl * e);
        size_t kept = mgt__carve_bytes(z.R * C * e) + 4 * mgt__carve_bytes(z.R * f) + mgt__carve_bytes(N * z.Q * e) +
                      mgt__carve_bytes(mgt__att_bytes(z.B, (size_t)(cfg->model.n_head / p->tp), z.T, e, cfg->parallel.device == MGT_DEVICE_CUDA || z.cp > 1)) +
                      mgt__carve_bytes(N * z.Cl * e) + mgt__carve_bytes(N * z.F * e);
        int rec = cfg->train.recompute;
        a_layer = z.nb == 0 ? 0 : rec == MGT_RECOMPUTE_FULL ? kept + cheap : rec == MGT_RECOMPUTE_SELECTIVE ? (size_t)z.nb * kept + cheap : (size_t)z.nb * (kept + cheap);
        if (mgt__plan_zb(p)) /* each block's matmul output gradients, kept from B to W: dmlp, dattn (N,C) (in the block's output's and
                                res2's place without sequence parallelism or recompute), dfch (N,F), dqkv (N,Q) (in fch's without recompute) */
            a_layer += (size_t)z.nb * ((z.sp || rec ? 2 * mgt__carve_bytes(N * C * e) : 0) + mgt__carve_bytes(N * z.F * e) +
                                       (rec || z.Q > z.F ? mgt__carve_bytes(N * z.Q * e) : 0));
    }
    a_last = z.last ? mgt__carve_bytes(z.R * C * e) + 2 * mgt__carve_bytes(z.R * f) + mgt__carve_bytes(N * z.Vl * e) + mgt__carve_bytes((size_t)p->tp * N * 3 * f) +
                          mgt__carve_bytes(N * sizeof(double)) : 0;
    a_io = 2 * mgt__carve_bytes(N * sizeof(int)) + (z.V > 1 || mgt__plan_zb(p) ? mgt__carve_bytes(z.R * C * e) : 0); /* and the action lists' gradient in and out (acts.dgrad) */
    one = a_resid + a_layer + a_last + a_io;
    scratch = mgt__carve_bytes(z.R * C * e) + mgt__carve_bytes(N * C * e) + (mgt__plan_zb(p) ? 0 : mgt__carve_bytes(N * z.Q * e) + mgt__carve_bytes(N * z.F * e)) +
              (z.F > z.Hl ? mgt__carve_bytes(N * z.Hl * e) : 0) + (z.sp ? mgt__carve_bytes(N * C * e) : 0); /* dres, dln, dqkv and dfch (zb: per block), dact, full */
    if (z.cp > 1) /* ring attention's key/value blocks and their gradients, two each, the merged output and dq (mgt__scratch_layout) */
        scratch += 2 * mgt__carve_bytes(N * (z.Q - z.Cl) * e) + 2 * mgt__carve_bytes(N * (z.Q - z.Cl) * f) + 2 * mgt__carve_bytes(N * z.Cl * f);
    o->mem[MGT_MEM_ACTIVATIONS] = one * sets + scratch;
    o->micro_in_flight = (int)sets;
    threads = cfg->parallel.threads > 0 ? cfg->parallel.threads : mgt_cpu_count();
    threads = threads / p->world > 0 ? threads / p->world : 1;
    o->mem[MGT_MEM_WORKSPACE] = f * (z.cp > 1 ? 2 * (z.T / 2) * (z.T / 2) : z.T * z.T) * (size_t)threads; /* mgt__att_scratch_floats */
    if (z.dtype != MGT_F32) { /* the CPU backend's fp32 copies of a 16-bit op's operands */
        mgt__shape sh;
        memset(&sh, 0, sizeof sh);
        sh.B = (int)z.B; sh.T = (int)z.T; sh.C = (int)C; sh.Cl = (int)z.Cl; sh.Hl = (int)z.Hl; sh.NHl = cfg->model.n_head / p->tp; sh.Vl = (int)z.Vl;
        sh.KVl = (int)(z.Q - z.Cl) / 2; sh.Fl = (int)z.F;
        sh.first = z.first; sh.last = z.last; sh.cp = z.cp;
        o->mem[MGT_MEM_WORKSPACE] += f * mgt__widen_floats(&sh, threads, mgt__cpu_widens_gemms(z.dtype));
    }
    if (cfg->parallel.device == MGT_DEVICE_CUDA) mgt__plan_rank_cuda(p, &z, o);
    mgt__plan_rank_traffic(p, &z, o);
    return MGT_OK;
}

/* ---- does a run fit this machine (mgt_plan_fit): the plan against MemAvailable, ulimit -v, GPU memory ---- */

#define MGT__HOST_SHARE 0.9 /* of MemAvailable a run may plan on: the rest is the page cache of its data, other programs, what no plan counts */
#define MGT__THREAD_RESIDENT 262144.0 /* a thread's touched stack and bookkeeping (1024 rank threads measured 240 MB) */
#define MGT__ARENA_BYTES 67108864.0 /* glibc gives a thread that allocates its own arena: 64 MiB of address space, at most 8 per core */
#define MGT__GPU_RESERVE 268435456.0 /* per GPU, and per NCCL communicator: cuBLAS workspaces, NCCL buffers, rounding */

/* snprintf for messages that may be cut at cap (the compiler is not asked to prove they are not) */
MGT__PRINTF(3, 4) static int mgt__textf(char *buf, size_t cap, const char *fmt, ...) {
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
    return n < 0 ? 0 : (size_t)n < cap ? n : (int)(cap ? cap - 1 : 0);
}

static void mgt__fmt_bytes(double b, char *out, size_t cap) {
    if (b >= 1099511627776.0) mgt__textf(out, cap, "%.1f TiB", b / 1099511627776.0);
    else if (b >= 1073741824.0) mgt__textf(out, cap, "%.1f GiB", b / 1073741824.0);
    else if (b >= 10485760.0) mgt__textf(out, cap, "%.0f MiB", b / 1048576.0);
    else if (b >= 1048576.0) mgt__textf(out, cap, "%.1f MiB", b / 1048576.0);
    else mgt__textf(out, cap, "%.0f KiB", b / 1024.0);
}

/* a /proc/meminfo line ("MemAvailable:") in bytes, -1 when it cannot be read */
static double mgt__meminfo(const char *key) {
    char line[256];
    double v = -1;
    size_t n = strlen(key);
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, n)) { v = strtod(line + n, NULL) * 1024.0; break; }
    fclose(f);
    return v;
}

typedef struct mgt__need {
    double host, as;      /* RAM, and the address space the run adds (CPU) */
    double planned;       /* what `mgt plan` shows, summed over the ranks (CPU) */
    double state;         /* of it: parameters, gradients and optimizer state */
    double checkpoint;    /* a checkpoint's fp32 copies (parameters and both moments) */
    double threads;       /* threads the run starts */
    int gpu_rank;         /* GPU: the rank with the least headroom, what it needs and its excess over its device's free memory */
    double gpu_need, gpu_excess;
} mgt__need;

/* What a run of plan `of` needs, from the plan of each rank. gpu_free[i] (nfree of them): free
   memory of rank i's GPU (NULL: CPU ranks); ranks past nfree are compared with the least of them. 0,
   or -1 when sampling with it is not valid (mgt_last_error says why). */
static int mgt__fit_need(const mgt_plan *of, int inference, const double *gpu_free, int nfree, mgt__need *n) {
    mgt_plan variant;
    const mgt_plan *plan = of;
    const mgt_config *cfg = &of->cfg;
    int world, r, c, threads, per_rank, cores = mgt_cpu_count();
    double least = -1;
    memset(n, 0, sizeof *n);
    n->gpu_rank = -1;
    if (inference || (gpu_free && cfg->parallel.device != MGT_DEVICE_CUDA)) {
        mgt_config v = *cfg;
        if (inference) v.train.micro_batch = v.train.global_batch = 1; /* sampling: one sequence, no optimizer */
        if (inference) v.parallel.sp = 0, v.parallel.cp = 1; /* and its rows whole, on one rank (mgt__rank_place, mgt_run_open) */
        if (gpu_free) v.parallel.device = MGT_DEVICE_CUDA; /* the plan's workspace is then the CUDA backend's (issue 13); no rule depends on the device */
        if ((inference && mgt_config_validate(&v) != MGT_OK) || mgt__plan_make(&v, &variant) != MGT_OK) return -1;
        plan = &variant;
        cfg = &variant.cfg;
    }
    world = plan->world;
    for (r = 0; gpu_free && r < nfree; r++) least = least < 0 || gpu_free[r] < least ? gpu_free[r] : least;
    for (r = 0; r < world; r++) {
        mgt_rank_plan p;
        double rank = 0, reserve = MGT__GPU_RESERVE, have;
        if (mgt_plan_rank(plan, r, &p) != MGT_OK) return -1;
        if (inference) p.mem[MGT_MEM_GRADS] = p.mem[MGT_MEM_OPTIMIZER] = p.mem[MGT_MEM_BUFFERS] = 0;
        n->state += (double)(p.mem[MGT_MEM_PARAMS] + p.mem[MGT_MEM_GRADS] + p.mem[MGT_MEM_OPTIMIZER]);
        for (c = 0; c < MGT_MEM_COUNT; c++) rank += (double)p.mem[c]; /* on GPUs the workspace is the CUDA backend's scratch and cuBLAS's */
        if (!gpu_free) { n->planned += rank; continue; }
        /* NCCL: a communicator for the world and for each kind of group with more than one member */
        reserve *= 1 + (world > 1) + (cfg->parallel.tp > 1) + (cfg->parallel.dp * cfg->parallel.cp > 1) + 2 * (cfg->parallel.pp > 1) + (cfg->parallel.cp > 1);
        rank += reserve;
        n->host += (double)(p.mem[MGT_MEM_PARAMS] + p.mem[MGT_MEM_OPTIMIZER]); /* a checkpoint copies the rank to the host */
        have = r < nfree ? gpu_free[r] : least;
        if (have >= 0 && (n->gpu_rank < 0 || rank - have > n->gpu_excess)) { n->gpu_rank = r; n->gpu_need = rank; n->gpu_excess = rank - have; }
    }
    n->checkpoint = 12.0 * (double)plan->params; /* saving gathers, resuming reads, three fp32 copies */
    n->host += n->planned + n->checkpoint;
    if (gpu_free) return 0;
    threads = cfg->parallel.threads > 0 ? cfg->parallel.threads : cores;
    per_rank = threads / world > 0 ? threads / world : 1;
    n->threads = (world > 1 ? world : 0) + (double)world * (per_rank - 1) + (!inference && cfg->data.train[0] ? 1 : 0); /* ranks, pools, loader */
    n->host += n->threads * MGT__THREAD_RESIDENT;
    {
        pthread_attr_t a;
        size_t stack = 8 << 20, blas = 0;
        struct stat st;
        if (pthread_attr_init(&a) == 0) { pthread_attr_getstacksize(&a, &stack); pthread_attr_destroy(&a); }
        mgt__blas_slots(&blas);
        n->as = n->planned + n->checkpoint + n->threads * (double)stack + (n->threads < 8.0 * cores ? n->threads : 8.0 * cores) * MGT__ARENA_BYTES +
                (double)blas + 64.0 * 1048576.0; /* and the libraries' own allocations */
        if (!inference && cfg->data.train[0] && stat(cfg->data.train, &st) == 0) n->as += (double)st.st_size; /* the shards are mapped */
        if (!inference && cfg->data.val[0] && stat(cfg->data.val, &st) == 0) n->as += (double)st.st_size;
    }
    return 0;
}

static int mgt__need_fits(const mgt__need *n, const mgt_fit *f) {
    return (f->host_have < 0 || n->host <= f->host_have) && (f->as_have < 0 || n->as <= f->as_have) && (n->gpu_rank < 0 || n->gpu_excess <= 0);
}

/* appends "key = value (needs X)" to buf when cfg with that change fits; returns whether it did */
static int mgt__lever(char *buf, size_t cap, const mgt_config *cfg, int inference, const double *gpu_free, int nfree, const mgt_fit *f,
                      const char *what) {
    mgt__need n;
    char b[32];
    size_t used = strlen(buf);
    mgt_plan plan;
    if (mgt_config_validate(cfg) != MGT_OK || mgt__plan_make(cfg, &plan) != MGT_OK) return 0; /* a change the rules refuse */
    if (mgt__fit_need(&plan, inference, gpu_free, nfree, &n) != 0 || !mgt__need_fits(&n, f)) return 0;
    mgt__fmt_bytes(gpu_free ? n.gpu_need : n.host, b, sizeof b);
    mgt__textf(buf + used, cap - used, "%s%s (%s%s)", used ? ", or " : "", what, b, gpu_free ? " per GPU" : "");
    return 1;
}

/* The comparison for a run of cfg on the CPU (gpu_free NULL) or on GPUs (gpu_free[rank], nfree of
   them) into out; MGT_ERROR_CONFIG with the same line as the error when it does not fit and the
   check is enforced. */
/* what would make cfg fit, each tried with the planner, written into levers ("" when nothing does) */
static void mgt__fit_levers(const mgt_config *cfg, int inference, const double *gpu_free, int nfree, mgt_fit *out, char *levers, size_t cap) {
    char what[96];
    int world = cfg->parallel.dp * cfg->parallel.cp * cfg->parallel.tp * cfg->parallel.pp;
    mgt_config c = *cfg;
    int per_dp = cfg->train.global_batch / cfg->parallel.dp, m, z, t, found = 0, selective = 0, nkv = cfg->model.n_kv_head ? cfg->model.n_kv_head : cfg->model.n_head;
    for (m = cfg->train.micro_batch - 1; m >= 1 && !found && !inference; m--) {
        if (per_dp % m) continue;
        c.train.micro_batch = m;
        mgt__textf(what, sizeof what, "train.micro_batch = %d", m);
        found = mgt__lever(levers, cap, &c, inference, gpu_free, nfree, out, what);
    }
    c = *cfg;
    /* selective first: it rebuilds only the cheap ops, where full runs each block's forward again */
    if (cfg->train.recompute == MGT_RECOMPUTE_NONE && !inference) {
        c.train.recompute = MGT_RECOMPUTE_SELECTIVE;
        selective = mgt__lever(levers, cap, &c, inference, gpu_free, nfree, out, "train.recompute = selective");
    }
    if (cfg->train.recompute != MGT_RECOMPUTE_FULL && !selective && !inference) {
        c.train.recompute = MGT_RECOMPUTE_FULL;
        if (!mgt__lever(levers, cap, &c, inference, gpu_free, nfree, out, "train.recompute = full") && !found)
            for (m = cfg->train.micro_batch - 1; m >= 1; m--) {
                if (per_dp % m) continue;
                c.train.micro_batch = m;
                mgt__textf(what, sizeof what, "train.recompute = full with train.micro_batch = %d", m);
                if (mgt__lever(levers, cap, &c, inference, gpu_free, nfree, out, what)) break;
            }
    }
    c = *cfg;
    for (z = cfg->parallel.zero + 1; cfg->parallel.dp > 1 && z <= 3 && !inference; z++) {
        c.parallel.zero = z;
        mgt__textf(what, sizeof what, "parallel.zero = %d", z);
        if (mgt__lever(levers, cap, &c, inference, gpu_free, nfree, out, what)) break;
    }
    c = *cfg;
    /* more GPUs, each holding less: tp must divide the key/value heads (and so n_head) and d_ff */
    for (t = 2 * cfg->parallel.tp; gpu_free && t <= 64 && c.model.n_head % t == 0 && /* key/value heads split or replicated (mgt__kv_local) */
                                   (nkv % t == 0 || t % nkv == 0) && (c.model.d_ff ? c.model.d_ff : 4 * c.model.d_model) % t == 0;
         t *= 2) {
        c.parallel.tp = t;
        mgt__textf(what, sizeof what, "parallel.tp = %d on %d GPUs", t, world / cfg->parallel.tp * t);
        if (mgt__lever(levers, cap, &c, inference, gpu_free, nfree, out, what)) break;
    }
    c = *cfg;
    for (t = 2 * cfg->parallel.pp; gpu_free && t <= cfg->model.n_layer && t <= 256; t *= 2) {
        c.parallel.pp = t;
        mgt__textf(what, sizeof what, "parallel.pp = %d on %d GPUs", t, world / cfg->parallel.pp * t);
        if (mgt__lever(levers, cap, &c, inference, gpu_free, nfree, out, what)) break;
    }
}

static mgt_result mgt__fit(const mgt_plan *plan, int inference, const double *gpu_free, int nfree, mgt_fit *out) {
    const mgt_config *cfg = &plan->cfg;
    mgt__need n;
    char need[32], have[32], avail_text[32], as_need[32], as_have[32], extra[32], cmp[640], levers[400] = "", what[96];
    double avail = mgt__meminfo("MemAvailable:"), mapped = 0;
    const char *env = getenv("MGT_MEMORY_CHECK");
    struct rlimit lim;
    int world = cfg->parallel.dp * cfg->parallel.cp * cfg->parallel.tp * cfg->parallel.pp, used;
    memset(out, 0, sizeof *out);
    out->device = gpu_free ? MGT_DEVICE_CUDA : MGT_DEVICE_CPU;
    out->enforced = !(env && !strcmp(env, "off"));
    out->host_have = avail >= 0 ? MGT__HOST_SHARE * avail : -1;
    out->as_have = -1;
    if (!gpu_free && getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
        mgt__self_memory(&mapped, NULL);
        out->as_have = (double)lim.rlim_cur > mapped ? (double)lim.rlim_cur - mapped : 0;
    }
    if (mgt__fit_need(plan, inference, gpu_free, nfree, &n) != 0) return MGT_ERROR_CONFIG;
    out->host_need = n.host;
    out->as_need = gpu_free ? 0 : n.as;
    out->gpu_rank = n.gpu_rank;
    out->gpu_need = n.gpu_need;
    out->gpu_have = n.gpu_rank >= 0 ? n.gpu_need - n.gpu_excess : -1;
    out->checked = out->host_have >= 0 || out->as_have >= 0 || n.gpu_rank >= 0;
    out->fits = mgt__need_fits(&n, out);
    /* the comparison */
    mgt__fmt_bytes(n.host, need, sizeof need);
    mgt__fmt_bytes(out->host_have, have, sizeof have);
    mgt__fmt_bytes(avail, avail_text, sizeof avail_text);
    used = 0;
    if (gpu_free && n.gpu_rank >= 0) {
        char gn[32], gh[32];
        mgt__fmt_bytes(n.gpu_need, gn, sizeof gn);
        mgt__fmt_bytes(out->gpu_have, gh, sizeof gh);
        used = mgt__textf(cmp, sizeof cmp, "GPU memory: rank %d needs %s (its plan and a reserve for cuBLAS and NCCL) and GPU %d has %s free%s; ",
                        n.gpu_rank, gn, n.gpu_rank, gh, world > 1 ? " (the least headroom of the ranks)" : "");
    }
    if (gpu_free) {
        mgt__textf(cmp + used, sizeof cmp - (size_t)used, "host memory: checkpoints need %s of the %s mgt may use (%.0f%% of MemAvailable %s)", need,
                 have, 100 * MGT__HOST_SHARE, avail_text);
    } else {
        mgt__fmt_bytes(n.host - n.planned, extra, sizeof extra);
        mgt__fmt_bytes(n.planned, what, sizeof what);
        used = mgt__textf(cmp, sizeof cmp, "memory: %d rank%s %s (%s planned, as `mgt plan` shows, and %s for %.0f thread%s and a checkpoint's copies)",
                        world, world == 1 ? " needs" : "s need", need, what, extra, n.threads, n.threads == 1 ? "" : "s");
        if (out->host_have >= 0)
            used += mgt__textf(cmp + used, sizeof cmp - (size_t)used, ", mgt may use %s (%.0f%% of MemAvailable %s)", have, 100 * MGT__HOST_SHARE, avail_text);
        else
            used += mgt__textf(cmp + used, sizeof cmp - (size_t)used, ", MemAvailable unknown (no /proc/meminfo)");
        mgt__fmt_bytes(n.as, as_need, sizeof as_need);
        mgt__fmt_bytes(out->as_have, as_have, sizeof as_have);
        mgt__fmt_bytes(mapped, extra, sizeof extra);
        if (out->as_have >= 0 && used < (int)sizeof cmp)
            mgt__textf(cmp + used, sizeof cmp - (size_t)used, "; address space: the run adds %s, ulimit -v (RLIMIT_AS) leaves %s (%s already mapped)", as_need,
                     as_have, extra);
    }
    if (out->fits) {
        mgt__textf(out->text, sizeof out->text, "%s: fits", cmp);
        return MGT_OK;
    }
    mgt__fit_levers(cfg, inference, gpu_free, nfree, out, levers, sizeof levers);
    {
        char state[32], at[MGT_STR_MAX + 8] = "", raise[96] = "";
        int host_short = out->host_have >= 0 && n.host > out->host_have, as_short = out->as_have >= 0 && n.as > out->as_have;
        size_t len = strlen(levers);
        mgt__fmt_bytes(n.state, state, sizeof state);
        if (cfg->path[0]) mgt__textf(at, sizeof at, "%s: ", cfg->path);
        if (as_short && !host_short) /* the address space alone: ulimit -v counts KiB */
            mgt__textf(raise, sizeof raise, "%sulimit -v %.0f or more", len ? ", or with " : "", (mapped + n.as) / 1024.0 + 1);
        if (levers[0] || raise[0])
            mgt__textf(out->text, sizeof out->text, "%sdoes not fit this machine: %s; it fits with %s%s%s", at, cmp, levers, raise,
                     out->enforced ? "; MGT_MEMORY_CHECK=off runs it anyway" : "");
        else
            mgt__textf(out->text, sizeof out->text,
                     "%sdoes not fit this machine: %s; neither a smaller micro-batch, recompute nor ZeRO%s makes it fit: parameters, gradients and "
                     "optimizer state alone take %s; train a smaller model, or on a machine with more memory%s",
                     at, cmp, gpu_free ? " nor more GPUs for tp or pp" : "", state, out->enforced ? "; MGT_MEMORY_CHECK=off runs it anyway" : "");
    }
    return out->enforced ? mgt__fail(MGT_ERROR_CONFIG, "%s", out->text) : MGT_OK;
}

