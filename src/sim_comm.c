/* src/sim_comm.c - the step simulator: its communicator and world, the CPU priced by running its ops */
/* ---- the communicator */

/* the cost of a collective over n members moving `bytes` (the buffer NCCL's bus bandwidth is
   counted against): ring all-reduce 2(n-1)/n, reduce-scatter and all-gather (n-1)/n, broadcast 1 */
static double mgt__sim_ring_cost(const mgt_sim_device *d, int coll, int n, int inter, double bytes) {
    double steps, factor, bw = (inter ? d->inter_gbps : d->intra_gbps) * 1e9 * d->link_frac;
    if (n <= 1) return 0;
    if (d->host_sync) { /* the in-process communicator: one rendezvous, then each member reads and writes
                           the whole buffer itself (all-reduce: n slices in, n out), reduce-scatter reads it
                           and writes its block; copies priced at the copy rate (a byte read and one written) */
        factor = coll == MGT_COLL_BARRIER ? 0 : coll == MGT_COLL_REDUCE_SCATTER ? (1.0 + 1.0 / n) / 2 : 1;
        return d->intra_lat_us * 1e-6 + (bw > 0 ? factor * bytes / bw : 0);
    }
    if (coll == MGT_COLL_ALL_REDUCE || coll == MGT_COLL_BARRIER) { steps = 2.0 * (n - 1); factor = 2.0 * (n - 1) / n; }
    else if (coll == MGT_COLL_BROADCAST) { steps = n - 1; factor = 1; }
    else { steps = n - 1; factor = (double)(n - 1) / n; }
    if (coll == MGT_COLL_BARRIER) bytes = 0;
    return ((inter ? d->inter_lat_us : d->intra_lat_us) + steps * d->step_lat_us) * 1e-6 + (bw > 0 ? factor * bytes / bw : 0);
}
/* a group on `nodes` nodes, at most k members on one: within one node a ring over NVLink; across
   nodes two levels, as NCCL's rings and trees over rail-aligned NICs (one per GPU) behave: inside
   each node over NVLink on the whole buffer, and between nodes on 1/k of it per GPU, the k GPUs
   of a node each through its own NIC at once (all-reduce: reduce-scatter inside, all-reduce
   between nodes, all-gather inside; reduce-scatter and all-gather: one inside, one between;
   broadcast: 1/k of the buffer to each node per NIC, then inside). One member per node: the ring
   between nodes alone, on the NICs */
static double mgt__sim_coll_cost(const mgt_sim_device *d, int coll, int n, int nodes, int k, double bytes) {
    double inside;
    if (nodes <= 1 && coll == MGT_COLL_ALL_REDUCE && d->nvls_gbps > 0 && n > 1 && !d->host_sync) {
        /* NVLink SHARP: each GPU sends its buffer into the switch, which reduces, and reads the sum back,
           whatever n: the published algorithm bandwidth (nvls_gbps), or the ring where that is faster
           (2 GPUs), as NCCL's tuner chooses */
        double ring = mgt__sim_ring_cost(d, coll, n, 0, bytes), nvls = d->intra_lat_us * 1e-6 + bytes / (d->nvls_gbps * 1e9);
        return ring < nvls ? ring : nvls;
    }
    if (nodes <= 1 || d->host_sync) return mgt__sim_ring_cost(d, coll, n, 0, bytes);
    if (coll == MGT_COLL_ALL_REDUCE)
        inside = mgt__sim_ring_cost(d, MGT_COLL_REDUCE_SCATTER, k, 0, bytes) + mgt__sim_ring_cost(d, MGT_COLL_ALL_GATHER, k, 0, bytes);
    else inside = mgt__sim_ring_cost(d, coll, k, 0, bytes);
    return inside + mgt__sim_ring_cost(d, coll, nodes, 1, bytes / k);
}
static int mgt__sim_inter(const mgt__sim_world *w, int a, int b) {
    int per = w->opt.gpus_per_node > 0 ? w->opt.gpus_per_node : 1;
    return a / per != b / per;
}
static double mgt__sim_p2p_cost(const mgt__sim_world *w, int a, int b, double bytes) {
    const mgt_sim_device *d = &w->opt.device;
    int inter = mgt__sim_inter(w, a, b);
    double bw = (inter ? d->inter_gbps : d->intra_gbps) * 1e9 * d->link_frac;
    return (inter ? d->inter_lat_us : d->intra_lat_us) * 1e-6 + (bw > 0 ? bytes / bw : 0);
}

/* where the communication stream may start a call: after the compute enqueued before it */
static double mgt__sim_issue(mgt__sim_rank *rk, int host_buffer) {
    if (rk->w->opt.device.host_sync) return mgt__sim_max(rk->th, mgt__sim_max(rk->tc, rk->tm));
    rk->th += rk->w->opt.device.launch_us * 1e-6;
    if (host_buffer) rk->th = mgt__sim_max(rk->th, rk->tc); /* NCCL stages a host buffer after the compute */
    return mgt__sim_max(rk->tm, mgt__sim_max(rk->tc, rk->th));
}
/* the call [issue, end) is on the communication stream; the compute waits for it unless deferred */
static void mgt__sim_complete(mgt__sim_rank *rk, int coll, double issue, double end, double peer_ready, int deferred, int host_buffer, const char *name) {
    double wait;
    rk->tm = end;
    rk->tm_coll = coll;
    rk->st.comm_s[coll] += end - issue;
    mgt__sim_trace(rk, name, issue, end - issue, 1);
    if (rk->w->opt.device.host_sync) {
        wait = end - issue;
        rk->th = rk->tc = end;
    } else if (deferred) {
        long t = rk->tickets - 1;
        rk->ticket_end[t % MGT__SIM_TICKETS] = end;
        rk->ticket_coll[t % MGT__SIM_TICKETS] = coll;
        wait = 0;
        issue = rk->tc;
    } else {
        wait = end > rk->tc ? end - rk->tc : 0;
        issue = rk->tc;
        if (end > rk->tc) rk->tc = end;
        if (host_buffer) rk->th = mgt__sim_max(rk->th, end);
    }
    if (wait > 0) { /* waiting for a pipeline peer to send is the bubble; the rest is communication */
        double bubble = coll == MGT_COLL_SEND_RECV && peer_ready > issue ? (peer_ready < end ? peer_ready : end) - issue : 0;
        rk->st.bubble_s += bubble;
        rk->st.exposed_s[coll] += wait - bubble;
        rk->comm.stats.seconds[coll] += wait;
    }
}

static long mgt__sim_next_seq(mgt__sim_rank *rk, int id) {
    int i;
    for (i = 0; i < rk->nseq; i++)
        if (rk->seq_id[i] == id) return rk->seq[i]++;
    if (rk->nseq < 8) { rk->seq_id[rk->nseq] = id; rk->seq[rk->nseq++] = 1; }
    return 0;
}

static mgt_result mgt__sim_aborted(mgt__sim_rank *rk) {
    return mgt__fail(MGT_ERROR_COMM, "simulated rank %d: the world was aborted after another rank's error", rk->rank);
}

/* a collective over g: completes at the last member's issue plus its cost */
static mgt_result mgt__sim_collective(mgt_comm *c, const mgt_group *g, int coll, double cost_bytes, double counted, void *host_out, size_t host_bytes) {
    mgt__sim_rank *rk = (mgt__sim_rank *)c->impl;
    mgt__sim_world *w = rk->w;
    int deferred = rk->defer_next, host = host_out && !mgt__sim_is_device(w, host_out);
    double issue, end, cost;
    mgt__sim_group *gr;
    mgt__sim_slot *s;
    long seq;
    rk->defer_next = 0;
    if (!g || g->id < 0 || g->id >= w->ngroups) return mgt__fail(MGT_ERROR_ARGUMENT, "simulated %s: group %d is not of this world", mgt_coll_name(coll), g ? g->id : -1);
    c->stats.calls[coll]++;
    c->stats.bytes[coll] += counted;
    rk->st.calls[coll]++;
    rk->st.bytes[coll] += counted;
    if (host) memset(host_out, 0, host_bytes);
    if (g->size <= 1) return MGT_OK;
    issue = mgt__sim_issue(rk, host);
    gr = &w->groups[g->id];
    seq = mgt__sim_next_seq(rk, g->id);
    pthread_mutex_lock(&gr->mu);
    if (!gr->known) {
        int i;
        int per = w->opt.gpus_per_node > 0 ? w->opt.gpus_per_node : 1, run = 0;
        for (i = 0; i < g->size; i++) { /* members in rank order: a node's are consecutive */
            int same = i && g->ranks[i] / per == g->ranks[i - 1] / per;
            run = same ? run + 1 : 1;
            gr->nodes += !same;
            if (run > gr->per_node) gr->per_node = run;
        }
        gr->known = 1;
    }
    cost = mgt__sim_coll_cost(&w->opt.device, coll, g->size, gr->nodes, gr->per_node, cost_bytes);
    s = &gr->slot[seq % 2];
    if (s->arrived == 0) { s->issue = issue; s->cost = cost; }
    s->issue = mgt__sim_max(s->issue, issue);
    s->cost = mgt__sim_max(s->cost, cost);
    if (++s->arrived == g->size) {
        s->end = s->issue + s->cost;
        s->done = 1;
        pthread_cond_broadcast(&gr->cv);
    }
    while (!s->done && !w->aborted) pthread_cond_wait(&gr->cv, &gr->mu);
    if (!s->done) { pthread_mutex_unlock(&gr->mu); return mgt__sim_aborted(rk); }
    end = s->end;
    if (++s->left == g->size) memset(s, 0, sizeof *s);
    pthread_mutex_unlock(&gr->mu);
    mgt__sim_complete(rk, coll, issue, end, 0, deferred, host, mgt_coll_name(coll));
    return MGT_OK;
}

static size_t mgt__sim_elt(int dtype) { return dtype == MGT_F64 ? 8 : dtype == MGT_F32 ? 4 : 2; }

static mgt_result mgt__sim_all_reduce(mgt_comm *c, const mgt_group *g, void *buf, size_t count, int dtype) {
    double b = (double)(count * mgt__sim_elt(dtype));
    if (!count) { ((mgt__sim_rank *)c->impl)->defer_next = 0; return MGT_OK; }
    return mgt__sim_collective(c, g, MGT_COLL_ALL_REDUCE, b, b, buf, count * mgt__sim_elt(dtype));
}
static mgt_result mgt__sim_reduce_scatter(mgt_comm *c, const mgt_group *g, const void *send, void *recv, size_t recv_count, int dtype) {
    double b = (double)(recv_count * mgt__sim_elt(dtype)) * (g ? g->size : 1);
    (void)send;
    if (!recv_count) { ((mgt__sim_rank *)c->impl)->defer_next = 0; return MGT_OK; }
    return mgt__sim_collective(c, g, MGT_COLL_REDUCE_SCATTER, b, b, recv, recv_count * mgt__sim_elt(dtype));
}
static mgt_result mgt__sim_all_gather(mgt_comm *c, const mgt_group *g, const void *send, void *recv, size_t send_count, int dtype) {
    double b = (double)(send_count * mgt__sim_elt(dtype)) * (g ? g->size : 1);
    (void)send;
    if (!send_count) { ((mgt__sim_rank *)c->impl)->defer_next = 0; return MGT_OK; }
    return mgt__sim_collective(c, g, MGT_COLL_ALL_GATHER, b, b, recv, (size_t)b);
}
static mgt_result mgt__sim_broadcast(mgt_comm *c, const mgt_group *g, void *buf, size_t count, int dtype, int root) {
    double b = (double)(count * mgt__sim_elt(dtype));
    (void)root;
    if (!count) { ((mgt__sim_rank *)c->impl)->defer_next = 0; return MGT_OK; }
    return mgt__sim_collective(c, g, MGT_COLL_BROADCAST, b, b, buf, count * mgt__sim_elt(dtype));
}
static mgt_result mgt__sim_barrier(mgt_comm *c, const mgt_group *g) { return mgt__sim_collective(c, g, MGT_COLL_BARRIER, 0, 0, NULL, 0); }

/* point to point: the send is posted to the peer's box with its issue time and cost */
static mgt_result mgt__sim_post(mgt__sim_rank *rk, int peer, double issue, double cost) {
    mgt__sim_world *w = rk->w;
    mgt__sim_box *b;
    if (peer < 0 || peer >= w->world) return mgt__fail(MGT_ERROR_ARGUMENT, "simulated send from rank %d to rank %d of %d", rk->rank, peer, w->world);
    b = &w->boxes[peer];
    pthread_mutex_lock(&b->mu);
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 16;
        mgt__sim_msg *m = (mgt__sim_msg *)MGT_REALLOC(b->msg, sizeof *m * cap);
        if (!m) { pthread_mutex_unlock(&b->mu); return mgt__fail(MGT_ERROR_MEMORY, "out of memory"); }
        b->msg = m;
        b->cap = cap;
    }
    b->msg[b->n].src = rk->rank;
    b->msg[b->n].taken = 0;
    b->msg[b->n].issue = issue;
    b->msg[b->n++].cost = cost;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    return MGT_OK;
}
/* the oldest message from peer, waited for */
static mgt_result mgt__sim_take(mgt__sim_rank *rk, int peer, double *issue, double *cost) {
    mgt__sim_world *w = rk->w;
    mgt__sim_box *b = &w->boxes[rk->rank];
    size_t i;
    pthread_mutex_lock(&b->mu);
    for (;;) {
        for (i = b->head; i < b->n; i++)
            if (!b->msg[i].taken && b->msg[i].src == peer) break;
        if (i < b->n || w->aborted) break;
        pthread_cond_wait(&b->cv, &b->mu);
    }
    if (i >= b->n) { pthread_mutex_unlock(&b->mu); return mgt__sim_aborted(rk); }
    b->msg[i].taken = 1;
    *issue = b->msg[i].issue;
    *cost = b->msg[i].cost;
    while (b->head < b->n && b->msg[b->head].taken) b->head++;
    if (b->head == b->n) b->head = b->n = 0;
    pthread_mutex_unlock(&b->mu);
    return MGT_OK;
}
static mgt_result mgt__sim_sendrecv_impl(mgt_comm *c, int send_peer, int recv_peer, size_t count, int dtype) {
    mgt__sim_rank *rk = (mgt__sim_rank *)c->impl;
    double bytes = (double)(count * mgt__sim_elt(dtype)), issue, end, peer_issue = 0, peer_cost = 0, scost = 0;
    rk->defer_next = 0;
    if (!count) return MGT_OK;
    issue = mgt__sim_issue(rk, 0);
    end = issue;
    if (send_peer >= 0) {
        scost = mgt__sim_p2p_cost(rk->w, rk->rank, send_peer, bytes);
        MGT__TRY(mgt__sim_post(rk, send_peer, issue, scost));
        end = issue + scost;
        c->stats.calls[MGT_COLL_SEND_RECV]++;
        c->stats.bytes[MGT_COLL_SEND_RECV] += bytes;
        rk->st.calls[MGT_COLL_SEND_RECV]++;
        rk->st.bytes[MGT_COLL_SEND_RECV] += bytes;
    }
    if (recv_peer >= 0) {
        if (recv_peer >= rk->w->world) return mgt__fail(MGT_ERROR_ARGUMENT, "simulated recv on rank %d from rank %d", rk->rank, recv_peer);
        MGT__TRY(mgt__sim_take(rk, recv_peer, &peer_issue, &peer_cost));
        if (rk->w->opt.device.host_sync) end = mgt__sim_max(end, peer_issue + peer_cost); /* the sender copied it */
        else end = mgt__sim_max(end, mgt__sim_max(issue, peer_issue) + peer_cost);
        c->stats.calls[MGT_COLL_SEND_RECV]++;
        c->stats.bytes[MGT_COLL_SEND_RECV] += bytes;
        rk->st.calls[MGT_COLL_SEND_RECV]++;
        rk->st.bytes[MGT_COLL_SEND_RECV] += bytes;
    }
    mgt__sim_complete(rk, MGT_COLL_SEND_RECV, issue, end, recv_peer >= 0 ? peer_issue : 0, 0, 0,
                      send_peer >= 0 && recv_peer >= 0 ? "sendrecv" : send_peer >= 0 ? "send" : "recv");
    return MGT_OK;
}
static mgt_result mgt__sim_send(mgt_comm *c, int peer, const void *buf, size_t count, int dtype) {
    (void)buf;
    return mgt__sim_sendrecv_impl(c, peer, -1, count, dtype);
}
static mgt_result mgt__sim_recv(mgt_comm *c, int peer, void *buf, size_t count, int dtype) {
    (void)buf;
    return mgt__sim_sendrecv_impl(c, -1, peer, count, dtype);
}
static mgt_result mgt__sim_sendrecv(mgt_comm *c, int send_peer, const void *send, int recv_peer, void *recv, size_t count, int dtype) {
    (void)send; (void)recv;
    return mgt__sim_sendrecv_impl(c, send_peer, recv_peer, count, dtype);
}
static long mgt__sim_defer(mgt_comm *c) {
    mgt__sim_rank *rk = (mgt__sim_rank *)c->impl;
    if (rk->w->opt.device.host_sync) return -1; /* every call completes before it returns */
    rk->defer_next = 1;
    return rk->tickets++;
}
static mgt_result mgt__sim_sync(mgt_comm *c, long ticket) {
    mgt__sim_rank *rk = (mgt__sim_rank *)c->impl;
    double e = rk->tm;
    int coll = rk->tm_coll;
    if (rk->w->opt.device.host_sync) return MGT_OK;
    if (ticket >= 0 && ticket < rk->tickets && ticket >= rk->tickets - MGT__SIM_TICKETS) {
        e = rk->ticket_end[ticket % MGT__SIM_TICKETS];
        coll = rk->ticket_coll[ticket % MGT__SIM_TICKETS];
    }
    if (e > rk->tc) {
        rk->st.exposed_s[coll] += e - rk->tc;
        rk->comm.stats.seconds[coll] += e - rk->tc;
        rk->tc = e;
    }
    return MGT_OK;
}

/* ---- the world */

static void mgt__sim_world_destroy(mgt__sim_world *w) {
    int i;
    if (!w) return;
    for (i = 0; w->groups && i < w->ngroups; i++) { pthread_mutex_destroy(&w->groups[i].mu); pthread_cond_destroy(&w->groups[i].cv); }
    for (i = 0; w->boxes && i < w->world; i++) { pthread_mutex_destroy(&w->boxes[i].mu); pthread_cond_destroy(&w->boxes[i].cv); MGT_FREE(w->boxes[i].msg); }
    for (i = 0; w->ranks && i < w->world; i++) MGT_FREE(w->ranks[i].ev);
    if (w->base) munmap(w->base, w->span);
    for (i = 0; w->meters && i <= w->companions; i++) {
        if (w->meters[i].be) mgt__cpu_backend_destroy(w->meters[i].be);
        MGT_FREE(w->meters[i].arena);
    }
    MGT_FREE(w->meters);
    MGT_FREE(w->measured); /* realloc'd */
    pthread_mutex_destroy(&w->measure_mu);
    pthread_mutex_destroy(&w->mu);
    MGT_FREE(w->groups);
    MGT_FREE(w->boxes);
    MGT_FREE(w->ranks);
    MGT_FREE(w);
}

/* a range of addresses that nothing may use: reserved without access, never touched */
static void *mgt__sim_reserve(size_t span) {
    void *p;
#ifdef MAP_ANONYMOUS
    p = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS
#ifdef MAP_NORESERVE
                                          | MAP_NORESERVE
#endif
             , -1, 0);
#else
    int fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    p = mmap(NULL, span, PROT_NONE, MAP_PRIVATE, fd, 0);
    close(fd);
#endif
    return p == MAP_FAILED ? NULL : p;
}

static mgt_result mgt__sim_world_create(mgt__sim_world **out, int world, const mgt_sim_options *opt) {
    mgt__sim_world *w;
    int i;
    *out = NULL;
    w = (mgt__sim_world *)MGT_MALLOC(sizeof *w);
    if (!w) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
    pthread_mutex_init(&w->measure_mu, NULL);
    w->opt = *opt;
    w->world = world;
    w->ngroups = 6 * world; /* the ids of mgt__rank_init's groups */
    for (w->span = (size_t)1 << 40; w->span >= ((size_t)1 << 30) && !(w->base = (char *)mgt__sim_reserve(w->span)); w->span >>= 2) {}
    w->ranks = (mgt__sim_rank *)MGT_MALLOC(sizeof(mgt__sim_rank) * (size_t)world);
    w->groups = (mgt__sim_group *)MGT_MALLOC(sizeof(mgt__sim_group) * (size_t)w->ngroups);
    w->boxes = (mgt__sim_box *)MGT_MALLOC(sizeof(mgt__sim_box) * (size_t)world);
    if (!w->base || !w->ranks || !w->groups || !w->boxes) {
        if (!w->base) w->span = 0;
        MGT_FREE(w->groups); w->groups = NULL;
        MGT_FREE(w->boxes); w->boxes = NULL;
        mgt__sim_world_destroy(w);
        return mgt__fail(MGT_ERROR_MEMORY, "out of memory (or address space) for a simulated world of %d ranks", world);
    }
    memset(w->ranks, 0, sizeof(mgt__sim_rank) * (size_t)world);
    memset(w->groups, 0, sizeof(mgt__sim_group) * (size_t)w->ngroups);
    memset(w->boxes, 0, sizeof(mgt__sim_box) * (size_t)world);
    for (i = 0; i < w->ngroups; i++) { pthread_mutex_init(&w->groups[i].mu, NULL); pthread_cond_init(&w->groups[i].cv, NULL); }
    for (i = 0; i < world; i++) {
        mgt__sim_rank *rk = &w->ranks[i];
        mgt_backend *be = &rk->be;
        mgt_comm *c = &rk->comm;
        pthread_mutex_init(&w->boxes[i].mu, NULL);
        pthread_cond_init(&w->boxes[i].cv, NULL);
        rk->w = w;
        rk->rank = i;
        be->name = "sim";
        be->host_memory = 0;
        be->att_lse = !w->opt.device.host_sync; /* a GPU's flash attention; the CPU backend saves the probabilities */
        be->alloc = mgt__sim_alloc;
        be->free = mgt__sim_free;
        be->upload = mgt__sim_upload;
        be->download = mgt__sim_download;
        be->finish = mgt__sim_finish;
        be->encoder_forward = mgt__sim_encoder_forward;
        be->encoder_backward = mgt__sim_encoder_backward;
        be->layernorm_forward = mgt__sim_layernorm_forward;
        be->layernorm_backward = mgt__sim_layernorm_backward;
        be->matmul_forward = mgt__sim_matmul_forward;
        be->matmul_backward = mgt__sim_matmul_backward;
        be->matmul_gelu_forward = mgt__sim_matmul_gelu_forward;
        be->matmul_gelu_backward = mgt__sim_matmul_gelu_backward;
        be->attention_forward = mgt__sim_attention_forward;
        be->attention_backward = mgt__sim_attention_backward;
        be->attention_part_forward = mgt__sim_attention_part_forward;
        be->attention_part_backward = mgt__sim_attention_part_backward;
        be->copy_cols = mgt__sim_copy_cols;
        be->gelu_forward = mgt__sim_gelu_forward;
        be->gelu_backward = mgt__sim_gelu_backward;
        be->rmsnorm_forward = mgt__sim_rmsnorm_forward;
        be->rmsnorm_backward = mgt__sim_rmsnorm_backward;
        be->rope_forward = mgt__sim_rope_forward;
        be->rope_backward = mgt__sim_rope_backward;
        be->swiglu_forward = mgt__sim_swiglu_forward;
        be->swiglu_backward = mgt__sim_swiglu_backward;
        be->add_inplace = mgt__sim_add_inplace;
        be->bias_residual = mgt__sim_bias_residual;
        be->residual_layernorm_forward = mgt__sim_residual_layernorm_forward;
        be->bias_backward = mgt__sim_bias_backward;
        be->xent_partial = mgt__sim_xent_partial;
        be->xent_finish = mgt__sim_xent_finish;
        be->sum_squares = mgt__sim_sum_squares;
        be->adamw = mgt__sim_adamw;
        be->adamw_many = mgt__sim_adamw_many;
        be->scale = mgt__sim_scale;
        be->zero = mgt__sim_zero;
        be->cast = mgt__sim_cast;
        be->impl = rk;
        c->rank = i;
        c->world = world;
        c->all_reduce = mgt__sim_all_reduce;
        c->reduce_scatter = mgt__sim_reduce_scatter;
        c->all_gather = mgt__sim_all_gather;
        c->broadcast = mgt__sim_broadcast;
        c->send = mgt__sim_send;
        c->recv = mgt__sim_recv;
        c->sendrecv = mgt__sim_sendrecv;
        c->barrier = mgt__sim_barrier;
        c->defer = mgt__sim_defer;
        c->sync = mgt__sim_sync;
        c->impl = rk;
    }
    *out = w;
    return MGT_OK;
}

/* after a rank's error: every waiting and later call fails */
static void mgt__sim_abort(mgt__sim_world *w) {
    int i;
    for (i = 0; i < w->ngroups; i++) {
        pthread_mutex_lock(&w->groups[i].mu);
        w->aborted = 1;
        pthread_cond_broadcast(&w->groups[i].cv);
        pthread_mutex_unlock(&w->groups[i].mu);
    }
    for (i = 0; i < w->world; i++) {
        pthread_mutex_lock(&w->boxes[i].mu);
        w->aborted = 1;
        pthread_cond_broadcast(&w->boxes[i].cv);
        pthread_mutex_unlock(&w->boxes[i].mu);
    }
}

/* ---- the simulated world (the table of src/world.c): its ranks' backends and communicators are
   the simulator's, which makes and frees them */
static mgt_result mgt__world_sim_backend(void *world, const mgt__rank_want *want, mgt_backend **out, int *device) {
    mgt_backend *be = &((mgt__sim_world *)world)->ranks[want->rank].be;
    be->dtype = want->dtype;
    be->elt = mgt__dtype_size(want->dtype);
    *out = be;
    *device = -1;
    return MGT_OK;
}
static mgt_result mgt__world_sim_comm(void *world, int rank, mgt_backend *be, const mgt_group *const *groups, int ngroups, mgt_comm **out) {
    (void)be, (void)groups, (void)ngroups;
    *out = &((mgt__sim_world *)world)->ranks[rank].comm;
    return MGT_OK;
}
static void mgt__world_sim_rank_failed(void *world, mgt_comm *c) {
    (void)c;
    mgt__sim_abort((mgt__sim_world *)world);
}
static const mgt__world_api mgt__world_sim = {
    "cpu", 0, 0, NULL, mgt__world_sim_backend, NULL, mgt__world_sim_comm, NULL, NULL, mgt__world_sim_rank_failed, NULL, NULL,
};

/* every clock and count back to zero, between steps (the rank threads are idle) */
static void mgt__sim_reset(mgt__sim_world *w) {
    int i;
    for (i = 0; i < w->world; i++) {
        mgt__sim_rank *rk = &w->ranks[i];
        rk->th = rk->tc = rk->tm = 0;
        rk->defer_next = 0;
        memset(&rk->st, 0, sizeof rk->st);
        rk->nev = 0;
    }
}

static mgt_result mgt__sim_write_trace(const mgt__sim_world *w, const char *path) {
    FILE *f = fopen(path, "w");
    int i, first = 1;
    size_t k;
    if (!f) return mgt__fail(MGT_ERROR_IO, "cannot write the trace %s: %s", path, strerror(errno));
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"note\":\"PREDICTED by mgt's step simulator on %s\"},\"traceEvents\":[\n", w->opt.device.name);
    for (i = 0; i < w->world; i++) {
        fprintf(f, "%s{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"rank %d\"}}", first ? "" : ",\n", i, i);
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"compute\"}}", i);
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":1,\"args\":{\"name\":\"communication\"}}", i);
        first = 0;
        for (k = 0; k < w->ranks[i].nev; k++) {
            const mgt__sim_event *e = &w->ranks[i].ev[k];
            fprintf(f, ",\n{\"name\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f}", e->name, i, e->stream, e->start * 1e6, e->dur * 1e6);
        }
    }
    fprintf(f, "\n]}\n");
    if (fclose(f) != 0) return mgt__fail(MGT_ERROR_IO, "cannot write the trace %s", path);
    return MGT_OK;
}

MGTDEF void mgt_sim_result_free(mgt_sim_result *res) {
    if (!res) return;
    MGT_FREE(res->ranks);
    res->ranks = NULL;
}

MGTDEF mgt_result mgt_sim_run(const mgt_config *cfg, const mgt_sim_options *opt, mgt_sim_result *out) {
    mgt_plan p;
    mgt__sim_world *w = NULL;
    mgt_run *r = NULL;
    uint32_t *rows = NULL;
    mgt_result res;
    double t0 = mgt_now(), peak, tokens;
    int i, c;
    if (!cfg || !opt || !out) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_sim_run: cfg, opt and out are required");
    memset(out, 0, sizeof *out);
    if (opt->device.tensor_tflops[0] <= 0 || opt->device.mem_gbps <= 0 || opt->device.vector_tflops <= 0)
        return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_sim_run: device '%s' has no peak or bandwidth (for cpu, use mgt_sim_device_find)", opt->device.name);
    MGT__TRY(mgt_config_validate(cfg));
    MGT__TRY(mgt__layout_chosen(cfg, "a simulated step"));
    MGT__TRY(mgt__plan_make(cfg, &p));
    MGT__TRY(mgt__sim_world_create(&w, p.world, opt));
    res = mgt__run_alloc_on(&r, cfg, 0, &mgt__world_sim, w);
    if (res == MGT_OK) {
        rows = (uint32_t *)MGT_MALLOC(sizeof(uint32_t) * (size_t)cfg->train.global_batch * (size_t)(cfg->model.seq_len + 1));
        if (!rows) res = mgt__fail(MGT_ERROR_MEMORY, "out of memory");
        else memset(rows, 0, sizeof(uint32_t) * (size_t)cfg->train.global_batch * (size_t)(cfg->model.seq_len + 1));
    }
    if (res == MGT_OK && opt->device.host_sync) { /* the cpu: ops measured, as a rank runs them beside the others */
        int cores = mgt_cpu_count(), on_machine = p.world < cores / r->threads_per_rank ? p.world : cores / r->threads_per_rank;
        w->companions = on_machine > 1 ? (on_machine - 1 < 63 ? on_machine - 1 : 63) : 0;
        w->meters = (mgt__sim_meter *)MGT_MALLOC(sizeof(mgt__sim_meter) * (size_t)(w->companions + 1));
        if (!w->meters) res = mgt__fail(MGT_ERROR_MEMORY, "out of memory");
        else {
            memset(w->meters, 0, sizeof(mgt__sim_meter) * (size_t)(w->companions + 1));
            w->measure_threads = r->threads_per_rank;
        }
    }
    if (res == MGT_OK) {
        mgt__sim_reset(w);
        res = mgt__run_cmd(r, MGT__CMD_STEP, rows, 0);
    }
    if (res == MGT_OK) {
        out->ranks = (mgt_sim_rank *)MGT_MALLOC(sizeof(mgt_sim_rank) * (size_t)p.world);
        if (!out->ranks) res = mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    }
    if (res == MGT_OK) {
        out->world = p.world;
        for (i = 0; i < p.world; i++) {
            mgt_sim_rank *o = &out->ranks[i];
            mgt__rank *rk = &r->ranks[i];
            double used = 0;
            *o = w->ranks[i].st;
            o->rank = i;
            o->dp = rk->dpr;
            o->tp = rk->tpr;
            o->pp = rk->ppr;
            o->step_s = mgt__sim_max(w->ranks[i].tc, mgt__sim_max(w->ranks[i].tm, w->ranks[i].th));
            for (c = 0; c < MGT_SIM_FAMILIES; c++) o->compute_s += o->busy_s[c];
            for (c = 0; c < MGT_MEM_COUNT; c++) { o->mem_peak[c] = rk->be->mem_peak[c]; used += (double)rk->be->mem_peak[c]; }
            if (o->step_s > out->step_s) out->step_s = o->step_s;
            if (!opt->device.host_sync) /* the CUDA backend's attention scratch: a float per row and head of a micro-batch */
                used += (double)cfg->train.micro_batch * (double)(cfg->model.n_head / p.tp) * (double)cfg->model.seq_len * sizeof(float);
            used = used / 1073741824.0 + opt->device.reserve_gib;
            if (used > out->mem_peak_gib) out->mem_peak_gib = used;
        }
        tokens = (double)cfg->train.global_batch * cfg->model.seq_len;
        out->tokens_per_s = out->step_s > 0 ? tokens / out->step_s : 0;
        out->flops_per_token = mgt__flops_per_token(r);
        peak = opt->device.tensor_tflops[r->dtype >= 0 && r->dtype < 3 ? r->dtype : 0] * 1e12 * p.world;
        out->mfu = peak > 0 ? out->tokens_per_s * out->flops_per_token / peak : 0;
        out->shapes_measured = (int)w->nmeasured;
        out->ops_modelled = w->ops_modelled;
        if (opt->trace && opt->trace[0]) res = mgt__sim_write_trace(w, opt->trace);
    }
    MGT_FREE(rows);
    if (r) mgt_run_destroy(r);
    mgt__sim_world_destroy(w);
    if (res != MGT_OK) mgt_sim_result_free(out);
    out->wall_s = mgt_now() - t0;
    return res;
}

