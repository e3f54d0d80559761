/* src/safetensors.c - safetensors files: reading, writing, the JSON header */
/* ---- safetensors: an 8-byte header length, a JSON header, then the raw tensors --------------- */

typedef struct mgt__st_tensor {
    char name[96];
    char dtype[8];              /* "F32", "F64", "I32" */
    int ndim;
    long long shape[4];
    size_t begin, end;          /* byte offsets into the data section */
} mgt__st_tensor;

typedef struct mgt__st_file {
    unsigned char *buf;         /* the whole file (the data section moved to `data`) */
    size_t size, data_start;    /* data_start: the data section's offset in the file */
    unsigned char *data;        /* the data section, 8-byte aligned whatever the header's length */
    size_t checksum_at;         /* offset in the file of the checksum's 16 hex digits; 0: none */
    mgt__st_tensor *t;
    int n;
    char **meta;                /* nmeta pairs: key, value */
    int nmeta;
} mgt__st_file;

/* A checkpoint's checksum: h = mix(h ^ word) over its 8-byte little-endian words, then
   h = mix(h ^ byte) over the bytes of a last partial word, from h = 0xcbf29ce484222325, where mix
   is splitmix64's finaliser. mix is a bijection that spreads every bit over every other, so a
   change of one word always changes the result and any other damage goes unnoticed with a chance
   of 2^-64 (FNV's multiply alone, which this replaced, never carries a change to lower bits: two
   flipped top bits cancelled). Streamed: the bytes may come in pieces of any size and hash as one
   run (a checkpoint hashes its length, header and tensors as they are written). */
typedef struct mgt__hash { uint64_t h; unsigned char tail[8]; size_t ntail; } mgt__hash;
static void mgt__hash_init(mgt__hash *s) { s->h = 0xcbf29ce484222325ULL; s->ntail = 0; }
static void mgt__hash_word(mgt__hash *s, const unsigned char *p) {
    uint64_t w;
    memcpy(&w, p, 8);
    s->h = mgt__mix64(s->h ^ w);
}
static void mgt__hash_update(mgt__hash *s, const void *data, size_t bytes) {
    const unsigned char *p = (const unsigned char *)data;
    if (s->ntail) { /* complete a word begun by the previous piece */
        size_t take = 8 - s->ntail < bytes ? 8 - s->ntail : bytes;
        memcpy(s->tail + s->ntail, p, take);
        s->ntail += take;
        p += take;
        bytes -= take;
        if (s->ntail < 8) return;
        mgt__hash_word(s, s->tail);
        s->ntail = 0;
    }
    for (; bytes >= 8; p += 8, bytes -= 8) mgt__hash_word(s, p);
    memcpy(s->tail + s->ntail, p, bytes);
    s->ntail += bytes;
}
static uint64_t mgt__hash_final(const mgt__hash *s) {
    uint64_t h = s->h;
    size_t i;
    for (i = 0; i < s->ntail; i++) h = mgt__mix64(h ^ s->tail[i]);
    return h;
}

/* JSON string with escapes into a growing buffer */
typedef struct mgt__buf { char *p; size_t n, cap; int oom; } mgt__buf;
static void mgt__buf_put(mgt__buf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        char *p;
        while (cap < b->n + n + 1) cap *= 2;
        p = (char *)MGT_REALLOC(b->p, cap);
        if (!p) { b->oom = 1; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void mgt__buf_str(mgt__buf *b, const char *s) { mgt__buf_put(b, s, strlen(s)); }
MGT__PRINTF(2, 3) static void mgt__buf_printf(mgt__buf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) mgt__buf_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}
static void mgt__buf_json_string(mgt__buf *b, const char *s) {
    mgt__buf_str(b, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') { char e[2] = {'\\', (char)c}; mgt__buf_put(b, e, 2); }
        else if (c == '\n') mgt__buf_str(b, "\\n");
        else if (c == '\t') mgt__buf_str(b, "\\t");
        else if (c < 0x20) mgt__buf_printf(b, "\\u%04x", c);
        else mgt__buf_put(b, (const char *)&c, 1);
    }
    mgt__buf_str(b, "\"");
}

typedef struct mgt__st_out {
    const char *name;
    const void *data;
    const char *dtype; /* "F32" */
    int ndim;
    long long shape[2];
    size_t bytes;
} mgt__st_out;

static mgt_result mgt__fsync_dir(const char *path) {
    char dir[1024];
    const char *slash = strrchr(path, '/');
    int fd;
    if (!slash) mgt__strlcpy(dir, ".", sizeof dir);
    else {
        size_t n = (size_t)(slash - path);
        if (n >= sizeof dir) n = sizeof dir - 1;
        memcpy(dir, path, n ? n : 1);
        dir[n ? n : 1] = 0;
    }
    fd = open(dir, O_RDONLY);
    if (fd >= 0) { (void)fsync(fd); close(fd); }
    return MGT_OK;
}

/* The checksum of a checkpoint covers the whole file: the header length, the header (with the 16
   hex digits of the checksum itself read as '0') and the tensors, so no bit of it can change
   unnoticed. */
static const char mgt__checksum_zeros[16] = {'0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0'};

/* finishes a file written to tmp: flush, fsync, close, rename over path, fsync of the folder */
static mgt_result mgt__atomic_finish(FILE *f, int ok, const char *tmp, const char *path) {
    ok &= fflush(f) == 0;
    ok &= fsync(fileno(f)) == 0;
    ok &= fclose(f) == 0;
    if (!ok || rename(tmp, path)) {
        int e = errno;
        remove(tmp);
        return mgt__fail(MGT_ERROR_IO, "%s: cannot write: %s%s", path, strerror(e), e == ENOSPC || e == EDQUOT ? " (the disk is full)" : "");
    }
    return mgt__fsync_dir(path);
}
/* writes path atomically: path.tmp, fsync, rename, fsync of the folder. meta: nmeta key/value pairs. */
static mgt_result mgt__st_write(const char *path, const mgt__st_out *t, int n, const char *const *meta, int nmeta) {
    mgt__buf h;
    mgt__hash sum;
    char tmp[1300], digits[17];
    uint64_t len;
    size_t off = 0, sum_at;
    int i, ok = 1;
    FILE *f;
    memset(&h, 0, sizeof h);
    mgt__buf_str(&h, "{\"__metadata__\":{");
    for (i = 0; i < nmeta; i++) {
        mgt__buf_json_string(&h, meta[2 * i]);
        mgt__buf_str(&h, ":");
        mgt__buf_json_string(&h, meta[2 * i + 1]);
        mgt__buf_str(&h, ",");
    }
    mgt__buf_str(&h, "\"checksum\":\"");
    sum_at = h.n;
    mgt__buf_put(&h, mgt__checksum_zeros, 16);
    mgt__buf_str(&h, "\"}");
    for (i = 0; i < n; i++) {
        mgt__buf_str(&h, ",");
        mgt__buf_json_string(&h, t[i].name);
        mgt__buf_printf(&h, ":{\"dtype\":\"%s\",\"shape\":[", t[i].dtype);
        if (t[i].ndim >= 1) mgt__buf_printf(&h, "%lld", t[i].shape[0]);
        if (t[i].ndim >= 2) mgt__buf_printf(&h, ",%lld", t[i].shape[1]);
        mgt__buf_printf(&h, "],\"data_offsets\":[%zu,%zu]}", off, off + t[i].bytes);
        off += t[i].bytes;
    }
    mgt__buf_str(&h, "}");
    while (!h.oom && h.n % 8) mgt__buf_str(&h, " ");
    if (h.oom) { MGT_FREE(h.p); return mgt__fail(MGT_ERROR_MEMORY, "out of memory writing %s", path); }
    len = (uint64_t)h.n;
    mgt__hash_init(&sum);
    mgt__hash_update(&sum, &len, 8);
    mgt__hash_update(&sum, h.p, h.n);
    for (i = 0; i < n; i++) mgt__hash_update(&sum, t[i].data, t[i].bytes);
    snprintf(digits, sizeof digits, "%016llx", (unsigned long long)mgt__hash_final(&sum));
    memcpy(h.p + sum_at, digits, 16);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    f = fopen(tmp, "wb");
    if (!f) { MGT_FREE(h.p); return mgt__fail(MGT_ERROR_IO, "%s: cannot create: %s", tmp, strerror(errno)); }
    ok &= fwrite(&len, 8, 1, f) == 1;
    ok &= fwrite(h.p, 1, h.n, f) == h.n;
    for (i = 0; i < n && ok; i++) ok &= fwrite(t[i].data, 1, t[i].bytes, f) == t[i].bytes;
    MGT_FREE(h.p);
    return mgt__atomic_finish(f, ok, tmp, path);
}

/* a small JSON reader for safetensors headers: objects, strings, numbers and arrays of numbers */
static void mgt__json_ws(const char **p) { while (**p == ' ' || **p == '\n' || **p == '\r' || **p == '\t') (*p)++; }
static int mgt__json_string(const char **p, mgt__buf *out) {
    const char *s = *p;
    mgt__json_ws(&s);
    if (*s != '"') return 0;
    s++;
    while (*s && *s != '"') {
        if (*s == '\\') {
            char c = *++s, e = 0;
            if (!c) return 0;
            if (c == 'u') {
                unsigned cp = 0;
                int k;
                char u[4];
                for (k = 1; k <= 4; k++) {
                    char d = s[k];
                    if (!d) return 0;
                    cp = cp * 16 + (unsigned)(d <= '9' ? d - '0' : (d | 32) - 'a' + 10);
                }
                s += 5;
                if (cp < 0x80) { u[0] = (char)cp; mgt__buf_put(out, u, 1); }
                else if (cp < 0x800) { u[0] = (char)(0xc0 | (cp >> 6)); u[1] = (char)(0x80 | (cp & 63)); mgt__buf_put(out, u, 2); }
                else { u[0] = (char)(0xe0 | (cp >> 12)); u[1] = (char)(0x80 | ((cp >> 6) & 63)); u[2] = (char)(0x80 | (cp & 63)); mgt__buf_put(out, u, 3); }
                continue;
            }
            e = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c == 'b' ? '\b' : c == 'f' ? '\f' : c;
            mgt__buf_put(out, &e, 1);
            s++;
        } else {
            mgt__buf_put(out, s, 1);
            s++;
        }
    }
    if (*s != '"') return 0;
    *p = s + 1;
    if (!out->p) mgt__buf_put(out, "", 0);
    return !out->oom;
}
static int mgt__json_expect(const char **p, char c) {
    mgt__json_ws(p);
    if (**p != c) return 0;
    (*p)++;
    return 1;
}
static int mgt__json_numbers(const char **p, long long *v, int cap) { /* [n, n, ...]; returns count or -1 */
    int n = 0;
    if (!mgt__json_expect(p, '[')) return -1;
    mgt__json_ws(p);
    if (**p == ']') { (*p)++; return 0; }
    for (;;) {
        char *end;
        long long x;
        mgt__json_ws(p);
        x = strtoll(*p, &end, 10);
        if (end == *p || n >= cap) return -1;
        v[n++] = x;
        *p = end;
        mgt__json_ws(p);
        if (**p == ',') { (*p)++; continue; }
        if (**p == ']') { (*p)++; return n; }
        return -1;
    }
}

static void mgt__st_close(mgt__st_file *f) {
    int i;
    for (i = 0; i < 2 * f->nmeta; i++) MGT_FREE(f->meta[i]);
    MGT_FREE(f->meta);
    MGT_FREE(f->t);
    MGT_FREE(f->buf);
    memset(f, 0, sizeof *f);
}

/* reads a safetensors file, or only its header (header_only: no tensor data, `data` is NULL) */
/* whether the 8 bytes read (the header's length) are followed by the header's '{', as in every
   safetensors file; leaves fp just after the length */
static int mgt__st_opens_header(FILE *fp) {
    return fgetc(fp) == '{' && fseek(fp, 8, SEEK_SET) == 0;
}

/* the header's "__metadata__" object, after its '{': string keys and values, each key once. 1, or 0
   when malformed */
static int mgt__st_parse_metadata(mgt__st_file *f, const char **pp, int *cap_m) {
    const char *p = *pp;
    for (;;) {
        mgt__buf k, v;
        mgt__json_ws(&p);
        if (*p == '}') { *pp = p + 1; return 1; }
        memset(&k, 0, sizeof k);
        memset(&v, 0, sizeof v);
        if (!mgt__json_string(&p, &k) || !mgt__json_expect(&p, ':')) { MGT_FREE(k.p); return 0; }
        mgt__json_ws(&p);
        if (!strcmp(k.p, "checksum")) f->checksum_at = (size_t)(p + 1 - (const char *)f->buf);
        if (!mgt__json_string(&p, &v)) { MGT_FREE(k.p); MGT_FREE(v.p); return 0; }
        {
            int i;
            for (i = 0; i < f->nmeta; i++)
                if (!strcmp(f->meta[2 * i], k.p)) { MGT_FREE(k.p); MGT_FREE(v.p); return 0; } /* a key twice: which one counts? */
        }
        if (f->nmeta == *cap_m) {
            char **m;
            *cap_m = *cap_m ? 2 * *cap_m : 16;
            m = (char **)MGT_REALLOC(f->meta, sizeof(char *) * 2 * (size_t)*cap_m);
            if (!m) { MGT_FREE(k.p); MGT_FREE(v.p); return 0; }
            f->meta = m;
        }
        f->meta[2 * f->nmeta] = k.p;
        f->meta[2 * f->nmeta + 1] = v.p;
        f->nmeta++;
        mgt__json_ws(&p);
        if (*p == ',') p++;
    }
}

/* one tensor's object, after its '{': its dtype, shape and data offsets. 1; 0 when malformed; -1
   when its data ends past the file */
static int mgt__st_parse_tensor(mgt__st_file *f, const char **pp, const char *name, int *cap_t) {
    const char *p = *pp;
    mgt__st_tensor *t;
    if (f->n == *cap_t) {
        mgt__st_tensor *nt;
        *cap_t = *cap_t ? 2 * *cap_t : 64;
        nt = (mgt__st_tensor *)MGT_REALLOC(f->t, sizeof *nt * (size_t)*cap_t);
        if (!nt) return 0;
        f->t = nt;
    }
    t = &f->t[f->n++];
    memset(t, 0, sizeof *t);
    mgt__strlcpy(t->name, name, sizeof t->name);
    for (;;) {
        mgt__buf field;
        mgt__json_ws(&p);
        if (*p == '}') { p++; break; }
        memset(&field, 0, sizeof field);
        if (!mgt__json_string(&p, &field) || !mgt__json_expect(&p, ':')) { MGT_FREE(field.p); return 0; }
        if (!strcmp(field.p, "dtype")) {
            mgt__buf v;
            memset(&v, 0, sizeof v);
            if (!mgt__json_string(&p, &v)) { MGT_FREE(field.p); MGT_FREE(v.p); return 0; }
            mgt__strlcpy(t->dtype, v.p, sizeof t->dtype);
            MGT_FREE(v.p);
        } else if (!strcmp(field.p, "shape")) {
            t->ndim = mgt__json_numbers(&p, t->shape, 4);
            if (t->ndim < 0) { MGT_FREE(field.p); return 0; }
        } else if (!strcmp(field.p, "data_offsets")) {
            long long o[2];
            if (mgt__json_numbers(&p, o, 2) != 2 || o[0] < 0 || o[1] < o[0]) { MGT_FREE(field.p); return 0; }
            t->begin = (size_t)o[0];
            t->end = (size_t)o[1];
        } else { MGT_FREE(field.p); return 0; }
        MGT_FREE(field.p);
        mgt__json_ws(&p);
        if (*p == ',') p++;
    }
    *pp = p;
    return t->end > f->size - f->data_start ? -1 : 1;
}

static mgt_result mgt__st_read(mgt__st_file *f, const char *path, int header_only) {
    FILE *fp;
    uint64_t hlen;
    const char *p, *end;
    struct stat st;
    size_t want;
    char why[256];
    int cap_t = 0, cap_m = 0, fd;
    memset(f, 0, sizeof *f);
    fd = mgt__open_regular(path, &st, why, sizeof why);
    if (fd < 0) return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: cannot open the checkpoint: %s", path, why);
    fp = fdopen(fd, "rb");
    if (!fp) { close(fd); return mgt__fail(MGT_ERROR_MEMORY, "%s: cannot open: %s", path, strerror(errno)); }
    if (st.st_size < 8 || fread(&hlen, 8, 1, fp) != 1) {
        fclose(fp);
        return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: too short to be a safetensors file", path);
    }
    f->size = (size_t)st.st_size;
    if (!mgt__st_opens_header(fp)) {
        unsigned char head[8];
        int text = 1, i;
        memcpy(head, &hlen, 8);
        for (i = 0; i < 8; i++) text &= head[i] == '\n' || head[i] == '\t' || head[i] == '\r' || (head[i] >= 32 && head[i] < 127);
        fclose(fp);
        return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: not a checkpoint (a safetensors file opens with its header's length and '{')%s", path,
                         text ? "; it begins as text: a preset, or another text file?" : "");
    }
    if (hlen > f->size - 8) {
        fclose(fp);
        return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: truncated: header of %llu bytes in a %zu-byte file", path, (unsigned long long)hlen, f->size);
    }
    f->data_start = 8 + (size_t)hlen;
    want = header_only ? f->data_start : f->size;
    f->buf = (unsigned char *)MGT_MALLOC(want + 8); /* room to align the data section, and a terminator */
    if (!f->buf) { fclose(fp); return mgt__fail(MGT_ERROR_MEMORY, "%s: out of memory (%zu bytes)", path, want); }
    memcpy(f->buf, &hlen, 8);
    if (fread(f->buf + 8, 1, want - 8, fp) != want - 8) { fclose(fp); mgt__st_close(f); return mgt__fail(MGT_ERROR_IO, "%s: read error", path); }
    fclose(fp);
    {
        unsigned char save = f->buf[f->data_start];
        f->buf[f->data_start] = 0; /* terminate the header for parsing */
        p = (const char *)f->buf + 8;
        end = p + hlen;
        if (!mgt__json_expect(&p, '{')) goto bad;
        for (;;) {
            mgt__buf key;
            int got;
            mgt__json_ws(&p);
            if (*p == '}') break;
            memset(&key, 0, sizeof key);
            if (!mgt__json_string(&p, &key) || !mgt__json_expect(&p, ':') || !mgt__json_expect(&p, '{')) { MGT_FREE(key.p); goto bad; }
            if (!strcmp(key.p, "__metadata__")) got = mgt__st_parse_metadata(f, &p, &cap_m);
            else got = mgt__st_parse_tensor(f, &p, key.p, &cap_t);
            MGT_FREE(key.p);
            if (got < 0) {
                f->buf[f->data_start] = save;
                mgt__st_close(f);
                return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: truncated: tensor data ends past the end of the file", path);
            }
            if (!got) goto bad;
            mgt__json_ws(&p);
            if (*p == ',') p++;
        }
        if (p > end) goto bad;
        f->buf[f->data_start] = save;
    }
    if (header_only) return MGT_OK;
    /* a header whose length is not a multiple of 8 leaves the tensors unaligned: move them */
    f->data = f->buf + ((f->data_start + 7) & ~(size_t)7);
    if (f->data != f->buf + f->data_start) memmove(f->data, f->buf + f->data_start, f->size - f->data_start);
    return MGT_OK;
bad:
    mgt__st_close(f);
    return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: malformed safetensors header", path);
}

static mgt_result mgt__st_open(mgt__st_file *f, const char *path) { return mgt__st_read(f, path, 0); }

static const mgt__st_tensor *mgt__st_find(const mgt__st_file *f, const char *name) {
    int i;
    for (i = 0; i < f->n; i++) if (!strcmp(f->t[i].name, name)) return &f->t[i];
    return NULL;
}
static const char *mgt__st_meta(const mgt__st_file *f, const char *key) {
    int i;
    for (i = 0; i < f->nmeta; i++) if (!strcmp(f->meta[2 * i], key)) return f->meta[2 * i + 1];
    return NULL;
}
static const void *mgt__st_data(const mgt__st_file *f, const mgt__st_tensor *t) { return f->data + t->begin; }

#define MGT__CHECKPOINT_FORMAT "mgt-checkpoint-2"

/* a metadata number, strictly: the whole text is an integer in [lo, hi] */
static int mgt__meta_int(const mgt__st_file *f, const char *key, long long lo, long long hi, long long *out) {
    const char *text = mgt__st_meta(f, key);
    char *end;
    long long v;
    if (!text) return 0;
    errno = 0;
    v = strtoll(text, &end, 10);
    if (end == text || *end || errno || v < lo || v > hi || !(text[0] == '-' || (text[0] >= '0' && text[0] <= '9'))) return 0;
    *out = v;
    return 1;
}

/* opens an mgt checkpoint: a safetensors file of our format whose checksum covers every byte */
static mgt_result mgt__checkpoint_open(mgt__st_file *f, const char *path) {
    const char *format, *sum_text;
    mgt__hash sum;
    char text[17];
    MGT__TRY(mgt__st_open(f, path));
    format = mgt__st_meta(f, "format");
    sum_text = mgt__st_meta(f, "checksum");
    if (!format || strncmp(format, "mgt-checkpoint-", 15)) {
        mgt__st_close(f);
        return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: not an mgt checkpoint (no \"format\": \"" MGT__CHECKPOINT_FORMAT "\" in its metadata)%s", path,
                         format ? "" : "; the weights of a Hugging Face model start a run with [model] init = its file or folder");
    }
    if (strcmp(format, MGT__CHECKPOINT_FORMAT)) {
        mgt__fail(MGT_ERROR_CHECKPOINT, "%s: checkpoint format '%s'; this mgt reads " MGT__CHECKPOINT_FORMAT "%s", path, format,
                  !strcmp(format, "mgt-checkpoint-1") ? " (format 1, of mgt 0.1.0, has a checksum that leaves its header unchecked)" : "");
        mgt__st_close(f);
        return MGT_ERROR_CHECKPOINT;
    }
    if (!sum_text || !f->checksum_at || strlen(sum_text) != 16 || f->checksum_at + 16 > f->data_start ||
        memcmp(f->buf + f->checksum_at, sum_text, 16)) {
        mgt__st_close(f);
        return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: has no checksum of 16 hex digits in its metadata, so it cannot be trusted", path);
    }
    mgt__hash_init(&sum);
    mgt__hash_update(&sum, f->buf, f->checksum_at);
    mgt__hash_update(&sum, mgt__checksum_zeros, 16);
    mgt__hash_update(&sum, f->buf + f->checksum_at + 16, f->data_start - f->checksum_at - 16);
    mgt__hash_update(&sum, f->data, f->size - f->data_start);
    snprintf(text, sizeof text, "%016llx", (unsigned long long)mgt__hash_final(&sum));
    if (strcmp(text, sum_text)) {
        mgt__fail(MGT_ERROR_CHECKPOINT, "%s: checksum mismatch (stored %s, computed %s): the file is damaged; resume from an older checkpoint", path, sum_text, text);
        mgt__st_close(f);
        return MGT_ERROR_CHECKPOINT;
    }
    return MGT_OK;
}

