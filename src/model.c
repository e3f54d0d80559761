/* src/model.c - the run's plan (mgt_plan_make: the grid, the batch's split, the stages, the sizes)
   and the model: a rank's tensors in one buffer, each a slice of a global tensor */
/* ---- the plan: ranks, groups, stages -------------------------------------------------------- */

MGTDEF void mgt_rank_coords(int rank, int dp, int tp, int *dp_index, int *tp_index, int *pp_index) {
    *tp_index = rank % tp;
    *dp_index = rank / tp % dp;
    *pp_index = rank / (tp * dp);
}
MGTDEF int mgt_rank_at(int dp_index, int tp_index, int pp_index, int dp, int tp) { return (pp_index * dp + dp_index) * tp + tp_index; }
MGTDEF const char *mgt_grid_text(int dp, int cp, int tp, int pp, char *out, size_t cap) {
    if (cp > 1) snprintf(out, cap, "dp %d x cp %d x tp %d x pp %d", dp, cp, tp, pp);
    else snprintf(out, cap, "dp %d x tp %d x pp %d", dp, tp, pp);
    return out;
}

/* The model's shapes from its preset. GPT-2 and the Llama family are settings of one model: the
   normalisation, the positions, the MLP, the key/value heads, the biases and the head are chosen
   here, and every size below follows from these numbers (layout, activations, plan, costs). */
static mgt_dims mgt__model_dims(const mgt_config *cfg) {
    mgt_dims d;
    d.C = cfg->model.d_model;
    d.NH = cfg->model.n_head;
    d.NKV = cfg->model.n_kv_head ? cfg->model.n_kv_head : d.NH;
    d.hs = d.C / d.NH;
    d.H = cfg->model.d_ff ? cfg->model.d_ff : 4 * d.C;
    d.rms = cfg->model.norm == MGT_NORM_RMSNORM;
    d.rope = cfg->model.positions == MGT_POSITIONS_ROPE;
    d.swiglu = cfg->model.mlp == MGT_MLP_SWIGLU;
    d.bias = cfg->model.bias != 0;
    d.tied = cfg->model.tied_head != 0;
    d.qkv = (d.NH + 2 * d.NKV) * d.hs;
    d.fc = d.swiglu ? 2 * d.H : d.H;
    return d;
}
/* key/value heads per TP rank: n_kv_head / tp; or, when tp is a multiple of n_kv_head, one, the head
   its query heads read, held by tp / n_kv_head neighbouring TP ranks (its replicas; the rule of
   vLLM's and SGLang's QKVParallelLinear: Megatron-LM's attention asserts that tp divides the
   query groups). The replicas' gradients are summed over them (mgt__kv_grads), so they stay equal. */
static int mgt__kv_local(const mgt_dims *d, int tp) { return d->NKV >= tp ? d->NKV / tp : 1; }
static int mgt__kv_replicas(const mgt_dims *d, int tp) { return d->NKV >= tp ? 1 : tp / d->NKV; }

/* Ranks are ordered TP fastest, then CP, then DP, then PP, so a TP group is neighbouring ranks (mgt_rank_coords). */

static double mgt__block_cost(const mgt_config *cfg) { /* forward FLOPs per token of one block */
    mgt_dims d = mgt__model_dims(cfg);
    double C = d.C, T = cfg->model.seq_len;
    return 2.0 * C * ((double)d.qkv + C + (double)d.fc + (double)d.H) + 4.0 * T * C; /* GPT-2: 24 C^2 + 4 T C */
}

/* contiguous blocks per stage minimising the most expensive stage; the last stage also runs the
   LM head (2 x C x Vp per token), so on a large vocabulary it gets fewer blocks */
static mgt_result mgt__plan_stages(const mgt_config *cfg, mgt_plan *p) {
    int L = cfg->model.n_layer, S = p->pp, s, l, k;
    double block = mgt__block_cost(cfg), head = 2.0 * cfg->model.d_model * (double)p->Vp;
    size_t w = (size_t)L + 1;
    double *best; /* best[s w + l]: the lowest max-cost of blocks [0,l) on stages [0,s) */
    int *cut;     /* cut[s w + l]: where the last of those stages begins */
    if (S == 1) { p->stage_first[0] = 0; p->stage_first[1] = L; return MGT_OK; }
    best = (double *)MGT_MALLOC(sizeof(double) * (size_t)(S + 1) * w);
    cut = (int *)MGT_MALLOC(sizeof(int) * (size_t)(S + 1) * w);
    if (!best || !cut) {
        MGT_FREE(best);
        MGT_FREE(cut);
        return mgt__fail(MGT_ERROR_MEMORY, "out of memory planning %d pipeline stages", S);
    }
    for (l = 0; l <= L; l++) best[w + (size_t)l] = l * block, cut[w + (size_t)l] = 0;
    for (s = 2; s <= S; s++)
        for (l = 0; l <= L; l++) {
            best[(size_t)s * w + (size_t)l] = 1e300;
            for (k = s - 1; k < l; k++) { /* stage s-1 takes [k, l), at least one block each */
                double c = (l - k) * block + (s == S && l == L ? head : 0), m = best[(size_t)(s - 1) * w + (size_t)k] > c ? best[(size_t)(s - 1) * w + (size_t)k] : c;
                if (m < best[(size_t)s * w + (size_t)l]) { best[(size_t)s * w + (size_t)l] = m; cut[(size_t)s * w + (size_t)l] = k; }
            }
        }
    p->stage_first[S] = L;
    for (s = S, l = L; s >= 1; s--) { p->stage_first[s - 1] = cut[(size_t)s * w + (size_t)l]; l = cut[(size_t)s * w + (size_t)l]; }
    p->stage_first[0] = 0;
    MGT_FREE(best);
    MGT_FREE(cut);
    return MGT_OK;
}

/* Interleaved 1F1B (parallel.pp_virtual = V > 1): the blocks are cut into pp x V chunks of equal
   size, and chunk g goes to stage g mod pp, so stage s holds chunks s, s + pp, ..., s + (V-1) pp
   (Megatron-LM's virtual pipeline stages). With V = 1 a stage's one chunk is its contiguous,
   balanced range (mgt__plan_stages). */
static int mgt__plan_chunks(const mgt_plan *p) { return p->pp > 1 ? p->cfg.parallel.pp_virtual : 1; }
/* parallel.pp_schedule = zb over more than one stage: the zero-bubble schedule (src/pipeline.c) */
#define MGT__SCHEDULE_ZB 2
static int mgt__plan_zb(const mgt_plan *p) { return p->pp > 1 && p->cfg.parallel.pp_schedule == MGT__SCHEDULE_ZB; }
static int mgt__chunk_first(const mgt_plan *p, int g) { /* first block of global chunk g (of pp x V; g = pp x V: n_layer) */
    int V = mgt__plan_chunks(p);
    return V == 1 ? p->stage_first[g] : g * (p->cfg.model.n_layer / (p->pp * V));
}
/* block b of stage s's blocks (its chunks' blocks, one chunk after the other) as a layer of the model */
static int mgt__stage_layer(const mgt_plan *p, int s, int b) {
    int per = mgt__chunk_first(p, s + 1) - mgt__chunk_first(p, s); /* blocks in each of its chunks */
    return mgt__chunk_first(p, s + (b / per) * p->pp) + b % per;
}
static int mgt__stage_blocks(const mgt_plan *p, int s) { return mgt__plan_chunks(p) * (mgt__chunk_first(p, s + 1) - mgt__chunk_first(p, s)); }

/* the model's parameters, without the vocabulary's padding (GPT-2: V C + T C + L (12 C^2 + 13 C) + 2 C) */
static size_t mgt__global_params(const mgt_config *cfg) {
    mgt_dims d = mgt__model_dims(cfg);
    size_t C = (size_t)d.C, V = (size_t)cfg->model.vocab_size, norm = d.rms ? C : 2 * C;
    size_t block = 2 * norm + (size_t)d.qkv * C + C * C + (size_t)d.fc * C + C * (size_t)d.H + (d.bias ? (size_t)d.qkv + (size_t)d.fc + 2 * C : 0);
    return V * C * (d.tied ? 1 : 2) + (d.rope ? 0 : (size_t)cfg->model.seq_len * C) + (size_t)cfg->model.n_layer * block + norm;
}

/* the plan of a validated config */
static mgt_result mgt__plan_make(const mgt_config *cfg, mgt_plan *p) {
    memset(p, 0, sizeof *p);
    p->cfg = *cfg;
    p->dp = cfg->parallel.dp;
    p->tp = cfg->parallel.tp;
    p->pp = cfg->parallel.pp;
    p->cp = cfg->parallel.cp;
    p->replicas = p->dp * p->cp;
    p->zero = p->replicas > 1 ? cfg->parallel.zero : 0; /* ZeRO over a single replica changes nothing */
    p->world = p->replicas * p->tp * p->pp;
    p->micro_steps = cfg->train.global_batch / (cfg->train.micro_batch * p->dp);
    p->Vp = (cfg->model.vocab_size + 128 * p->tp - 1) / (128 * p->tp) * (128 * p->tp);
    p->params = mgt__global_params(cfg);
    p->dims = mgt__model_dims(cfg);
    return mgt__plan_stages(cfg, p);
}
MGTDEF mgt_result mgt_plan_make(const mgt_config *cfg, mgt_plan *out) {
    if (!cfg || !out) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_plan_make: cfg and out are required");
    MGT__TRY(mgt_config_validate(cfg));
    MGT__TRY(mgt__layout_chosen(cfg, "a plan"));
    return mgt__plan_make(cfg, out);
}

/* ---- the model: a rank's tensors in one contiguous buffer, each a slice of a global tensor ---- */

enum { /* the kinds of tensor of a block, in storage order; a model without biases (Llama) has only
          some of them (mgt__block_slots) */
    MGT__LN1W, MGT__LN1B, MGT__QKVW, MGT__QKVB, MGT__PROJW, MGT__PROJB,
    MGT__LN2W, MGT__LN2B, MGT__FCW, MGT__FCB, MGT__FCPROJW, MGT__FCPROJB, MGT__BLOCK_TENSORS
};

/* A local tensor: local row r of segment i is global row seg_global[i] + (r - seg_local[i]);
   local column c is global column col_start + c. Rows of wte at or beyond vocab_size are padding:
   zero, no logit, no gradient, not in checkpoints. */
typedef struct mgt__tensor {
    mgt_tensor_info info;   /* global name and shape */
    int rows, cols;         /* local shape; cols is 1 for vectors */
    int nseg, seg_local[3], seg_global[3], seg_rows[3];
    int col_start;
    int tp_replicated;      /* the same values on every TP rank */
    size_t kv_from;         /* with replicated key/value heads: local elements from here on (c_attn's k and v rows) are
                               held by the kv group too: their gradients summed over it, counted once; else 0 */
    int tied_copy;          /* the last stage's copy of wte: kept equal, saved and counted once */
    int sp_sum;             /* sequence parallelism: a norm's weight or bias, whose gradient each TP rank takes from its
                               rows only: summed over TP (mgt__sp_grads) */
    int decay;              /* AdamW weight decay applies (matrices and embeddings) */
    float init_std, init_value;
    size_t offset;          /* in the rank's flat buffer, floats */
    int unit;
} mgt__tensor;

/* A unit is the tensors communicated and sharded together: the embedding, each block, the head. */
typedef struct mgt__unit {
    size_t offset, size;    /* in the flat buffer; size is a multiple of 16 x replicas */
    size_t shard_offset;    /* of this rank's 1/replicas slice in its shard buffers */
    int first_tensor, ntensors;
} mgt__unit;

static size_t mgt__tensor_storage(const mgt__tensor *t) { return (size_t)t->rows * (size_t)t->cols; }

/* global row of local row r, or -1 for padding */
static int mgt__global_row(const mgt__tensor *t, int r) {
    int i;
    for (i = 0; i < t->nseg; i++)
        if (r >= t->seg_local[i] && r < t->seg_local[i] + t->seg_rows[i]) {
            int g = t->seg_global[i] + (r - t->seg_local[i]);
            return g < t->info.shape[0] ? g : -1;
        }
    return -1;
}

typedef struct mgt__layout {
    mgt__tensor *t;
    int n, cap;
    int per_block, slot[MGT__BLOCK_TENSORS]; /* tensors of a block, and where each kind is in it (-1: absent) */
    int emb_tensors;                         /* wte, and wpe with learned positions */
    mgt__unit *u;
    int nu;
    size_t size;
} mgt__layout;

/* appends a tensor with one row segment [g0, g0 + rows) (or three for qkv, given by the caller) */
static mgt__tensor *mgt__add(mgt__layout *lay, const char *name, int grows, int gcols, int rows, int cols, int row0, int col0,
                             int decay, float std, float value, int tp_replicated) {
    mgt__tensor *x = &lay->t[lay->n++];
    memset(x, 0, sizeof *x);
    mgt__strlcpy(x->info.name, name, sizeof x->info.name);
    x->info.ndim = gcols ? 2 : 1;
    x->info.shape[0] = grows;
    x->info.shape[1] = gcols;
    x->info.numel = (size_t)grows * (size_t)(gcols ? gcols : 1);
    x->rows = rows;
    x->cols = cols ? cols : 1;
    x->nseg = 1;
    x->seg_rows[0] = rows;
    x->seg_global[0] = row0;
    x->col_start = col0;
    x->decay = decay;
    x->init_std = std;
    x->init_value = value;
    x->tp_replicated = tp_replicated;
    x->unit = lay->nu - 1;
    return x;
}
static void mgt__open_unit(mgt__layout *lay) {
    mgt__unit *u = &lay->u[lay->nu++];
    memset(u, 0, sizeof *u);
    u->first_tensor = lay->n;
}
/* closes the unit: lays its tensors out and pads it to a multiple of 16 x replicas floats */
static void mgt__close_unit(mgt__layout *lay, int replicas) {
    mgt__unit *u = &lay->u[lay->nu - 1];
    size_t off = lay->size, align = 16 * (size_t)replicas;
    int i;
    u->offset = lay->size;
    u->ntensors = lay->n - u->first_tensor;
    for (i = u->first_tensor; i < lay->n; i++) {
        lay->t[i].offset = off;
        off += (mgt__tensor_storage(&lay->t[i]) + 15) & ~(size_t)15;
    }
    u->size = (off - u->offset + align - 1) / align * align;
    u->shard_offset = (lay->nu > 1 ? lay->u[lay->nu - 2].shard_offset + lay->u[lay->nu - 2].size / (size_t)replicas : 0);
    lay->size = u->offset + u->size;
}

/* which of the block tensors (MGT__LN1W..) a model has: GPT-2 all twelve, a model without biases
   (Llama) only the weights. slot[k] is tensor k's index inside its block, or -1; returns the count */
static int mgt__block_slots(const mgt_dims *d, int slot[MGT__BLOCK_TENSORS]) {
    int k, n = 0;
    for (k = 0; k < MGT__BLOCK_TENSORS; k++) {
        int norm_bias = k == MGT__LN1B || k == MGT__LN2B, linear_bias = k == MGT__QKVB || k == MGT__PROJB || k == MGT__FCB || k == MGT__FCPROJB;
        slot[k] = (norm_bias && d->rms) || (linear_bias && !d->bias) ? -1 : n++; /* LayerNorm always has its bias, RMSNorm never */
    }
    return n;
}

/* the tensors of pipeline stage `stage` on tensor-parallel rank `tpr` (Megatron splits). Names are
   GPT-2's (Hugging Face), whatever the model, so that a checkpoint maps to Hugging Face's names by
   a table: c_attn.weight holds q, k and v rows one after the other ((NH + 2 NKV) hs rows: Llama's
   q_proj, k_proj, v_proj), mlp.c_fc.weight holds SwiGLU's gate rows then its up rows (gate_proj,
   up_proj), mlp.c_proj is down_proj, ln_1/ln_2/ln_f the norms, lm_head.weight a separate head. */
static void mgt__layout_make(mgt__layout *lay, const mgt_plan *p, int stage, int tpr) {
    const mgt_config *cfg = &p->cfg;
    mgt_dims d = p->dims;
    int L = cfg->model.n_layer, C = d.C, T = cfg->model.seq_len, V = cfg->model.vocab_size, tp = p->tp, hs = d.hs;
    int Cl = C / tp, KVl = mgt__kv_local(&d, tp) * hs, kvr = mgt__kv_replicas(&d, tp), Hl = d.H / tp, Vl = p->Vp / tp, l, b, nb = mgt__stage_blocks(p, stage);
    int norm_bias = !d.rms; /* LayerNorm has a bias, RMSNorm none */
    int sp = cfg->parallel.sp && tp > 1; /* the norms' gradients are partial on each TP rank */
    float std = 0.02f, proj_std = 0.02f / sqrtf(2.0f * (float)L);
    char name[64];
    lay->n = lay->nu = 0;
    lay->size = 0;
    lay->per_block = mgt__block_slots(&d, lay->slot);
    lay->emb_tensors = d.rope ? 1 : 2;
    if (stage == 0) {
        mgt__open_unit(lay);
        mgt__add(lay, "wte", V, C, Vl, C, tpr * Vl, 0, 1, std, 0, 0);
        if (!d.rope) mgt__add(lay, "wpe", T, C, T, C, 0, 0, 1, std, 0, 1);
        mgt__close_unit(lay, p->replicas);
    }
    for (b = 0; b < nb; b++) { /* the stage's chunks in order: with pp_virtual > 1 its layers are not contiguous */
        mgt__tensor *x;
        int i, k, kv = d.NKV * hs;
        l = mgt__stage_layer(p, stage, b);
        mgt__open_unit(lay);
#define MGT__NAME(suffix) (snprintf(name, sizeof name, "h.%d.%s", l, suffix), name)
        mgt__add(lay, MGT__NAME("ln_1.weight"), C, 0, C, 0, 0, 0, 0, 0, 1, 1)->sp_sum = sp;
        if (norm_bias) mgt__add(lay, MGT__NAME("ln_1.bias"), C, 0, C, 0, 0, 0, 0, 0, 0, 1)->sp_sum = sp;
        for (k = 0; k < 1 + d.bias; k++) { /* the weight, then the bias: this rank's q heads, k heads, v heads */
            x = k == 0 ? mgt__add(lay, MGT__NAME("attn.c_attn.weight"), d.qkv, C, Cl + 2 * KVl, C, 0, 0, 1, std, 0, 0)
                       : mgt__add(lay, MGT__NAME("attn.c_attn.bias"), d.qkv, 0, Cl + 2 * KVl, 0, 0, 0, 0, 0, 0, 0);
            x->nseg = 3;
            for (i = 0; i < 3; i++) { /* replicas: TP ranks tpr / kvr * kvr .. + kvr - 1 hold the same key/value head */
                x->seg_local[i] = i == 0 ? 0 : Cl + (i - 1) * KVl;
                x->seg_global[i] = i == 0 ? tpr * Cl : C + (i - 1) * kv + tpr / kvr * KVl;
                x->seg_rows[i] = i == 0 ? Cl : KVl;
            }
            if (kvr > 1) x->kv_from = (size_t)Cl * (size_t)x->cols;
        }
        mgt__add(lay, MGT__NAME("attn.c_proj.weight"), C, C, C, Cl, 0, tpr * Cl, 1, proj_std, 0, 0);
        if (d.bias) mgt__add(lay, MGT__NAME("attn.c_proj.bias"), C, 0, C, 0, 0, 0, 0, 0, 0, 1);
        mgt__add(lay, MGT__NAME("ln_2.weight"), C, 0, C, 0, 0, 0, 0, 0, 1, 1)->sp_sum = sp;
        if (norm_bias) mgt__add(lay, MGT__NAME("ln_2.bias"), C, 0, C, 0, 0, 0, 0, 0, 0, 1)->sp_sum = sp;
        for (k = 0; k < 1 + d.bias; k++) { /* GELU: this rank's hidden units; SwiGLU: its gate units, then its up units */
            x = k == 0 ? mgt__add(lay, MGT__NAME("mlp.c_fc.weight"), d.fc, C, d.fc / tp, C, tpr * Hl, 0, 1, std, 0, 0)
                       : mgt__add(lay, MGT__NAME("mlp.c_fc.bias"), d.fc, 0, d.fc / tp, 0, tpr * Hl, 0, 0, 0, 0, 0);
            if (d.swiglu) {
                x->nseg = 2;
                for (i = 0; i < 2; i++) { x->seg_local[i] = i * Hl; x->seg_global[i] = i * d.H + tpr * Hl; x->seg_rows[i] = Hl; }
            }
        }
        mgt__add(lay, MGT__NAME("mlp.c_proj.weight"), C, d.H, C, Hl, 0, tpr * Hl, 1, proj_std, 0, 0);
        if (d.bias) mgt__add(lay, MGT__NAME("mlp.c_proj.bias"), C, 0, C, 0, 0, 0, 0, 0, 0, 1);
#undef MGT__NAME
        mgt__close_unit(lay, p->replicas);
    }
    if (stage == p->pp - 1) {
        mgt__open_unit(lay);
        mgt__add(lay, "ln_f.weight", C, 0, C, 0, 0, 0, 0, 0, 1, 1)->sp_sum = sp;
        if (norm_bias) mgt__add(lay, "ln_f.bias", C, 0, C, 0, 0, 0, 0, 0, 0, 1)->sp_sum = sp;
        if (!d.tied) mgt__add(lay, "lm_head.weight", V, C, Vl, C, tpr * Vl, 0, 1, std, 0, 0);
        else if (p->pp > 1) mgt__add(lay, "wte", V, C, Vl, C, tpr * Vl, 0, 1, std, 0, 0)->tied_copy = 1;
        mgt__close_unit(lay, p->replicas);
    }
}

static int mgt__layout_alloc(mgt__layout *lay, const mgt_plan *p) {
    int blocks = p->cfg.model.n_layer; /* an upper bound for any stage */
    lay->cap = 2 + MGT__BLOCK_TENSORS * blocks + 3;
    lay->t = (mgt__tensor *)MGT_MALLOC(sizeof(mgt__tensor) * (size_t)lay->cap);
    lay->u = (mgt__unit *)MGT_MALLOC(sizeof(mgt__unit) * (size_t)(blocks + 2));
    (void)p;
    return lay->t && lay->u;
}
static void mgt__layout_free(mgt__layout *lay) {
    MGT_FREE(lay->t);
    MGT_FREE(lay->u);
    memset(lay, 0, sizeof *lay);
}

static uint64_t mgt__name_key(const char *name) { /* FNV-1a: the generator's stream per tensor */
    uint64_t h = 0xcbf29ce484222325ULL;
    while (*name) { h ^= (unsigned char)*name++; h *= 0x100000001b3ULL; }
    return h;
}

/* Activations of one micro-batch on one rank, with the rank's local widths, in the storage type
   (`void *`) or fp32 (`float *`). With recompute = full, every block shares one set and only the
   residual stream at each block's input is kept; with recompute = selective, the blocks share the
   outputs of the cheap memory-bound ops (ln1, ln2, fch_gelu: rebuilt in backward from what each
   block keeps) and keep the GEMMs' and attention's. R is the rows of the residual stream the rank
   holds (mgt__rows: N, or N / tp under sequence parallelism). */
typedef struct mgt__layer_acts {
    void *ln1; float *ln1_mean, *ln1_rstd; /* (R,C) (R) (R) */
    void *qkv;                             /* (N,3Cl) */
    void *att;                             /* (B,NHl,T,T) probabilities, or (B,NHl,T) fp32 logsumexps (att_lse) */
    void *atty;                            /* (N,Cl) */
    void *res2;                            /* (R,C) residual after attention */
    void *ln2; float *ln2_mean, *ln2_rstd; /* (R,C) (R) (R) */
    void *fch, *fch_gelu;                  /* (N,Hl) */
    /* pp_schedule = zb: the output gradients of the block's matmuls, kept from its input-gradient pass
       (B) to its weight-gradient pass (W), which reads them with the matmuls' inputs above */
    void *dmlp, *dattn;                    /* (N,C) c_proj's of the MLP and of attention (every TP rank's rows); without sequence
                                              parallelism or recompute they take the block's output's and res2's place */
    void *dfch, *dqkv;                     /* (N,Fl) (N,3Cl); without recompute dqkv takes fch's place */
} mgt__layer_acts;

typedef struct mgt__acts {
    void **resid;                          /* nblocks+1 of (R,C): input of each block, then the output */
    mgt__layer_acts *layer;                /* nblocks */
    void *lnf; float *lnf_mean, *lnf_rstd; /* (R,C) (R) (R), last stage */
    float *logits;                         /* (N,Vl); dlogits in place, last stage; storage type (typed float * for fp32 tools) */
    float *xent;                           /* (tp,N,3) cross-entropy partials of every TP rank, last stage */
    double *losses;                        /* (N) */
    int *inputs, *targets;                 /* (N) */
    void *dgrad;                           /* (N,C) pp_virtual > 1: the gradient a chunk receives, then the one it sends (NULL otherwise) */
} mgt__acts;

/* consecutive 256-byte aligned pieces of one block (a device block starts 256-byte aligned: cuBLASLt
   picks its fastest kernels for pointers that are, cublasLt.h's MIN_ALIGNMENT default); a NULL base
   only measures (offsets, never pointers, are added up: arithmetic on a null pointer is undefined) */
#define MGT__CARVE_ALIGN 256
static size_t mgt__carve_bytes(size_t bytes) { return (bytes + MGT__CARVE_ALIGN - 1) & ~(size_t)(MGT__CARVE_ALIGN - 1); }
typedef struct mgt__cursor { char *base; size_t used; } mgt__cursor;
static void *mgt__carve(mgt__cursor *c, size_t bytes) {
    void *p = c->base ? c->base + c->used : NULL;
    c->used += mgt__carve_bytes(bytes);
    return p;
}

/* a rank's widths: Cl its query channels (NHl heads), KVl its key or value channels, Hl its MLP hidden
   units, Fl the width of its MLP's first matmul (Hl, or 2 Hl for SwiGLU's gate and up); att_lse as the
   backend's (mgt_backend.att_lse). Under context parallelism (cp > 1) T is the rank's share of the
   sequence, seq_len / cp, held as two chunks of T / 2: the rows are (2, B, T / 2), chunk-major */
typedef struct mgt__shape { int B, T, C, Cl, KVl, Hl, Fl, NHl, Vl, tp, nblocks, first, last, recompute /* MGT_RECOMPUTE_* */, att_lse, sp, chunks, cp; size_t elt; int zb; } mgt__shape; /* chunks: pp_virtual, 1 without; zb: the zero-bubble schedule (backward split into B and W) */

/* rows of the residual stream a rank holds: all B x T, or under sequence parallelism (sp) its TP
   rank's contiguous 1/tp of them (the norms, residual adds and row-parallel biases run on these) */
static int mgt__rows(const mgt__shape *s) { return s->B * s->T / (s->sp ? s->tp : 1); }

/* bytes of what attention saves per layer (mgt_backend.att_lse; ring attention, cp > 1, always saves
   the log-sum-exps) */
static size_t mgt__att_bytes(size_t B, size_t NH, size_t T, size_t elt, int att_lse) { return att_lse ? B * NH * T * sizeof(float) : B * NH * T * T * elt; }
/* the query rows of one attention call: the whole sequence, or under context parallelism one chunk */
static int mgt__att_T(const mgt__shape *s) { return s->cp > 1 ? s->T / 2 : s->T; }
/* the CPU backend's attention scratch per thread: a T x T score matrix, or ring attention's two of
   a chunk (probabilities and their gradient) */
static size_t mgt__att_scratch_floats(const mgt__shape *s) {
    size_t t = (size_t)mgt__att_T(s);
    return (s->cp > 1 ? 2 : 1) * t * t;
}

/* lays one micro-batch's activations out from base (NULL: only measures); returns the bytes */
static size_t mgt__acts_layout(mgt__acts *a, char *base, const mgt__shape *s) {
    mgt__cursor cur = {base, 0};
    size_t N = (size_t)s->B * (size_t)s->T, R = (size_t)mgt__rows(s), f = sizeof(float), e = s->elt, C = (size_t)s->C, l;
    int sets = s->nblocks == 0 ? 0 : (s->recompute == MGT_RECOMPUTE_FULL ? 1 : s->nblocks), selective = s->recompute == MGT_RECOMPUTE_SELECTIVE;
    void *ln1 = NULL, *ln2 = NULL, *fch_gelu = NULL; /* selective: shared by the blocks */
    for (l = 0; l <= (size_t)s->nblocks; l++) a->resid[l] = mgt__carve(&cur, R * C * e);
    if (selective && sets) {
        ln1 = mgt__carve(&cur, R * C * e);
        ln2 = mgt__carve(&cur, R * C * e);
        fch_gelu = mgt__carve(&cur, N * (size_t)s->Hl * e);
    }
    for (l = 0; l < (size_t)sets; l++) {
        mgt__layer_acts *x = &a->layer[l];
        x->ln1 = selective ? ln1 : mgt__carve(&cur, R * C * e);
        x->ln1_mean = (float *)mgt__carve(&cur, R * f);
        x->ln1_rstd = (float *)mgt__carve(&cur, R * f);
        x->qkv = mgt__carve(&cur, N * (size_t)(s->Cl + 2 * s->KVl) * e);
        x->att = mgt__carve(&cur, mgt__att_bytes((size_t)s->B, (size_t)s->NHl, (size_t)s->T, e, s->att_lse || s->cp > 1));
        x->atty = mgt__carve(&cur, N * (size_t)s->Cl * e);
        x->res2 = mgt__carve(&cur, R * C * e);
        x->ln2 = selective ? ln2 : mgt__carve(&cur, R * C * e);
        x->ln2_mean = (float *)mgt__carve(&cur, R * f);
        x->ln2_rstd = (float *)mgt__carve(&cur, R * f);
        x->fch = mgt__carve(&cur, N * (size_t)s->Fl * e);
        x->fch_gelu = selective ? fch_gelu : mgt__carve(&cur, N * (size_t)s->Hl * e);
        if (s->zb && !s->sp && !s->recompute) { /* dead once B has read them: the block's output (block b+1's B, or the head's, read it
                                                   first) and res2 (after ln2's backward), each (N,C) when R = N */
            x->dmlp = a->resid[l + 1];
            x->dattn = x->res2;
        } else {
            x->dmlp = s->zb ? mgt__carve(&cur, N * C * e) : NULL;
            x->dattn = s->zb ? mgt__carve(&cur, N * C * e) : NULL;
        }
        x->dfch = s->zb ? mgt__carve(&cur, N * (size_t)s->Fl * e) : NULL;
        if (s->zb && !s->recompute && s->Cl + 2 * s->KVl <= s->Fl) x->dqkv = x->fch; /* fch is dead once the MLP's backward read it */
        else x->dqkv = s->zb ? mgt__carve(&cur, N * (size_t)(s->Cl + 2 * s->KVl) * e) : NULL;
    }
    for (l = (size_t)sets; l < (size_t)s->nblocks; l++) a->layer[l] = a->layer[0];
    if (s->last) {
        a->lnf = mgt__carve(&cur, R * C * e);
        a->lnf_mean = (float *)mgt__carve(&cur, R * f);
        a->lnf_rstd = (float *)mgt__carve(&cur, R * f);
        a->logits = (float *)mgt__carve(&cur, N * (size_t)s->Vl * e);
        a->xent = (float *)mgt__carve(&cur, (size_t)s->tp * N * 3 * f);
        a->losses = (double *)mgt__carve(&cur, N * sizeof(double));
    }
    a->inputs = (int *)mgt__carve(&cur, N * sizeof(int));
    a->targets = (int *)mgt__carve(&cur, N * sizeof(int));
    a->dgrad = s->chunks > 1 || s->zb ? mgt__carve(&cur, (size_t)mgt__rows(s) * C * e) : NULL; /* the residual stream's gradient: the rank's rows */
    return cur.used;
}

/* gradient scratch shared by the micro-batches of a rank (one backward at a time), storage type.
   dres is the residual stream's gradient (R,C); dact SwiGLU's output gradient; full, under sequence
   parallelism, the (N,C) rows of every TP rank: a norm's output gathered for a column-parallel GEMM
   (forward, and again for its weight gradient), dres gathered for a row-parallel GEMM's backward,
   a row-parallel GEMM's output or a column-parallel GEMM's input gradient before its reduce-scatter.
   Each use ends inside the op that begins it (block, embedding, head), so one serves them all.
   Under context parallelism ring attention's buffers (mgt__ring_attention_*): kv[2] the key/value
   blocks passed around the ring (N, 2 KVl) in the storage type, one computed on while the next
   arrives; dkv[2] their gradients on the way back to their owners, o the output merged in fp32
   (N, Cl) and dq its query gradient, fp32. */
typedef struct mgt__grad_scratch { void *dres, *dln, *dqkv, *dfch, *dact, *full, *kv[2]; float *dkv[2], *o, *dq; } mgt__grad_scratch;
static size_t mgt__scratch_layout(mgt__grad_scratch *g, char *base, const mgt__shape *s) {
    mgt__cursor cur = {base, 0};
    size_t N = (size_t)s->B * (size_t)s->T, e = s->elt;
    g->dres = mgt__carve(&cur, (size_t)mgt__rows(s) * (size_t)s->C * e);
    g->dln = mgt__carve(&cur, N * (size_t)s->C * e);
    g->dqkv = s->zb ? NULL : mgt__carve(&cur, N * (size_t)(s->Cl + 2 * s->KVl) * e); /* zb: each block keeps its own (mgt__layer_acts) */
    g->dfch = s->zb ? NULL : mgt__carve(&cur, N * (size_t)s->Fl * e);
    g->dact = s->Fl > s->Hl ? mgt__carve(&cur, N * (size_t)s->Hl * e) : NULL;
    g->full = s->sp ? mgt__carve(&cur, N * (size_t)s->C * e) : NULL;
    if (s->cp > 1) {
        size_t kv = N * 2 * (size_t)s->KVl;
        g->kv[0] = mgt__carve(&cur, kv * e);
        g->kv[1] = mgt__carve(&cur, kv * e);
        g->dkv[0] = (float *)mgt__carve(&cur, kv * sizeof(float));
        g->dkv[1] = (float *)mgt__carve(&cur, kv * sizeof(float));
        g->o = (float *)mgt__carve(&cur, N * (size_t)s->Cl * sizeof(float));
        g->dq = (float *)mgt__carve(&cur, N * (size_t)s->Cl * sizeof(float));
    } else g->kv[0] = g->kv[1] = NULL, g->dkv[0] = g->dkv[1] = g->o = g->dq = NULL;
    return cur.used;
}

/* fp32 workspace of the CPU backend's 16-bit ops on a rank of this shape and `threads`: the most
   any one op widens (each operand padded to 16 floats, as mgt__wide_take carves it); the GEMMs'
   operands only when they are widened (gemms: not bf16 through oneDNN) */
static size_t mgt__widen_floats(const mgt__shape *s, int threads, int gemms) {
    size_t N = (size_t)s->B * (size_t)s->T, C = (size_t)s->C, Cl = (size_t)s->Cl, Hl = (size_t)s->Hl, Vl = (size_t)s->Vl, T = (size_t)s->T;
    size_t Q = Cl + 2 * (size_t)s->KVl, F = (size_t)s->Fl; /* the widths of qkv and of the MLP's first matmul */
    size_t att = s->cp > 1 ? 0 : (size_t)s->B * (size_t)s->NHl * T * T, most = 0, k, mm[5][2];
    int nmm = gemms ? 4 : 0;
#define MGT__P16(n) (((size_t)(n) + 15) & ~(size_t)15)
#define MGT__MOST(x) do { size_t mgt__x = (x); if (mgt__x > most) most = mgt__x; } while (0)
    mm[0][0] = C; mm[0][1] = Q; mm[1][0] = Cl; mm[1][1] = C; mm[2][0] = C; mm[2][1] = F; mm[3][0] = Hl; mm[3][1] = C;
    if (s->last && gemms) { mm[4][0] = C; mm[4][1] = Vl; nmm = 5; }
    for (k = 0; k < (size_t)nmm; k++) { /* (in, out): forward out, inp, weight, bias; backward dinp, dout, inp, weight */
        size_t in = mm[k][0], out = mm[k][1];
        MGT__MOST(MGT__P16(N * out) + MGT__P16(N * in) + MGT__P16(out * in) + MGT__P16(out));
        MGT__MOST(2 * MGT__P16(N * in) + MGT__P16(N * out) + MGT__P16(out * in));
    }
    if (s->first) MGT__MOST(MGT__P16(N * C) + MGT__P16(Vl * C) + MGT__P16(T * C)); /* the embedding */
    MGT__MOST(3 * MGT__P16(N * C) + MGT__P16(C));                                  /* LayerNorm backward */
    if (s->cp > 1) { /* ring attention on one chunk (N / 2 rows) against a key/value block of as many */
        MGT__MOST(MGT__P16(N / 2 * Q) + MGT__P16(N / 2 * 2 * (size_t)s->KVl));
        MGT__MOST(2 * MGT__P16(N / 2 * Cl) + MGT__P16(N / 2 * Q) + MGT__P16(N / 2 * 2 * (size_t)s->KVl));
    } else {
        MGT__MOST(MGT__P16(N * Cl) + MGT__P16(att) + MGT__P16(N * Q));             /* attention forward */
        MGT__MOST(2 * MGT__P16(N * Q) + MGT__P16(N * Cl) + MGT__P16(att));         /* attention backward */
    }
    MGT__MOST(3 * MGT__P16(N * Hl));                                               /* GELU backward */
    MGT__MOST(2 * MGT__P16(N * F) + MGT__P16(N * Hl));                             /* SwiGLU backward (RMSNorm and RoPE need less) */
    if (s->last) MGT__MOST(MGT__P16((threads < 1 ? 1 : (size_t)threads < N ? (size_t)threads : N) * Vl)); /* cross-entropy: a row per thread */
#undef MGT__P16
#undef MGT__MOST
    return most;
}

