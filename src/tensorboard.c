/* src/tensorboard.c - TensorBoard event files */
/* ---- TensorBoard event files: TFRecord framing around Event protocol buffers ----------------------
   A record is a little-endian uint64 length, the masked CRC-32C of those 8 bytes, the data, and the
   masked CRC-32C of the data. The data is an Event message: wall_time (field 1, double), step
   (field 2, varint), file_version (field 3, "brain.Event:2" in the first record), summary (field
   5): a Summary of repeated Value (field 1) {tag (field 1, string), simple_value (field 2, float)},
   session_log (field 7): {status (field 1): START = 1}, which makes TensorBoard drop the points of
   earlier files from its step on (a resumed run's). These few fields are what TensorBoard's scalar
   dashboard reads. */
#ifndef MGT_NO_TENSORBOARD
static uint32_t mgt__crc32c(const unsigned char *p, size_t n) {
    uint32_t c = 0xffffffffu;
    size_t i;
    int k;
    for (i = 0; i < n; i++) {
        c ^= p[i];
        for (k = 0; k < 8; k++) c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1u))); /* reflected Castagnoli */
    }
    return ~c;
}
static uint32_t mgt__crc_masked(const unsigned char *p, size_t n) { uint32_t c = mgt__crc32c(p, n); return ((c >> 15) | (c << 17)) + 0xa282ead8u; }

typedef struct mgt__pb { unsigned char b[4096]; size_t n; } mgt__pb; /* an encoded message; a step's scalars fit */
static void mgt__pb_bytes(mgt__pb *m, const void *p, size_t n) {
    if (m->n + n <= sizeof m->b) memcpy(m->b + m->n, p, n);
    m->n += n; /* past the end: the caller sees n > sizeof b and drops the record */
}
static void mgt__pb_varint(mgt__pb *m, uint64_t v) {
    unsigned char c[10];
    size_t k = 0;
    do { c[k++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0)); v >>= 7; } while (v);
    mgt__pb_bytes(m, c, k);
}
static void mgt__pb_le(mgt__pb *m, uint64_t v, int bytes) {
    unsigned char c[8];
    int k;
    for (k = 0; k < bytes; k++) c[k] = (unsigned char)(v >> (8 * k));
    mgt__pb_bytes(m, c, (size_t)bytes);
}
static void mgt__pb_lendelim(mgt__pb *m, int field, const void *p, size_t n) {
    mgt__pb_varint(m, (uint64_t)field << 3 | 2);
    mgt__pb_varint(m, n);
    mgt__pb_bytes(m, p, n);
}
static void mgt__tb_scalar(mgt__pb *summary, const char *tag, double value) {
    mgt__pb v;
    float f = (float)value;
    uint32_t bits;
    if (!isfinite(value)) return; /* TensorBoard would plot nan as a gap at best */
    v.n = 0;
    mgt__pb_lendelim(&v, 1, tag, strlen(tag));
    memcpy(&bits, &f, 4);
    mgt__pb_varint(&v, 2 << 3 | 5);
    mgt__pb_le(&v, bits, 4);
    if (v.n <= sizeof v.b) mgt__pb_lendelim(summary, 1, v.b, v.n);
}
/* one record of an Event with the given step and a file version, a summary or a session log */
static int mgt__tb_event(FILE *f, double wall_time, long long step, const char *file_version, const mgt__pb *summary, const mgt__pb *session_log) {
    mgt__pb e;
    uint64_t len, bits;
    unsigned char head[12], tail[4];
    uint32_t crc;
    int k;
    e.n = 0;
    memcpy(&bits, &wall_time, 8);
    mgt__pb_varint(&e, 1 << 3 | 1);
    mgt__pb_le(&e, bits, 8);
    mgt__pb_varint(&e, 2 << 3 | 0);
    mgt__pb_varint(&e, (uint64_t)step);
    if (file_version) mgt__pb_lendelim(&e, 3, file_version, strlen(file_version));
    if (summary) mgt__pb_lendelim(&e, 5, summary->b, summary->n);
    if (session_log) mgt__pb_lendelim(&e, 7, session_log->b, session_log->n);
    if (e.n > sizeof e.b) return 0;
    len = e.n;
    for (k = 0; k < 8; k++) head[k] = (unsigned char)(len >> (8 * k));
    crc = mgt__crc_masked(head, 8);
    for (k = 0; k < 4; k++) head[8 + k] = (unsigned char)(crc >> (8 * k));
    if (fwrite(head, 1, 12, f) != 12 || fwrite(e.b, 1, e.n, f) != e.n) return 0;
    crc = mgt__crc_masked(e.b, e.n);
    for (k = 0; k < 4; k++) tail[k] = (unsigned char)(crc >> (8 * k));
    return fwrite(tail, 1, 4, f) == 4 && fflush(f) == 0;
}

static mgt_result mgt__tensorboard_open(mgt_run *r) {
    char path[MGT_STR_MAX + 160], host[64] = "localhost";
    if (r->tensorboard) { fclose(r->tensorboard); r->tensorboard = NULL; }
    if (!r->plan.cfg.log.tensorboard[0]) return MGT_OK;
    MGT__TRY(mgt_mkdirs(r->plan.cfg.log.tensorboard));
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = 0;
    /* TensorBoard reads every events.out.tfevents.* of the folder: a resumed run adds its own file */
    snprintf(path, sizeof path, "%s/events.out.tfevents.%lld.%s.%ld.mgt", r->plan.cfg.log.tensorboard, (long long)time(NULL), host, (long)getpid());
    r->tensorboard = fopen(path, "wb");
    if (!r->tensorboard) return mgt__fail(MGT_ERROR_IO, "%s: cannot create: %s ([log] tensorboard)", path, strerror(errno));
    if (!mgt__tb_event(r->tensorboard, (double)time(NULL), r->step, "brain.Event:2", NULL, NULL))
        return mgt__fail(MGT_ERROR_IO, "%s: cannot write: %s ([log] tensorboard)", path, strerror(errno));
    if (r->resumed) { /* SessionLog{status: START} at the next step: TensorBoard drops the earlier files' points from there on,
                         which the resumed run trains again */
        mgt__pb start;
        start.n = 0;
        mgt__pb_varint(&start, 1 << 3 | 0);
        mgt__pb_varint(&start, 1);
        if (!mgt__tb_event(r->tensorboard, (double)time(NULL), r->step + 1, NULL, NULL, &start))
            return mgt__fail(MGT_ERROR_IO, "%s: cannot write: %s ([log] tensorboard)", path, strerror(errno));
    }
    return MGT_OK;
}

/* the scalars of a logged step (train_line) or a validation, as metrics.jsonl's lines hold them */
static void mgt__tensorboard_step(mgt_run *r, const mgt_stats *st, int train_line, int eval_line) {
    mgt__pb sum;
    struct timespec now;
    int c;
    if (!r->tensorboard) return;
    sum.n = 0;
    if (train_line) {
        size_t peak = 0;
        mgt__tb_scalar(&sum, "train/loss", st->loss);
        mgt__tb_scalar(&sum, "train/lr", st->lr);
        mgt__tb_scalar(&sum, "train/grad_norm", st->grad_norm);
        mgt__tb_scalar(&sum, "perf/tokens_per_s", st->tokens_per_s);
        mgt__tb_scalar(&sum, "perf/step_s", st->step_ms / 1e3);
        if (st->has_mfu) mgt__tb_scalar(&sum, "perf/mfu", st->mfu);
        for (c = 0; c < MGT_MEM_COUNT; c++) peak += st->mem_peak[c];
        mgt__tb_scalar(&sum, "memory/peak_bytes", (double)peak);
        if (r->dtype == MGT_F16) mgt__tb_scalar(&sum, "train/loss_scale", st->loss_scale);
        if (r->plan.world > 1) { /* rank 0's time inside each kind of collective in the last step */
            mgt_rank_stats rs;
            char tag[64];
            mgt__fill_rank_stats(r, 0, &rs);
            for (c = 0; c < MGT_COLL_COUNT; c++)
                if (rs.calls[c]) { snprintf(tag, sizeof tag, "comm/%s_s", mgt_coll_name(c)); mgt__tb_scalar(&sum, tag, rs.seconds[c]); }
        }
    }
    if (eval_line) mgt__tb_scalar(&sum, "eval/val_loss", st->val_loss);
    clock_gettime(CLOCK_REALTIME, &now);
    if (sum.n > sizeof sum.b || !mgt__tb_event(r->tensorboard, (double)now.tv_sec + now.tv_nsec * 1e-9, st->step, NULL, &sum, NULL)) {
        mgt__event(r, MGT_LOG_WARN, "step %d: cannot write the TensorBoard events of [log] tensorboard = %s: %s; training goes on without them", st->step,
                   r->plan.cfg.log.tensorboard, strerror(errno));
        fclose(r->tensorboard);
        r->tensorboard = NULL;
    }
}

#else /* MGT_NO_TENSORBOARD: the writer is left out, and a run that asks for it refused */
static mgt_result mgt__tensorboard_open(mgt_run *r) {
    if (!r->plan.cfg.log.tensorboard[0]) return MGT_OK;
    return mgt__fail(MGT_ERROR_CONFIG, "[log] tensorboard = %s, but this program was built with MGT_NO_TENSORBOARD (no TensorBoard writer): "
                     "leave the key empty, or build without the switch", r->plan.cfg.log.tensorboard);
}
static void mgt__tensorboard_step(mgt_run *r, const mgt_stats *st, int train_line, int eval_line) {
    (void)r, (void)st, (void)train_line, (void)eval_line;
}
#endif /* MGT_NO_TENSORBOARD */
