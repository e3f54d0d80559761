/* src/data.c - llm.c token shards, memory-mapped, sampled from (seed, step) */
/* ---- data: llm.c token shards, memory-mapped ------------------------------------------------- */

/* llm.c's two shard formats (dev/data/data_common.py): a 256-int32 header [magic, version, token
   count], then the tokens, uint16 (GPT-2's) or uint32 (Llama 3's, for vocabularies over 65536) */
#define MGT_SHARD_MAGIC 20240520
#define MGT_SHARD_VERSION 1
#define MGT_SHARD_MAGIC32 20240801
#define MGT_SHARD_VERSION32 7
#define MGT_SHARD_HEADER_BYTES 1024

typedef struct mgt__shard {
    const unsigned char *tokens;  /* little-endian, `width` bytes each */
    int width;                    /* 2 or 4 */
    size_t n;
    void *map;
    size_t map_len;
    unsigned long long dev, ino;  /* the file's identity: train and val sharing a shard is worth a word */
} mgt__shard;

static uint32_t mgt__shard_token(const mgt__shard *s, size_t i) {
    const unsigned char *p = s->tokens + i * (size_t)s->width;
    return s->width == 2 ? (uint32_t)p[0] | (uint32_t)p[1] << 8 : (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void mgt__shard_close(mgt__shard *s) {
    if (s->map) munmap(s->map, s->map_len);
    memset(s, 0, sizeof *s);
}

static mgt_result mgt__shard_open(mgt__shard *s, const char *path, const char *key, int vocab_size) {
    int fd, header[256];
    struct stat st;
    size_t i, count, bytes;
    uint32_t max_token = 0;
    char why[128];
    memset(s, 0, sizeof *s);
    fd = mgt__open_regular(path, &st, why, sizeof why);
    if (fd < 0) return mgt__fail(MGT_ERROR_DATA, "%s: %s: cannot open the token shard: %s (make it with `mgt prepare`, see README)", key, path, why);
    s->dev = (unsigned long long)st.st_dev;
    s->ino = (unsigned long long)st.st_ino;
    if ((size_t)st.st_size < MGT_SHARD_HEADER_BYTES) {
        close(fd);
        return mgt__fail(MGT_ERROR_DATA, "%s: %s: truncated shard: %lld bytes, shorter than the 1024-byte header", key, path, (long long)st.st_size);
    }
    if (pread(fd, header, sizeof header, 0) != (ssize_t)sizeof header) { close(fd); return mgt__fail(MGT_ERROR_DATA, "%s: %s: cannot read the header", key, path); }
    if (header[0] == MGT_SHARD_MAGIC && header[1] == MGT_SHARD_VERSION) s->width = 2;
    else if (header[0] == MGT_SHARD_MAGIC32 && header[1] == MGT_SHARD_VERSION32) s->width = 4;
    else {
        close(fd);
        return mgt__fail(MGT_ERROR_DATA, "%s: %s: not a token shard (magic %d version %d; expected %d version %d for 16-bit tokens or %d version %d "
                         "for 32-bit; make it with `mgt prepare`)", key, path, header[0], header[1], MGT_SHARD_MAGIC, MGT_SHARD_VERSION,
                         MGT_SHARD_MAGIC32, MGT_SHARD_VERSION32);
    }
    if (header[2] < 0) {
        close(fd);
        return mgt__fail(MGT_ERROR_DATA, "%s: %s: the header's token count %d is negative (a damaged shard; make it again with `mgt prepare`)", key, path, header[2]);
    }
    count = (size_t)header[2];
    bytes = MGT_SHARD_HEADER_BYTES + (size_t)s->width * count;
    if ((size_t)st.st_size < bytes) {
        close(fd);
        return mgt__fail(MGT_ERROR_DATA, "%s: %s: truncated shard: the header promises %zu %d-bit tokens (%zu bytes) but the file has %lld bytes",
                         key, path, count, 8 * s->width, bytes, (long long)st.st_size);
    }
    s->map_len = bytes;
    s->map = mmap(NULL, s->map_len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (s->map == MAP_FAILED) { s->map = NULL; return mgt__fail(MGT_ERROR_DATA, "%s: %s: cannot map: %s", key, path, strerror(errno)); }
    s->tokens = (const unsigned char *)s->map + MGT_SHARD_HEADER_BYTES;
    s->n = count;
    for (i = 0; i < count; i++) {
        uint32_t t = mgt__shard_token(s, i);
        max_token = t > max_token ? t : max_token;
    }
    if (count && max_token >= (uint32_t)vocab_size) {
        for (i = 0; mgt__shard_token(s, i) != max_token; i++) {}
        mgt__shard_close(s);
        return mgt__fail(MGT_ERROR_DATA, "%s: %s: token id %lu (token %zu of the shard) is beyond the vocabulary (model.vocab_size = %d); "
                         "was it prepared with another tokenizer?", key, path, (unsigned long)max_token, i, vocab_size);
    }
    return MGT_OK;
}

MGTDEF mgt_result mgt_shard_check(const char *path, int vocab_size, size_t *n_tokens) {
    mgt__shard s;
    mgt_result r;
    if (!path) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_shard_check: path is required");
    r = mgt__shard_open(&s, path, "shard", vocab_size);
    if (r != MGT_OK) return r;
    if (n_tokens) *n_tokens = s.n;
    mgt__shard_close(&s);
    return MGT_OK;
}

#define MGT__STREAM_TRAIN 0x747261696eULL
#define MGT__STREAM_VAL 0x76616cULL

/* The shards of data.train (or data.val): a comma-separated list of files or glob patterns, each
   pattern's files in name order. A sequence never crosses shards: shard k offers n_k - T starts,
   and the starts of all shards are numbered one after the other, so sequence i of step `step`
   starts at start number hash(seed, step, i) mod (all starts): a pure function of (seed, step, i)
   whatever the layout, and with one shard the same positions as ever. */
typedef struct mgt__loader {
    mgt__shard *shards;
    int nshards;
    size_t *first_start;        /* nshards + 1: the number of the first start of each shard, then the total */
    int T, rows;
    uint64_t seed;
    uint32_t *buf[2];
    long long buf_step[2], want;
    int busy, quit, started, inited;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} mgt__loader;

/* where sequence i of a step starts: its shard and the offset in it */
static const mgt__shard *mgt__loader_where(const mgt__loader *ld, uint64_t stream, uint64_t step, uint64_t i, size_t *off) {
    size_t g = (size_t)(mgt_hash3(ld->seed ^ stream, step, i) % (uint64_t)ld->first_start[ld->nshards]);
    int lo = 0, hi = ld->nshards - 1;
    while (lo < hi) { /* the shard whose starts hold g */
        int mid = (lo + hi + 1) / 2;
        if (ld->first_start[mid] <= g) lo = mid;
        else hi = mid - 1;
    }
    *off = g - ld->first_start[lo];
    return &ld->shards[lo];
}

/* the T + 1 tokens of sequence i of a step into out, widened to 32 bits whatever the shard's width */
static void mgt__loader_sequence(const mgt__loader *ld, uint64_t stream, uint64_t step, uint64_t i, uint32_t *out) {
    size_t off, t;
    const mgt__shard *s = mgt__loader_where(ld, stream, step, i, &off);
    for (t = 0; t <= (size_t)ld->T; t++) out[t] = mgt__shard_token(s, off + t);
}

/* fills rows (count, T+1) of the given step; the loader thread prefetches the next step */
static void mgt__loader_fill(const mgt__loader *ld, long long step, uint32_t *out) {
    int i;
    for (i = 0; i < ld->rows; i++) mgt__loader_sequence(ld, MGT__STREAM_TRAIN, (uint64_t)step, (uint64_t)i, out + (size_t)i * (size_t)(ld->T + 1));
}

static void *mgt__loader_main(void *arg) {
    mgt__loader *ld = (mgt__loader *)arg;
    pthread_mutex_lock(&ld->mu);
    for (;;) {
        long long s;
        while (!ld->busy && !ld->quit) pthread_cond_wait(&ld->cv, &ld->mu);
        if (ld->quit) break;
        s = ld->want;
        pthread_mutex_unlock(&ld->mu);
        mgt__loader_fill(ld, s, ld->buf[s & 1]);
        pthread_mutex_lock(&ld->mu);
        ld->buf_step[s & 1] = s;
        ld->busy = 0;
        pthread_cond_broadcast(&ld->cv);
    }
    pthread_mutex_unlock(&ld->mu);
    return NULL;
}

/* tokens of step `step`, valid until the next call; starts prefetching step+1 */
static const uint32_t *mgt__loader_get(mgt__loader *ld, long long step) {
    pthread_mutex_lock(&ld->mu);
    while (ld->busy) pthread_cond_wait(&ld->cv, &ld->mu);
    if (ld->buf_step[step & 1] != step) {
        mgt__loader_fill(ld, step, ld->buf[step & 1]);
        ld->buf_step[step & 1] = step;
    }
    ld->want = step + 1;
    ld->busy = ld->started;
    pthread_cond_broadcast(&ld->cv);
    pthread_mutex_unlock(&ld->mu);
    return ld->buf[step & 1];
}

static void mgt__loader_close(mgt__loader *ld);

static int mgt__strcmp_ptr(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* the files of a data spec: comma-separated paths or glob patterns, each pattern's matches in name
   order (bytes, whatever the locale); a pattern that matches nothing is an error naming it, an
   existing file is itself even when its name has glob characters; a file listed twice counts once */
static mgt_result mgt__data_files(const char *spec, const char *key, glob_t *files) {
    char item[MGT_STR_MAX];
    const char *p = spec;
    int flags = 0;
    size_t before = 0, i, j, kept;
    memset(files, 0, sizeof *files);
    while (*p) {
        size_t n = strcspn(p, ",");
        int rc;
        struct stat st;
        while (n && (*p == ' ' || *p == '\t')) { p++; n--; }
        if (n >= sizeof item) {
            if (flags) globfree(files);
            return mgt__fail(MGT_ERROR_DATA, "%s: an item of '%.60s...' is longer than %d characters", key, spec, (int)sizeof item - 1);
        }
        memcpy(item, p, n);
        item[n] = 0;
        while (n && (item[n - 1] == ' ' || item[n - 1] == '\t')) item[--n] = 0;
        p += strcspn(p, ",");
        if (*p == ',') p++;
        if (!item[0]) continue;
        rc = glob(item, flags | GLOB_ERR | GLOB_NOSORT, NULL, files);
        if (rc == GLOB_NOMATCH) {
            if (!strpbrk(item, "*?[") || !stat(item, &st)) { /* a plain path (reading it says why it fails), or a file named so */
                rc = glob(item, flags | GLOB_NOCHECK | GLOB_NOESCAPE | GLOB_NOSORT, NULL, files);
                if (rc == 0 && strpbrk(item, "*?[")) { /* GLOB_NOCHECK gave the pattern back: it is the file's name */ }
            } else {
                if (flags) globfree(files);
                return mgt__fail(MGT_ERROR_DATA, "%s: '%s' matches no file (make the shards with `mgt prepare`, or check the pattern)", key, item);
            }
        }
        if (rc == GLOB_ABORTED && errno == ENOENT) { /* the pattern's folder does not exist: nothing prepared there yet */
            char folder[sizeof item], *slash;
            if (flags) globfree(files);
            memcpy(folder, item, sizeof folder);
            slash = strrchr(folder, '/');
            if (slash) *slash = 0;
            return mgt__fail(MGT_ERROR_DATA, "%s: '%s' matches no file: the folder %s does not exist (make the shards there with `mgt prepare`)", key, item,
                             slash ? folder : ".");
        }
        if (rc != 0) {
            if (flags) globfree(files);
            return mgt__fail(rc == GLOB_NOSPACE ? MGT_ERROR_MEMORY : MGT_ERROR_DATA, "%s: cannot list '%s': %s", key, item, strerror(errno));
        }
        qsort(files->gl_pathv + before, files->gl_pathc - before, sizeof(char *), mgt__strcmp_ptr);
        before = files->gl_pathc;
        flags = GLOB_APPEND;
    }
    if (!flags) return mgt__fail(MGT_ERROR_DATA, "%s: '%s' names no file", key, spec);
    { /* the same file twice (by its identity, not its name) counts once */
        struct stat st;
        unsigned long long *id = (unsigned long long *)MGT_MALLOC(sizeof(unsigned long long) * 2 * (files->gl_pathc + 1));
        if (!id) { globfree(files); return mgt__fail(MGT_ERROR_MEMORY, "out of memory listing %s", key); }
        for (i = 0, kept = 0; i < files->gl_pathc; i++) {
            int seen = 0;
            char *t;
            if (!stat(files->gl_pathv[i], &st)) {
                for (j = 0; j < kept && !seen; j++) seen = id[2 * j] == (unsigned long long)st.st_dev && id[2 * j + 1] == (unsigned long long)st.st_ino;
                id[2 * kept] = (unsigned long long)st.st_dev;
                id[2 * kept + 1] = (unsigned long long)st.st_ino;
            } else id[2 * kept] = id[2 * kept + 1] = ~0ULL - kept; /* unreadable: kept, reading it says why */
            if (seen) continue;
            t = files->gl_pathv[kept];
            files->gl_pathv[kept] = files->gl_pathv[i];
            files->gl_pathv[i] = t;
            kept++;
        }
        MGT_FREE(id);
        for (i = kept; i < files->gl_pathc; i++) { free(files->gl_pathv[i]); files->gl_pathv[i] = NULL; } /* libc: glob's own */
    }
    files->gl_pathc = kept;
    return MGT_OK;
}

static mgt_result mgt__loader_open(mgt__loader *ld, const char *spec, const char *key, int vocab_size, int T, int rows, uint64_t seed, int prefetch) {
    mgt_result r;
    glob_t files;
    size_t k;
    memset(ld, 0, sizeof *ld);
    MGT__TRY(mgt__data_files(spec, key, &files));
    ld->shards = (mgt__shard *)MGT_MALLOC(sizeof(mgt__shard) * files.gl_pathc);
    ld->first_start = (size_t *)MGT_MALLOC(sizeof(size_t) * (files.gl_pathc + 1));
    if (!ld->shards || !ld->first_start) { globfree(&files); mgt__loader_close(ld); return mgt__fail(MGT_ERROR_MEMORY, "out of memory for the data loader"); }
    ld->first_start[0] = 0;
    for (k = 0; k < files.gl_pathc; k++) {
        const char *path = files.gl_pathv[k];
        r = mgt__shard_open(&ld->shards[k], path, key, vocab_size);
        if (r != MGT_OK) { globfree(&files); mgt__loader_close(ld); return r; }
        ld->nshards++;
        if (ld->shards[k].n < (size_t)T + 1) {
            mgt__fail(MGT_ERROR_CONFIG, "%s: %s has %zu tokens, fewer than seq_len + 1 = %d; lower [model] seq_len or use more data", key, path, ld->shards[k].n, T + 1);
            globfree(&files);
            mgt__loader_close(ld);
            return MGT_ERROR_CONFIG;
        }
        ld->first_start[k + 1] = ld->first_start[k] + (ld->shards[k].n - (size_t)T);
    }
    globfree(&files);
    ld->T = T;
    ld->rows = rows;
    ld->seed = seed;
    ld->buf_step[0] = ld->buf_step[1] = -1;
    ld->buf[0] = (uint32_t *)MGT_MALLOC(sizeof(uint32_t) * (size_t)rows * (size_t)(T + 1) * 2);
    if (!ld->buf[0]) { mgt__loader_close(ld); return mgt__fail(MGT_ERROR_MEMORY, "out of memory for the data loader"); }
    ld->buf[1] = ld->buf[0] + (size_t)rows * (size_t)(T + 1);
    pthread_mutex_init(&ld->mu, NULL);
    pthread_cond_init(&ld->cv, NULL);
    ld->inited = 1;
    if (prefetch && !pthread_create(&ld->thread, NULL, mgt__loader_main, ld)) ld->started = 1;
    return MGT_OK;
}

/* "[data] train", after where the preset set it ("preset.ini:12: [data] train"), for messages */
static const char *mgt__data_key(const mgt_config *cfg, const char *name, char *out, size_t cap) {
    char where[300];
    mgt_config_where(cfg, "data", name, where, sizeof where);
    snprintf(out, cap, "%s%s[data] %s", where, where[0] ? ": " : "", name);
    return out;
}

/* a data spec's shards, as a run would read them: the files, their tokens in all */
MGTDEF mgt_result mgt_data_check(const char *spec, const char *name, int vocab_size, int seq_len, int *n_files, size_t *n_tokens) {
    mgt__loader ld;
    int k;
    if (!spec) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_data_check: spec is required");
    MGT__TRY(mgt__loader_open(&ld, spec, name ? name : "data", vocab_size, seq_len, 1, 0, 0));
    if (n_files) *n_files = ld.nshards;
    if (n_tokens) for (*n_tokens = 0, k = 0; k < ld.nshards; k++) *n_tokens += ld.shards[k].n;
    mgt__loader_close(&ld);
    return MGT_OK;
}

static void mgt__loader_close(mgt__loader *ld) {
    int k;
    if (ld->started) {
        pthread_mutex_lock(&ld->mu);
        ld->quit = 1;
        pthread_cond_broadcast(&ld->cv);
        pthread_mutex_unlock(&ld->mu);
        pthread_join(ld->thread, NULL);
    }
    if (ld->inited) {
        pthread_mutex_destroy(&ld->mu);
        pthread_cond_destroy(&ld->cv);
    }
    MGT_FREE(ld->buf[0]);
    for (k = 0; k < ld->nshards; k++) mgt__shard_close(&ld->shards[k]);
    MGT_FREE(ld->shards);
    MGT_FREE(ld->first_start);
    memset(ld, 0, sizeof *ld);
}

