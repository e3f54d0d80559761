/* src/pipeline.c - the pipeline: a micro-batch's rows, activations between stages, the schedules
   (GPipe, 1F1B; interleaved 1F1B and zero-bubble ZB-H1 as lists of actions) */
/* ---- the pipeline ---------------------------------------------------------------------------- */

/* inputs (first stage) and targets (last stage) of micro-batch `micro` of this DP rank from the
   global batch rows (GB, seq_len + 1), made in host memory and uploaded; under context parallelism
   the rank's two chunks of each row, chunk-major (mgt__cp_chunk) */
static void mgt__set_rows(mgt__rank *rk, mgt__acts *A, const uint32_t *rows, int micro) {
    const mgt__shape *s = &rk->shape;
    int b, t, h, dp = rk->run->plan.dp, N = s->B * s->T, *inputs = (int *)rk->host_io, *targets = inputs + N, L = s->T * s->cp;
    int Tc = s->cp > 1 ? s->T / 2 : s->T, parts = s->cp > 1 ? 2 : 1;
    for (h = 0; h < parts; h++) {
        int t0 = s->cp > 1 ? mgt__cp_chunk(rk->cpr, s->cp, h) * Tc : 0;
        for (b = 0; b < s->B; b++) {
            const uint32_t *row = rows + (size_t)((micro * dp + rk->dpr) * s->B + b) * (size_t)(L + 1) + t0;
            int *in = inputs + ((size_t)h * s->B + b) * Tc, *tg = targets + ((size_t)h * s->B + b) * Tc;
            for (t = 0; t < Tc; t++) {
                in[t] = (int)row[t];
                tg[t] = (int)row[t + 1];
            }
        }
    }
    if (rk->first) rk->be->upload(rk->be, A->inputs, inputs, sizeof(int) * (size_t)N);
    if (rk->last) rk->be->upload(rk->be, A->targets, targets, sizeof(int) * (size_t)N);
}

/* activations and their gradients between stages, in the storage type: the rank's R rows (under
   sequence parallelism each TP rank sends its 1/tp to the same TP rank of the next stage) */
static mgt_result mgt__recv_act(mgt__rank *rk, void *buf, int from_stage) {
    const mgt__shape *s = &rk->shape;
    return rk->comm->recv(rk->comm, rk->pp_g.ranks[from_stage], buf, (size_t)mgt__rows(s) * s->C, rk->be->dtype);
}
static mgt_result mgt__send_act(mgt__rank *rk, const void *buf, int to_stage) {
    const mgt__shape *s = &rk->shape;
    return rk->comm->send(rk->comm, rk->pp_g.ranks[to_stage], buf, (size_t)mgt__rows(s) * s->C, rk->be->dtype);
}

/* micro-batch m through this stage, forward: receive (unless `received`), compute, then send, or
   leave the sending to the caller (`send` 0), or compute the loss on the last stage */
static mgt_result mgt__micro_forward(mgt__rank *rk, const uint32_t *rows, int m, float grad_scale, int received, int send) {
    mgt__acts *A = &rk->acts[m % rk->nsets];
    mgt__set_rows(rk, A, rows, m);
    if (!rk->first && !received) MGT__TRY(mgt__recv_act(rk, A->resid[0], rk->ppr - 1));
    MGT__TRY(mgt__stage_forward(rk, A));
    if (!rk->last) return send ? mgt__send_act(rk, A->resid[rk->nblocks], rk->ppr + 1) : MGT_OK;
    {
        double loss;
        MGT__TRY(mgt__head_forward(rk, A, grad_scale, &loss));
        rk->loss_sum += loss;
    }
    return MGT_OK;
}
/* and backward, with the same choices for the gradient it receives and the one it sends */
static mgt_result mgt__micro_backward(mgt__rank *rk, int m, int last_micro, int received, int send) {
    mgt__acts *A = &rk->acts[m % rk->nsets];
    if (!rk->last && !received) MGT__TRY(mgt__recv_act(rk, rk->gs.dres, rk->ppr + 1));
    MGT__TRY(mgt__stage_backward(rk, A, last_micro));
    if (!rk->first && send) return mgt__send_act(rk, rk->gs.dres, rk->ppr - 1);
    return MGT_OK;
}

/* ---- interleaved 1F1B as lists of actions ------------------------------------------------------

   With parallel.pp_virtual = V > 1 each stage holds V chunks of blocks (chunk g of pp x V on stage
   g mod pp) and a micro-batch goes through the chunks in order, around the stages V times. Each
   stage's step is a list of actions, made here once per run: compute (the forward or backward of a
   micro-batch through one chunk), and the sends and receives around it; one executor
   (mgt__run_pipe_actions) runs them. Another schedule is another list: zero-bubble's, below.

   The compute order is Megatron-LM's interleaved schedule (Narayanan et al. 2021,
   schedules.py:forward_backward_pipelining_with_interleaving): forwards k = 0, 1, ... take
   micro-batch (k / (pp V)) pp + k mod pp through chunk (k mod pp V) / pp, i.e. pp micro-batches at
   a time through one chunk, then the next chunk; backwards the same with the chunks reversed;
   stage s first runs 2 (pp - s - 1) + (V - 1) pp forwards, then one forward and one backward in
   turn, then the remaining backwards. Its bubble is (pp - 1) / (V M) of the step where 1F1B's is
   (pp - 1) / M, for M micro-batches, a multiple of pp.

   The order of the communication: the whole pipeline is run once here with unit costs (forward
   1, backward 2, or 3 with recompute), which gives every message a time (its producer's end) and every compute a start.
   Each stage sorts its actions by time, a message before a compute at the same time, messages by
   (time, sending stage). Every message is then at the same place in the global order of messages on
   both its stages, so a communicator whose send waits for the receiver (NCCL) cannot deadlock: the
   earliest message not yet done is the next communication of both its sender and its receiver. A
   receive may come before computes that precede its consumer, so each activation set (one per
   micro-batch in flight) has its own place to receive into: the chunk's input resid[c x blocks per
   chunk], and acts.dgrad for the gradient, in which the chunk's backward then runs (gs.dres
   pointed at it) and from which it is sent. Where the real costs differ from these, a receive
   placed early may wait while a compute could run: the simulator's bubble is the ideal
   (pp - 1) / V of a micro-batch at backward = 2 forwards (test_sim), more at other ratios
   (pp 4, V 2, M 8 at backward = forward: 0.256 of the step instead of 0.158). */

/* ---- zero-bubble ZB-H1 (parallel.pp_schedule = zb) -------------------------------------------

   Qi et al. 2023, "Zero Bubble Pipeline Parallelism" (ICLR 2024), the schedule ZB-H1: each backward
   is split into B, the input gradients (sent upstream at once: the next stage's critical path) and
   W, the weight gradients of the matmuls (mgt__blocks_weight_grads), which nothing waits for, and
   which fill the time a stage would otherwise wait. The forwards and B's keep 1F1B's order (stage s
   first runs pp - s - 1 forwards). In the unit-cost run a stage runs its next F or B when its input
   is there, and otherwise its oldest pending W; a W also comes first when one more forward would
   hold more than pp micro-batches between their F and their W, 1F1B's most (its first stage's). So
   the last stage defers its W's by pp - 1 micro-batches and the first runs F B W, as the paper's
   figure; every stage then holds up to pp micro-batches where 1F1B's stage s holds pp - s. The
   costs: F = B = 4, W = 3. The paper's F = B = W gives a step of 3 M + (pp - 1) where 1F1B's is
   3 (M + pp - 1) (pp 4, M 8: 27 against 33, the bubble a third), but a W has neither attention
   nor the norms, so it costs less than a forward (the H100 model prices a GPT-2 1.5B stage's at
   about 11.5 : 14 : 9), and an order made for F = W then leaves gaps in the drain that the real
   costs do not fill: the simulator's step of that model on pp 4 x dp 2 was 5% longer than 1F1B's
   with F = B = W, and 2% shorter with any W < F it was given (3 : 3 : 2, 10 : 12 : 8, 21 : 23 :
   20 alike). With F = B = 4, W = 3: pp 4, M 8 takes 105 units, 17 idle on stage 0 (1F1B at a
   backward of 7: 121, 33 idle; test_sim). What W needs stays in the micro-batch's
   activations: each block's four matmul output gradients (mgt__layer_acts dmlp, dattn, dfch, dqkv;
   without recompute all but dfch in activations B is done with); their inputs were kept anyway
   (selective recompute rebuilds ln1, ln2, fch_gelu again for W).
   Messages are ordered as the interleaved schedule's, below. */
#define MGT__ZB_FB_COST 4 /* a forward's and an input-gradient pass's cost in the unit-cost run */
#define MGT__ZB_W_COST 3  /* and a weight-gradient pass's: less (see above) */
static void mgt__zb_order(int pp, int M, mgt__pipe_action *comp, int per, long long *fend, long long *bend, int *state, long long *clock) {
    /* state: per stage, [0] next of its F/B order, [1] forwards, [2] B's, [3] W's done, [4] actions made; clock: when it is free */
    int s, best;
    for (;;) {
        long long best_t = 0;
        int best_w = 0;
        best = -1;
        for (s = 0; s < pp; s++) {
            int *st = state + 5 * s, pend = st[2] - st[3], warm = pp - s - 1 < M ? pp - s - 1 : M, i = st[0], fwd, m, w;
            long long t, dep;
            if (i == 2 * M) {
                if (!pend) continue;
                t = clock[s]; w = 1;
            } else {
                /* 1F1B's order: warm forwards, then forward and backward in turn, then the rest of the backwards */
                if (i < warm) fwd = 1, m = i;
                else if (i < 2 * M - warm) fwd = (i - warm) % 2 == 0, m = fwd ? warm + (i - warm) / 2 : (i - warm) / 2;
                else fwd = 0, m = i - M;
                dep = fwd ? (s > 0 ? fend[m * pp + s - 1] : 0) : (s < pp - 1 ? bend[m * pp + s + 1] : fend[m * pp + s]);
                if (fwd && st[1] - st[3] >= pp && pend) t = clock[s], w = 1; /* no more than pp micro-batches held */
                else if (dep >= 0 && dep <= clock[s]) t = clock[s], w = 0;
                else if (pend) t = clock[s], w = 1; /* its input is not there yet: a W fills the wait */
                else if (dep >= 0) t = dep, w = 0;
                else continue;
            }
            if (best < 0 || t < best_t) best = s, best_t = t, best_w = w;
        }
        if (best < 0) return;
        {
            int *st = state + 5 * best, i = st[0], warm = pp - best - 1 < M ? pp - best - 1 : M;
            mgt__pipe_action *a = comp + (size_t)best * (size_t)per + st[4]++;
            a->t = best_t;
            clock[best] = best_t + (best_w ? MGT__ZB_W_COST : MGT__ZB_FB_COST);
            if (best_w) { a->kind = MGT__PA_WEIGHT; a->micro = st[3]++; continue; }
            if (i < warm) a->kind = MGT__PA_FORWARD, a->micro = i;
            else if (i < 2 * M - warm) a->kind = (i - warm) % 2 == 0 ? MGT__PA_FORWARD : MGT__PA_BACKWARD,
                                        a->micro = a->kind == MGT__PA_FORWARD ? warm + (i - warm) / 2 : (i - warm) / 2;
            else a->kind = MGT__PA_BACKWARD, a->micro = i - M;
            st[0]++;
            if (a->kind == MGT__PA_FORWARD) fend[a->micro * pp + best] = clock[best], st[1]++;
            else bend[a->micro * pp + best] = clock[best], st[2]++;
        }
    }
}

static int mgt__pipe_action_cmp(const void *x, const void *y) {
    const mgt__pipe_action *a = (const mgt__pipe_action *)x, *b = (const mgt__pipe_action *)y;
    if (a->t != b->t) return a->t < b->t ? -1 : 1;
    if (a->order != b->order) return a->order - b->order;
    if (a->sender != b->sender) return a->sender - b->sender;
    return a->seq - b->seq;
}

/* stage `stage`'s actions for a step of M micro-batches (a multiple of pp) through pp stages of V
   chunks each; forward_only: validation's forwards; bcost: a backward's cost in forwards; zb: the
   zero-bubble order (V = 1; B and W cost a forward each). *out is MGT_MALLOC'd. */
static mgt_result mgt__pipeline_actions(int pp, int V, int M, int forward_only, int bcost, int zb, int stage, mgt__pipe_action **out, int *n_out) {
    int G = pp * V, total = M * V, per = forward_only ? total : (zb ? 3 : 2) * total, s, k, i, n = 0, *pos = NULL, progress;
    long long *fend = NULL, *bend = NULL, *clock = NULL;
    mgt__pipe_action *comp = NULL, *res = NULL; /* comp: every stage's computes, per apart */
    mgt_result r = MGT_OK;
    *out = NULL;
    *n_out = 0;
    comp = (mgt__pipe_action *)MGT_MALLOC(sizeof *comp * (size_t)per * (size_t)pp);
    fend = (long long *)MGT_MALLOC(sizeof(long long) * (size_t)M * (size_t)G * 2);
    pos = (int *)MGT_MALLOC(sizeof(int) * (size_t)pp * 5); /* zb: mgt__zb_order's state */
    clock = (long long *)MGT_MALLOC(sizeof(long long) * (size_t)pp);
    res = (mgt__pipe_action *)MGT_MALLOC(sizeof *res * (size_t)per * 3);
    if (!comp || !fend || !pos || !clock || !res) { r = mgt__fail(MGT_ERROR_MEMORY, "out of memory planning the pipeline schedule"); goto done; }
    bend = fend + (size_t)M * (size_t)G;
    for (i = 0; i < M * G * 2; i++) fend[i] = -1;
    memset(comp, 0, sizeof *comp * (size_t)per * (size_t)pp);
    if (zb && !forward_only) {
        memset(pos, 0, sizeof(int) * (size_t)pp * 5);
        memset(clock, 0, sizeof(long long) * (size_t)pp);
        mgt__zb_order(pp, M, comp, per, fend, bend, pos, clock);
        for (s = 0; s < pp; s++)
            if (pos[5 * s + 4] < per) { r = mgt__fail(MGT_ERROR_UNSUPPORTED, "the zero-bubble schedule of %d stages over %d micro-batches does not complete", pp, M); goto done; }
        goto messages;
    }
    for (s = 0; s < pp; s++) { /* Megatron's order */
        mgt__pipe_action *c = comp + (size_t)s * (size_t)per;
        int warm = forward_only ? total : 2 * (pp - s - 1) + (V - 1) * pp, nf = 0, nb = 0, j = 0;
        if (warm > total) warm = total;
#define MGT__PA_PUSH(k_, idx_)                                                                                   \
    (c[j].kind = (k_), c[j].micro = (idx_) / G * pp + (idx_) % pp,                                               \
     c[j].chunk = (k_) == MGT__PA_FORWARD ? (idx_) % G / pp : V - 1 - (idx_) % G / pp, j++)
        while (nf < warm) MGT__PA_PUSH(MGT__PA_FORWARD, nf), nf++;
        while (nf < total) { MGT__PA_PUSH(MGT__PA_FORWARD, nf); nf++; if (!forward_only) MGT__PA_PUSH(MGT__PA_BACKWARD, nb), nb++; }
        while (!forward_only && nb < total) MGT__PA_PUSH(MGT__PA_BACKWARD, nb), nb++;
#undef MGT__PA_PUSH
        pos[s] = 0;
        clock[s] = 0;
    }
    do { /* each stage runs its list in order, each compute once its input is there */
        progress = 0;
        for (s = 0; s < pp; s++)
            while (pos[s] < per) {
                mgt__pipe_action *a = comp + (size_t)s * (size_t)per + pos[s];
                int g = a->chunk * pp + s, idx = a->micro * G + g;
                long long dep = a->kind == MGT__PA_FORWARD ? (g > 0 ? fend[idx - 1] : 0) : (g < G - 1 ? bend[idx + 1] : fend[idx]);
                if (dep < 0) break;
                a->t = clock[s] > dep ? clock[s] : dep;
                clock[s] = a->t + (a->kind == MGT__PA_FORWARD ? 1 : bcost);
                (a->kind == MGT__PA_FORWARD ? fend : bend)[idx] = clock[s];
                pos[s]++;
                progress = 1;
            }
    } while (progress);
    for (s = 0; s < pp; s++)
        if (pos[s] < per) { r = mgt__fail(MGT_ERROR_UNSUPPORTED, "the interleaved schedule of %d stages x %d chunks over %d micro-batches does not complete", pp, V, M); goto done; }
messages:
    for (k = 0; k < per; k++) { /* this stage's computes with their messages */
        const mgt__pipe_action *a = comp + (size_t)stage * (size_t)per + k;
        int g = a->chunk * pp + stage, idx = a->micro * G + g, fwd = a->kind == MGT__PA_FORWARD;
        int from = fwd ? g - 1 : g + 1, to = fwd ? g + 1 : g - 1; /* the chunks it receives from and sends to */
        if (a->kind == MGT__PA_WEIGHT) from = to = -1; /* no messages */
        if (from >= 0 && from < G) {
            mgt__pipe_action *x = &res[n];
            memset(x, 0, sizeof *x);
            x->kind = MGT__PA_RECV; x->micro = a->micro; x->chunk = a->chunk; x->grad = !fwd; x->peer = from % pp;
            x->t = fwd ? fend[idx - 1] : bend[idx + 1]; x->order = 0; x->sender = x->peer; x->seq = n++;
        }
        res[n] = *a;
        res[n].order = 1; res[n].sender = stage; res[n].seq = n; n++;
        if (to >= 0 && to < G) {
            mgt__pipe_action *x = &res[n];
            memset(x, 0, sizeof *x);
            x->kind = MGT__PA_SEND; x->micro = a->micro; x->chunk = a->chunk; x->grad = !fwd; x->peer = to % pp;
            x->t = fwd ? fend[idx] : bend[idx]; x->order = 0; x->sender = stage; x->seq = n++;
        }
    }
    qsort(res, (size_t)n, sizeof *res, mgt__pipe_action_cmp);
    *out = res;
    *n_out = n;
    res = NULL;
done:
    MGT_FREE(comp); MGT_FREE(fend); MGT_FREE(pos); MGT_FREE(clock); MGT_FREE(res);
    return r;
}

/* activation sets a list of actions needs when micro-batch m takes set m mod sets from its first
   action to its last (receives and sends included): the fewest with which no two overlap */
static int mgt__pipe_sets(const mgt__pipe_action *a, int n, int M) {
    int *first = (int *)MGT_MALLOC(sizeof(int) * (size_t)M * 3), *last, *runmax, i, k, m, ok = 0;
    if (!first) return M; /* every micro-batch its own set: always enough */
    last = first + M;
    runmax = last + M;
    for (m = 0; m < M; m++) first[m] = n, last[m] = -1;
    for (i = 0; i < n; i++) {
        if (i < first[a[i].micro]) first[a[i].micro] = i;
        last[a[i].micro] = i;
    }
    for (k = 1; k < M && !ok; k++) {
        ok = 1;
        for (m = 0; m < k; m++) runmax[m] = -1;
        for (m = 0; m < M && ok; m++) {
            if (runmax[m % k] >= first[m]) ok = 0;
            if (last[m] > runmax[m % k]) runmax[m % k] = last[m];
        }
        if (ok) break;
    }
    MGT_FREE(first);
    return ok ? k : M;
}

/* the interleaved (or zero-bubble) schedule of stage `stage` of plan p: its training and validation
   actions (free with MGT_FREE; NULL to only count) and the activation sets they need */
static mgt_result mgt__interleaved_plan(const mgt_plan *p, int stage, mgt__pipe_action **train, int *ntrain, mgt__pipe_action **fwd, int *nfwd, int *sets) {
    mgt__pipe_action *a[2] = {NULL, NULL};
    int n[2] = {0, 0}, i, M = p->micro_steps, most = 1;
    mgt_result r = MGT_OK;
    for (i = 0; i < 2 && r == MGT_OK; i++) {
        int k;
        /* a backward costs about two forwards (the input's and the weights' gradients), three with recompute */
        r = mgt__pipeline_actions(p->pp, mgt__plan_chunks(p), M, i, p->cfg.train.recompute == MGT_RECOMPUTE_FULL ? 3 : 2, mgt__plan_zb(p), stage, &a[i], &n[i]);
        if (r == MGT_OK && (k = mgt__pipe_sets(a[i], n[i], M)) > most) most = k;
    }
    *sets = most;
    if (r == MGT_OK && train) { *train = a[0]; *ntrain = n[0]; a[0] = NULL; }
    if (r == MGT_OK && fwd) { *fwd = a[1]; *nfwd = n[1]; a[1] = NULL; }
    MGT_FREE(a[0]);
    MGT_FREE(a[1]);
    return r;
}

/* runs a list of actions (mgt__pipeline_actions) over the step's rows */
static mgt_result mgt__run_pipe_actions(mgt__rank *rk, const mgt__pipe_action *a, int n, const uint32_t *rows, float grad_scale) {
    const mgt__shape *s = &rk->shape;
    int i, V = s->chunks, per = rk->nblocks / V, M = rk->run->plan.micro_steps;
    size_t act = (size_t)mgt__rows(s) * s->C; /* the rank's rows of the residual stream (sequence parallelism: 1/tp of them) */
    for (i = 0; i < n; i++) {
        const mgt__pipe_action *x = &a[i];
        mgt__acts *A = &rk->acts[x->micro % rk->nsets];
        int c = x->chunk, head = rk->last && c == V - 1, embed = rk->first && c == 0, peer = rk->pp_g.ranks[x->peer];
        if (x->kind == MGT__PA_RECV)
            MGT__TRY(rk->comm->recv(rk->comm, peer, x->grad ? A->dgrad : A->resid[c * per], act, rk->be->dtype));
        else if (x->kind == MGT__PA_SEND)
            MGT__TRY(rk->comm->send(rk->comm, peer, x->grad ? A->dgrad : A->resid[(c + 1) * per], act, rk->be->dtype));
        else if (x->kind == MGT__PA_FORWARD) {
            if (embed || head) mgt__set_rows(rk, A, rows, x->micro);
            MGT__TRY(mgt__blocks_forward(rk, A, c * per, (c + 1) * per, embed));
            if (head) {
                double loss;
                MGT__TRY(mgt__head_forward(rk, A, grad_scale, &loss));
                rk->loss_sum += loss;
            }
        } else if (x->kind == MGT__PA_WEIGHT) /* zb: the weight gradients B left */
            MGT__TRY(mgt__blocks_weight_grads(rk, A, c * per, (c + 1) * per, head, embed, x->micro == M - 1));
        else { /* the chunk's backward runs in the set's gradient buffer, from which it is sent */
            void *dres = rk->gs.dres;
            mgt_result r;
            rk->gs.dres = A->dgrad;
            r = mgt__blocks_backward(rk, A, c * per, (c + 1) * per, head, embed, x->micro == M - 1);
            rk->gs.dres = dres;
            MGT__TRY(r);
        }
    }
    return MGT_OK;
}

/* the pipeline schedule of one step over M micro-batches: GPipe runs every forward and then every
   backward; 1F1B runs pp - stage - 1 forwards, then alternates, so at most pp - stage micro-batches
   are in flight. In 1F1B's steady state a stage sends its output and receives the gradient of an
   earlier micro-batch from the next stage, which does the reverse: each pair goes as one sendrecv
   (Megatron's send_forward_recv_backward and send_backward_recv_forward), so that communicators
   whose send waits for the receiver (NCCL) cannot deadlock. */
static mgt_result mgt__schedule(mgt__rank *rk, const uint32_t *rows, float grad_scale) {
    const mgt__shape *s = &rk->shape;
    size_t act = (size_t)mgt__rows(s) * s->C;
    int M = rk->run->plan.micro_steps, m, warm, steady, dtype = rk->be->dtype;
    if (s->chunks > 1 || s->zb) return mgt__run_pipe_actions(rk, rk->pipe[0], rk->npipe[0], rows, grad_scale); /* interleaved, zero-bubble */
    if (rk->run->plan.cfg.parallel.pp_schedule == 1 /* gpipe */ || rk->run->plan.pp == 1) {
        for (m = 0; m < M; m++) {
            MGT__TRY(mgt__micro_forward(rk, rows, m, grad_scale, 0, 1));
            if (rk->run->plan.pp == 1) MGT__TRY(mgt__micro_backward(rk, m, m == M - 1, 0, 1)); /* one stage: no need to hold M sets */
        }
        if (rk->run->plan.pp > 1)
            for (m = 0; m < M; m++) MGT__TRY(mgt__micro_backward(rk, m, m == M - 1, 0, 1));
        return MGT_OK;
    }
    warm = rk->run->plan.pp - rk->ppr - 1;
    if (warm > M) warm = M;
    steady = M - warm;
    for (m = 0; m < warm; m++) MGT__TRY(mgt__micro_forward(rk, rows, m, grad_scale, 0, 1));
    for (m = 0; m < steady; m++) {
        mgt__acts *F = &rk->acts[(m + warm) % rk->nsets];
        /* forward of m + warm: its input came with the previous backward's send, but the first */
        MGT__TRY(mgt__micro_forward(rk, rows, m + warm, grad_scale, m > 0, 0));
        if (!rk->last) /* send that output, receive the gradient of micro-batch m */
            MGT__TRY(rk->comm->sendrecv(rk->comm, rk->pp_g.ranks[rk->ppr + 1], F->resid[rk->nblocks], rk->pp_g.ranks[rk->ppr + 1], rk->gs.dres, act,
                                        dtype));
        MGT__TRY(mgt__micro_backward(rk, m, m == M - 1, 1, m == steady - 1));
        if (!rk->first && m < steady - 1) { /* send the gradient, receive the next forward's input */
            mgt__acts *next = &rk->acts[(m + warm + 1) % rk->nsets];
            MGT__TRY(rk->comm->sendrecv(rk->comm, rk->pp_g.ranks[rk->ppr - 1], rk->gs.dres, rk->pp_g.ranks[rk->ppr - 1], next->resid[0], act, dtype));
        }
    }
    for (m = steady; m < M; m++) MGT__TRY(mgt__micro_backward(rk, m, m == M - 1, 0, 1));
    return MGT_OK;
}

