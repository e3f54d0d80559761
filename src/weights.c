/* src/weights.c - [model] init's sources read as mgt's global tensors: what every source shares, mgt
   checkpoints, llm.c's .bin */
/* ---- weights in: the sources of [model] init ------------------------------------------------
   init reads weights only (the run starts at step 0 with fresh AdamW moments and data position)
   from an mgt checkpoint (a file or a run folder's newest), a Hugging Face folder (src/weights_hf.c)
   or llm.c's GPT-2 .bin. Every source becomes mgt's global tensors (fp32 master weights, whatever
   the file's F32/F16/BF16/F64), which the ranks slice as they do on resume, so init works under
   every layout. A source names its tensors through its `parts`: mgt's own names here, Hugging
   Face's in src/weights_hf.c; src/weights_init.c opens the source init names. */

enum { MGT__SRC_MGT, MGT__SRC_GPT2, MGT__SRC_LLAMA, MGT__SRC_LLMC };
#define MGT__LLMC_MAGIC 20240326
/* what to open of a source: its model (0), its tensors too (1), or a Hugging Face folder's tensor
   index alone (a check of the shapes before a run allocates anything) */
#define MGT__SRC_INDEX 2
/* what init takes, for the messages that refuse what it names */
#ifndef MGT_NO_HF
#define MGT__INIT_TAKES "an mgt checkpoint or run folder, a Hugging Face folder (config.json beside model.safetensors) or llm.c's .bin"
#else
#define MGT__INIT_TAKES "an mgt checkpoint or run folder, or llm.c's .bin (not a Hugging Face folder: this program was built with MGT_NO_HF)"
#endif

/* the file's tensors that make mgt's global tensor x of the model cfg, stacked by rows in mgt's
   (out, in) order: Llama's q, k, v into c_attn and gate, up into c_fc; transpose: the file keeps
   (in, out) (GPT-2's Conv1D); src_rows: the file's rows, of which mgt takes the first `rows`
   (a position table longer than seq_len). The count, 1 to 3. Export writes the same parts. */
typedef struct mgt__part { char name[128]; int rows, src_rows, cols, transpose; } mgt__part;
typedef int (*mgt__parts_fn)(int kind, const mgt_config *cfg, int positions, const mgt_tensor_info *x, mgt__part part[3]);

typedef struct mgt__src {
    int kind;
    mgt__parts_fn parts;                    /* its names of mgt's tensors: mgt__own_parts, mgt__hf_parts */
    char path[1200];                        /* the checkpoint file, the Hugging Face folder or the .bin */
    char what[64];                          /* "config.json", "the checkpoint's preset", "the llm.c header" */
    mgt__st_file *files;                    /* the checkpoint or the Hugging Face shards */
    int nfiles;
    unsigned char *bin;                     /* llm.c: the whole file */
    size_t bin_size;
    int hdr[8];                             /* llm.c: magic, version, maxT, V, L, NH, C, Vp */
    int positions;                          /* rows of the file's position table (its longest context) */
    mgt_config model;                       /* the file's model keys */
    char field[MGT_CONFIG_NKEYS][64];       /* the file's field for each model key it gives; "" none */
} mgt__src;

/* mgt's own names (an mgt checkpoint, llm.c's .bin): one part, the whole tensor; a position table
   may have more rows than the model's seq_len */
static int mgt__own_parts(int kind, const mgt_config *cfg, int positions, const mgt_tensor_info *x, mgt__part part[3]) {
    (void)kind, (void)cfg;
    memset(part, 0, sizeof(mgt__part) * 3);
    part[0].rows = part[0].src_rows = x->shape[0];
    part[0].cols = x->ndim == 2 ? x->shape[1] : 0;
    if (!strcmp(x->name, "wpe")) part[0].src_rows = positions;
    mgt__strlcpy(part[0].name, x->name, sizeof part[0].name);
    return 1;
}

static void mgt__src_free(mgt__src *s) {
    int i;
    if (!s) return;
    for (i = 0; i < s->nfiles; i++) mgt__st_close(&s->files[i]);
    MGT_FREE(s->files);
    MGT_FREE(s->bin);
    MGT_FREE(s);
}

/* the file's value of model key `name` (text as a preset would write it) and the field it came from */
static mgt_result mgt__src_put(mgt__src *s, const char *name, const char *value, const char *field) {
    int key = mgt__find_key("model", name);
    char why[512], most[32];
    if (!strcmp(name, "seq_len")) { /* the file's positions; mgt's longest context, where the file has more (Llama 3's 131072) */
        long long n = strtoll(value, NULL, 10);
        s->positions = n > 0 && n < 2000000000 ? (int)n : 0;
        snprintf(most, sizeof most, "%d", (int)mgt__keys[key].info.max);
        if (n > (long long)mgt__keys[key].info.max) value = most;
    }
    if (!mgt__set_value(&s->model, key, value, why, sizeof why))
        return mgt__fail(MGT_ERROR_CONFIG, "%s: %s's %s = %s does not fit mgt's [model] %s: %s", s->path, s->what, field, value, name, why);
    mgt__strlcpy(s->field[key], field, sizeof s->field[key]);
    return MGT_OK;
}

/* llm.c's GPT-2 .bin (train_gpt2.c's write_model): 256 int32 of header (magic 20240326; version 3
   fp32 or 5 bf16; maxT, V, L, NH, C, Vp), then 16 tensors, layer-major, in llm.c's order below,
   each (out, in) as mgt keeps them: the header gives the model, every key GPT-2's */
static const char *const mgt__llmc_names[16] = {"wte", "wpe", "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
                                                "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight",
                                                "mlp.c_proj.bias", "ln_f.weight", "ln_f.bias"};
static void mgt__llmc_sizes(const int *hdr, long long size[16]) {
    long long maxT = hdr[2], L = hdr[4], C = hdr[6], Vp = hdr[7];
    long long s[16] = {Vp * C, maxT * C, L * C, L * C, L * 3 * C * C, L * 3 * C, L * C * C, L * C, L * C, L * C, L * 4 * C * C, L * 4 * C, L * C * 4 * C, L * C, C, C};
    memcpy(size, s, sizeof s);
}
/* the element offset of mgt's global tensor `name` in the .bin's parameters; -1 if llm.c has none */
static long long mgt__llmc_offset(const int *hdr, const char *name) {
    long long size[16], at = 0;
    int layer = -1, off = 0, i;
    const char *rest = name;
    if (sscanf(name, "h.%d.%n", &layer, &off) == 1 && off > 0) rest = name + off;
    else layer = -1;
    mgt__llmc_sizes(hdr, size);
    for (i = 0; i < 16; i++) {
        if (!strcmp(rest, mgt__llmc_names[i]) && (layer >= 0) == (i >= 2 && i < 14)) return at + (layer >= 0 ? layer * (size[i] / hdr[4]) : 0);
        at += size[i];
    }
    return -1;
}
static mgt_result mgt__llmc_open(mgt__src *s, int weights) {
    int32_t h[256];
    long long size[16], total = 0;
    struct stat st;
    char why[256], v[32];
    int i, fd = mgt__open_regular(s->path, &st, why, sizeof why);
    static const char *const keys[] = {"seq_len", "vocab_size", "n_layer", "n_head", "d_model"};
    static const char *const fields[] = {"header[2] maxT", "header[3] vocab_size", "header[4] num_layers", "header[5] num_heads", "header[6] channels"};
    s->kind = MGT__SRC_LLMC;
    s->parts = mgt__own_parts;
    mgt__strlcpy(s->what, "the llm.c header", sizeof s->what);
    if (fd < 0) return mgt__fail(MGT_ERROR_CONFIG, "%s: cannot open: %s", s->path, why);
    if (read(fd, h, sizeof h) != (ssize_t)sizeof h) { close(fd); return mgt__fail(MGT_ERROR_CONFIG, "%s: shorter than llm.c's 1024-byte header", s->path); }
    for (i = 0; i < 8; i++) s->hdr[i] = h[i];
    if (h[1] != 3 && h[1] != 5) {
        close(fd);
        return mgt__fail(MGT_ERROR_CONFIG, "%s: llm.c model version %d; mgt reads version 3 (fp32) and 5 (bf16), as train_gpt2.c/.cu write them", s->path, h[1]);
    }
    for (i = 2; i < 8; i++) if (h[i] <= 0) break;
    /* within mgt's own limits before any product of them (untrusted: a header of 1 << 30 layers and
       channels would overflow the sizes below); the vocabulary's padding at most 16 Mi rows too */
    if (i == 8 && (h[2] > 65536 || h[3] > 16777216 || h[4] > 1024 || h[5] > 1024 || h[6] > 65536 || h[7] > 16777216)) {
        close(fd);
        return mgt__fail(MGT_ERROR_CONFIG, "%s: llm.c header (maxT %d, V %d, L %d, NH %d, C %d, Vp %d) is beyond what mgt trains (maxT and C at most 65536, "
                         "V and Vp 16777216, L and NH 1024); the file is damaged or not a model", s->path, h[2], h[3], h[4], h[5], h[6], h[7]);
    }
    if (i < 8 || h[7] < h[3] || h[6] % h[5]) {
        close(fd);
        return mgt__fail(MGT_ERROR_CONFIG, "%s: llm.c header (maxT %d, V %d, L %d, NH %d, C %d, Vp %d) is not a GPT-2 model; the file is damaged", s->path, h[2], h[3],
                         h[4], h[5], h[6], h[7]);
    }
    mgt__llmc_sizes(s->hdr, size);
    for (i = 0; i < 16; i++) total += size[i];
    if ((long long)st.st_size != 1024 + total * (h[1] == 3 ? 4 : 2)) {
        close(fd);
        return mgt__fail(MGT_ERROR_CONFIG, "%s: %lld bytes, but its header's model needs %lld: the file is truncated or damaged", s->path, (long long)st.st_size,
                         1024 + total * (h[1] == 3 ? 4 : 2));
    }
    for (i = 0; i < 5; i++) {
        snprintf(v, sizeof v, "%d", h[2 + i]);
        if (mgt__src_put(s, keys[i], v, fields[i]) != MGT_OK) { close(fd); return MGT_ERROR_CONFIG; }
    }
    snprintf(v, sizeof v, "%d", 4 * h[6]);
    if (mgt__src_put(s, "d_ff", v, "4 x channels (GPT-2)") != MGT_OK || mgt__src_put(s, "n_kv_head", "0", "GPT-2") != MGT_OK ||
        mgt__src_put(s, "norm", "layernorm", "GPT-2") != MGT_OK || mgt__src_put(s, "norm_eps", "1e-5", "GPT-2") != MGT_OK ||
        mgt__src_put(s, "positions", "learned", "GPT-2") != MGT_OK || mgt__src_put(s, "mlp", "gelu", "GPT-2") != MGT_OK ||
        mgt__src_put(s, "bias", "1", "GPT-2") != MGT_OK || mgt__src_put(s, "tied_head", "1", "GPT-2") != MGT_OK) { close(fd); return MGT_ERROR_CONFIG; }
    if (weights) {
        s->bin_size = (size_t)st.st_size;
        s->bin = (unsigned char *)MGT_MALLOC(s->bin_size);
        if (!s->bin || pread(fd, s->bin, s->bin_size, 0) != (ssize_t)s->bin_size) {
            close(fd);
            return mgt__fail(s->bin ? MGT_ERROR_IO : MGT_ERROR_MEMORY, "%s: cannot read its %zu bytes", s->path, s->bin_size);
        }
    }
    close(fd);
    return MGT_OK;
}

/* an mgt checkpoint: its stored preset's model section, its weights (not the moments) */
static mgt_result mgt__ckpt_src(mgt__src *s, int weights) {
    mgt_config c;
    mgt_result res;
    int i;
    s->kind = MGT__SRC_MGT;
    s->parts = mgt__own_parts;
    mgt__strlcpy(s->what, "the checkpoint's preset", sizeof s->what);
    if ((res = mgt_checkpoint_config(s->path, &c)) != MGT_OK) {
        char why[1024];
        mgt__strlcpy(why, mgt_last_error(), sizeof why);
        return mgt__fail(res, "%s; [model] init takes " MGT__INIT_TAKES, why);
    }
    for (i = 0; i < MGT_CONFIG_NKEYS; i++) {
        char v[MGT_STR_MAX + 64], field[80];
        if (strcmp(mgt__keys[i].info.section, "model") || !strcmp(mgt__keys[i].info.name, "init")) continue;
        mgt_config_value_string(&c, i, v, sizeof v);
        snprintf(field, sizeof field, "[model] %s", mgt__keys[i].info.name);
        MGT__TRY(mgt__src_put(s, mgt__keys[i].info.name, v, field));
    }
    if (!weights) return MGT_OK;
    s->files = (mgt__st_file *)mgt__calloc(1, sizeof *s->files);
    if (!s->files) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    MGT__TRY(mgt__checkpoint_open(&s->files[0], s->path));
    s->nfiles = 1;
    return MGT_OK;
}

/* a tensor of the file by name; GPT-2 files saved without the "transformer." prefix are found too */
static const mgt__st_tensor *mgt__src_find(const mgt__src *s, const char *name, const mgt__st_file **file) {
    int i;
    for (i = 0; i < s->nfiles; i++) {
        const mgt__st_tensor *t = mgt__st_find(&s->files[i], name);
        if (t) { *file = &s->files[i]; return t; }
    }
    return s->kind == MGT__SRC_GPT2 && !strncmp(name, "transformer.", 12) ? mgt__src_find(s, name + 12, file) : NULL;
}

/* element i of raw little-endian data of a safetensors dtype (its size in bytes: 4 F32, 8 F64,
   2 BF16 or, with f16 set, F16), as fp32 */
static float mgt__st_value(const unsigned char *p, int size, int f16, size_t i) {
    if (size == 4) { float v; memcpy(&v, p + 4 * i, 4); return v; }
    if (size == 8) { double v; memcpy(&v, p + 8 * i, 8); return (float)v; }
    { uint16_t h; memcpy(&h, p + 2 * i, 2); return f16 ? mgt__f16_to_f32(h) : mgt__bf16_to_f32(h); }
}

/* the safetensors tensor of part p (name prefixed by `prefix`), checked: there, of a float dtype
   (its size in bytes in *size) and of the shape the model needs */
static mgt_result mgt__src_tensor(const mgt__src *s, const mgt__part *p, const char *prefix, const char *mgt_name, const mgt__st_file **f,
                                  const mgt__st_tensor **out, int *size) {
    char name[160];
    const mgt__st_tensor *t;
    long long want0 = p->transpose ? p->cols : p->src_rows, want1 = p->transpose ? p->src_rows : p->cols;
    int ndim = p->cols ? 2 : 1;
    snprintf(name, sizeof name, "%.31s%.127s", prefix, p->name); /* a prefix: "grad.", "final." (tests) */
    *out = t = mgt__src_find(s, name, f);
    if (!t)
        return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: has no tensor '%s' (mgt's %s); %s says the model has it: use the folder as save_pretrained wrote it",
                         s->path, name, mgt_name, s->what);
    if (strcmp(t->dtype, "F32") && strcmp(t->dtype, "F64") && strcmp(t->dtype, "BF16") && strcmp(t->dtype, "F16"))
        return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: tensor '%s' is %s; mgt reads F32, F16, BF16 and F64 weights", s->path, name, t->dtype);
    *size = !strcmp(t->dtype, "F64") ? 8 : !strcmp(t->dtype, "F32") ? 4 : 2;
    if (t->ndim != ndim || t->shape[0] != want0 || (ndim == 2 && t->shape[1] != want1) || t->end - t->begin != (size_t)(want0 * (ndim == 2 ? want1 : 1)) * (size_t)*size)
        return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: tensor '%s' has shape [%lld%s%lld], but %s's model needs [%lld%s%lld]; the weights and %s disagree: "
                         "use the files as they were saved together", s->path, name, t->shape[0], t->ndim > 1 ? "," : "", t->ndim > 1 ? t->shape[1] : 0,
                         s->what, want0, ndim > 1 ? "," : "", ndim > 1 ? want1 : 0, s->what);
    return MGT_OK;
}

/* every tensor model cfg needs, checked against a Hugging Face folder's index (mgt__src_tensor)
   before anything is allocated for them */
static mgt_result mgt__src_check(const mgt__src *s, const mgt_config *cfg) {
    mgt__layout g;
    mgt_result res = MGT_OK;
    int t;
    MGT__TRY(mgt__global_layout(cfg, &g));
    for (t = 0; t < g.n && res == MGT_OK; t++) {
        mgt__part part[3];
        int i, n = s->parts(s->kind, cfg, s->positions, &g.t[t].info, part), size;
        for (i = 0; i < n && res == MGT_OK; i++) {
            const mgt__st_file *f;
            const mgt__st_tensor *x;
            res = mgt__src_tensor(s, &part[i], "", g.t[t].info.name, &f, &x, &size);
        }
    }
    mgt__layout_free(&g);
    return res;
}

/* part p (name prefixed by `prefix`) into its rows of dst, in mgt's layout */
static mgt_result mgt__src_read(const mgt__src *s, const mgt__part *p, const char *prefix, const char *mgt_name, float *dst) {
    size_t cols = p->cols ? (size_t)p->cols : 1, r, c;
    const unsigned char *data;
    const char *dtype;
    int size;
    if (s->kind == MGT__SRC_LLMC) {
        long long at = mgt__llmc_offset(s->hdr, mgt_name);
        if (at < 0) return mgt__fail(MGT_ERROR_CONFIG, "%s: llm.c's GPT-2 has no %s; the preset's model is not GPT-2", s->path, mgt_name);
        data = s->bin + 1024;
        for (r = 0; r < (size_t)p->rows; r++)
            for (c = 0; c < cols; c++) dst[r * cols + c] = mgt__st_value(data, s->hdr[1] == 5 ? 2 : 4, 0, (size_t)at + r * cols + c);
        return MGT_OK;
    } else {
        const mgt__st_file *f = NULL;
        const mgt__st_tensor *t;
        MGT__TRY(mgt__src_tensor(s, p, prefix, mgt_name, &f, &t, &size));
        dtype = t->dtype;
        data = (const unsigned char *)mgt__st_data(f, t);
        for (r = 0; r < (size_t)p->rows; r++)
            for (c = 0; c < cols; c++) dst[r * cols + c] = mgt__st_value(data, size, !strcmp(dtype, "F16"), p->transpose ? c * (size_t)p->src_rows + r : r * cols + c);
        return MGT_OK;
    }
}

/* every global tensor of model cfg from the file (names prefixed by `prefix`), as fp32 in mgt's
   layout: g and *out (free with mgt__free_global and mgt__layout_free) */
static mgt_result mgt__src_global(const mgt__src *s, const mgt_config *cfg, const char *prefix, mgt__layout *g, float ***out) {
    mgt_result res;
    int t;
    *out = NULL;
    MGT__TRY(mgt__global_layout(cfg, g));
    *out = (float **)MGT_MALLOC(sizeof(float *) * (size_t)g->n);
    if (!*out) { mgt__layout_free(g); return mgt__fail(MGT_ERROR_MEMORY, "out of memory"); }
    memset(*out, 0, sizeof(float *) * (size_t)g->n);
    for (t = 0, res = MGT_OK; t < g->n && res == MGT_OK; t++) {
        mgt__part part[3];
        int i, n = s->parts(s->kind, cfg, s->positions, &g->t[t].info, part);
        size_t row = 0, cols = g->t[t].info.ndim == 2 ? (size_t)g->t[t].info.shape[1] : 1;
        (*out)[t] = (float *)MGT_MALLOC(sizeof(float) * g->t[t].info.numel);
        if (!(*out)[t]) res = mgt__fail(MGT_ERROR_MEMORY, "out of memory reading [model] init");
        for (i = 0; i < n && res == MGT_OK; row += (size_t)part[i].rows, i++) res = mgt__src_read(s, &part[i], prefix, g->t[t].info.name, (*out)[t] + row * cols);
    }
    if (res != MGT_OK) {
        mgt__free_global(g, *out);
        mgt__layout_free(g);
        *out = NULL;
    }
    return res;
}

