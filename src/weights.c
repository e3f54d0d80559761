/* src/weights.c - weights in and out: [model] init from mgt, Hugging Face and llm.c files, mgt_export */
/* ---- 5b. weights in and out: [model] init and mgt_export ----------------------------------------
   init reads weights only (the run starts at step 0 with fresh AdamW moments and data position)
   from an mgt checkpoint (a file or a run folder's newest), a Hugging Face folder (config.json and
   model.safetensors, or shards listed by model.safetensors.index.json) of GPT2LMHeadModel or
   LlamaForCausalLM, or llm.c's GPT-2 .bin. Every source becomes mgt's global tensors (fp32 master
   weights, whatever the file's F32/F16/BF16/F64), which the ranks slice as they do on resume, so
   init works under every layout. mgt_export writes the reverse: a folder from_pretrained loads.
   One table (mgt__hf_parts) maps mgt's names to Hugging Face's both ways. */

enum { MGT__SRC_MGT, MGT__SRC_GPT2, MGT__SRC_LLAMA, MGT__SRC_LLMC };
#define MGT__LLMC_MAGIC 20240326

typedef struct mgt__src {
    int kind;
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

static void mgt__src_free(mgt__src *s) {
    int i;
    if (!s) return;
    for (i = 0; i < s->nfiles; i++) mgt__st_close(&s->files[i]);
    MGT_FREE(s->files);
    MGT_FREE(s->bin);
    MGT_FREE(s);
}

/* skips one JSON value of any kind (config.json has nested objects, arrays, true, null); nesting
   deeper than 64 is refused, so a hostile file cannot exhaust the stack */
static int mgt__json_skip_at(const char **p, int depth) {
    mgt__json_ws(p);
    if (depth > 64) return 0;
    if (**p == '"') {
        mgt__buf b;
        int ok;
        memset(&b, 0, sizeof b);
        ok = mgt__json_string(p, &b);
        MGT_FREE(b.p);
        return ok;
    }
    if (**p == '{' || **p == '[') {
        char close = **p == '{' ? '}' : ']';
        (*p)++;
        mgt__json_ws(p);
        if (**p == close) { (*p)++; return 1; }
        for (;;) {
            if (close == '}') {
                mgt__buf k;
                int ok;
                memset(&k, 0, sizeof k);
                ok = mgt__json_string(p, &k) && mgt__json_expect(p, ':');
                MGT_FREE(k.p);
                if (!ok) return 0;
            }
            if (!mgt__json_skip_at(p, depth + 1)) return 0;
            mgt__json_ws(p);
            if (**p == ',') { (*p)++; continue; }
            if (**p == close) { (*p)++; return 1; }
            return 0;
        }
    }
    {
        const char *s = *p;
        while (*s && strchr("+-.0123456789eEtrufalsn", *s)) s++;
        if (s == *p) return 0;
        *p = s;
        return 1;
    }
}

static int mgt__json_skip(const char **p) { return mgt__json_skip_at(p, 0); }

/* the value of member `key` of the object at obj, or NULL (absent, or the text is not an object) */
static const char *mgt__json_member(const char *obj, const char *key) {
    const char *p = obj;
    if (!obj || !mgt__json_expect(&p, '{')) return NULL;
    mgt__json_ws(&p);
    if (*p == '}') return NULL;
    for (;;) {
        mgt__buf k;
        int match;
        memset(&k, 0, sizeof k);
        if (!mgt__json_string(&p, &k) || !mgt__json_expect(&p, ':')) { MGT_FREE(k.p); return NULL; }
        match = !strcmp(k.p, key);
        MGT_FREE(k.p);
        mgt__json_ws(&p);
        if (match) return p;
        if (!mgt__json_skip(&p) || !mgt__json_expect(&p, ',')) return NULL;
    }
}

/* a scalar member as text: a string's characters, a number's digits, "1"/"0" for true/false;
   0 when absent or null */
static int mgt__json_text(const char *obj, const char *key, char *out, size_t cap) {
    const char *p = mgt__json_member(obj, key), *end;
    if (!p || !strncmp(p, "null", 4)) return 0;
    if (*p == '"') {
        mgt__buf b;
        memset(&b, 0, sizeof b);
        if (!mgt__json_string(&p, &b)) { MGT_FREE(b.p); return 0; }
        mgt__strlcpy(out, b.p, cap);
        MGT_FREE(b.p);
        return 1;
    }
    if (!strncmp(p, "true", 4) || !strncmp(p, "false", 5)) { mgt__strlcpy(out, p[0] == 't' ? "1" : "0", cap); return 1; }
    end = p;
    if (!mgt__json_skip(&end) || *p == '{' || *p == '[') return 0;
    snprintf(out, cap, "%.*s", (int)(end - p), p);
    return 1;
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

/* config.json member `field` into model key `name`; absent or null: `def` (NULL: required) */
static mgt_result mgt__hf_key(mgt__src *s, const char *json, const char *field, const char *name, const char *def) {
    char v[128];
    if (!mgt__json_text(json, field, v, sizeof v)) {
        if (!def) return mgt__fail(MGT_ERROR_CONFIG, "%s/config.json: has no \"%s\"; a %s config.json needs it (save the model with save_pretrained)", s->path, field,
                                   s->kind == MGT__SRC_GPT2 ? "GPT2LMHeadModel" : "LlamaForCausalLM");
        mgt__strlcpy(v, def, sizeof v);
    }
    return mgt__src_put(s, name, v, field);
}

/* the Hugging Face config.json's model: GPT2LMHeadModel or LlamaForCausalLM, refusing what mgt's
   blocks do not compute (another activation, scaled RoPE, attention scaled by layer) */
static mgt_result mgt__hf_config(mgt__src *s, const char *json) {
    const char *arch = mgt__json_member(json, "architectures");
    char name[128] = "", v[128], def[32];
    int gpt2;
    if (arch && mgt__json_expect(&arch, '[')) {
        mgt__buf b;
        memset(&b, 0, sizeof b);
        if (mgt__json_string(&arch, &b)) mgt__strlcpy(name, b.p, sizeof name);
        MGT_FREE(b.p);
    }
    if (!name[0] && mgt__json_text(json, "model_type", v, sizeof v)) /* a config.json without "architectures" */
        mgt__strlcpy(name, !strcmp(v, "gpt2") ? "GPT2LMHeadModel" : !strcmp(v, "llama") ? "LlamaForCausalLM" : v, sizeof name);
    if (strcmp(name, "GPT2LMHeadModel") && strcmp(name, "LlamaForCausalLM"))
        return mgt__fail(MGT_ERROR_CONFIG, "%s/config.json: architecture '%s'; [model] init reads GPT2LMHeadModel or LlamaForCausalLM (Llama-family "
                         "checkpoints of other names need their config.json's \"architectures\" and tensors in Llama's form)", s->path, name[0] ? name : "(none)");
    gpt2 = !strcmp(name, "GPT2LMHeadModel");
    s->kind = gpt2 ? MGT__SRC_GPT2 : MGT__SRC_LLAMA;
    mgt__strlcpy(s->what, "config.json", sizeof s->what);
#define MGT__HF(field, key, def) MGT__TRY(mgt__hf_key(s, json, field, key, def))
    if (gpt2) {
        if (mgt__json_text(json, "activation_function", v, sizeof v) && strcmp(v, "gelu_new") && strcmp(v, "gelu_pytorch_tanh"))
            return mgt__fail(MGT_ERROR_CONFIG, "%s/config.json: activation_function \"%s\"; mgt's GELU is the tanh form (gelu_new)", s->path, v);
        if (mgt__json_text(json, "scale_attn_by_inverse_layer_idx", v, sizeof v) && !strcmp(v, "1"))
            return mgt__fail(MGT_ERROR_CONFIG, "%s/config.json: scale_attn_by_inverse_layer_idx is true; mgt scales attention by 1/sqrt(head size) only", s->path);
        if (mgt__json_text(json, "scale_attn_weights", v, sizeof v) && !strcmp(v, "0"))
            return mgt__fail(MGT_ERROR_CONFIG, "%s/config.json: scale_attn_weights is false; mgt scales attention by 1/sqrt(head size)", s->path);
        MGT__HF("n_layer", "n_layer", NULL);
        MGT__HF("n_head", "n_head", NULL);
        MGT__HF("n_head", "n_kv_head", NULL);
        MGT__HF("n_embd", "d_model", NULL);
        snprintf(def, sizeof def, "%d", 4 * s->model.model.d_model);
        MGT__HF("n_inner", "d_ff", def);
        MGT__HF("vocab_size", "vocab_size", NULL);
        MGT__HF("n_positions", "seq_len", NULL);
        MGT__HF("layer_norm_epsilon", "norm_eps", "1e-5");
        MGT__TRY(mgt__src_put(s, "norm", "layernorm", "model_type gpt2"));
        MGT__TRY(mgt__src_put(s, "positions", "learned", "model_type gpt2"));
        MGT__TRY(mgt__src_put(s, "mlp", "gelu", "activation_function"));
        MGT__TRY(mgt__src_put(s, "bias", "1", "model_type gpt2"));
        MGT__HF("tie_word_embeddings", "tied_head", "1");
    } else {
        const char *rope = mgt__json_member(json, "rope_parameters");
        char bias[8] = "0", mlp_bias[8] = "0";
        if (!rope) rope = mgt__json_member(json, "rope_scaling"); /* transformers 4's name */
        if (mgt__json_text(json, "hidden_act", v, sizeof v) && strcmp(v, "silu"))
            return mgt__fail(MGT_ERROR_CONFIG, "%s/config.json: hidden_act \"%s\"; mgt's SwiGLU uses silu", s->path, v);
        if (rope && mgt__json_text(rope, "rope_type", v, sizeof v) && strcmp(v, "default"))
            return mgt__fail(MGT_ERROR_CONFIG, "%s/config.json: rope_type \"%s\" (scaled RoPE); mgt computes the default rotation only", s->path, v);
        MGT__HF("num_hidden_layers", "n_layer", NULL);
        MGT__HF("num_attention_heads", "n_head", NULL);
        MGT__HF("hidden_size", "d_model", NULL);
        if (mgt__json_text(json, "head_dim", v, sizeof v) && /* bounded, in 64 bits: a head_dim of 536870920 x 8 heads wrapped to 64 in an int */
            (strtoll(v, NULL, 10) < 1 || strtoll(v, NULL, 10) > 65536 || strtoll(v, NULL, 10) * (long long)s->model.model.n_head != (long long)s->model.model.d_model))
            return mgt__fail(MGT_ERROR_CONFIG, "%s/config.json: head_dim %s is not hidden_size / num_attention_heads; mgt's heads split d_model", s->path, v);
        snprintf(def, sizeof def, "%d", s->model.model.n_head);
        MGT__HF("num_key_value_heads", "n_kv_head", def);
        MGT__HF("intermediate_size", "d_ff", NULL);
        MGT__HF("vocab_size", "vocab_size", NULL);
        MGT__HF("max_position_embeddings", "seq_len", NULL);
        MGT__HF("rms_norm_eps", "norm_eps", "1e-6");
        if (mgt__json_text(json, "rope_theta", v, sizeof v)) MGT__TRY(mgt__src_put(s, "rope_theta", v, "rope_theta"));
        else if (rope && mgt__json_text(rope, "rope_theta", v, sizeof v)) MGT__TRY(mgt__src_put(s, "rope_theta", v, "rope_parameters.rope_theta"));
        else MGT__TRY(mgt__src_put(s, "rope_theta", "10000", "rope_theta"));
        mgt__json_text(json, "attention_bias", bias, sizeof bias);
        mgt__json_text(json, "mlp_bias", mlp_bias, sizeof mlp_bias);
        if (strcmp(bias, mlp_bias))
            return mgt__fail(MGT_ERROR_CONFIG, "%s/config.json: attention_bias and mlp_bias differ; mgt's [model] bias is one switch for every linear layer", s->path);
        MGT__TRY(mgt__src_put(s, "bias", bias, "attention_bias"));
        MGT__TRY(mgt__src_put(s, "norm", "rmsnorm", "model_type llama"));
        MGT__TRY(mgt__src_put(s, "positions", "rope", "model_type llama"));
        MGT__TRY(mgt__src_put(s, "mlp", "swiglu", "hidden_act"));
        MGT__HF("tie_word_embeddings", "tied_head", "0");
    }
#undef MGT__HF
    return MGT_OK;
}

/* reads a whole small file (config.json, an index) into a NUL-terminated buffer the caller frees */
static char *mgt__read_text(const char *path, char *why, size_t cap) {
    struct stat st;
    int fd = mgt__open_regular(path, &st, why, cap);
    char *text;
    if (fd < 0) return NULL;
    text = st.st_size < (1 << 26) ? (char *)MGT_MALLOC((size_t)st.st_size + 1) : NULL;
    if (!text || read(fd, text, (size_t)st.st_size) != (ssize_t)st.st_size) {
        snprintf(why, cap, "%s", text ? "read error" : "too large or out of memory");
        MGT_FREE(text);
        close(fd);
        return NULL;
    }
    close(fd);
    text[st.st_size] = 0;
    return text;
}

/* the safetensors files of a Hugging Face folder: model.safetensors, or the shards its index names */
/* the folder's safetensors files; header_only: their tensor index alone (a check of the shapes
   before a run allocates anything) */
static mgt_result mgt__hf_files(mgt__src *s, int header_only) {
    char path[1600], why[256], (*names)[256] = NULL;
    char *index;
    const char *map;
    mgt_result res = MGT_OK;
    int i;
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", s->path);
    if (access(path, F_OK)) {
        snprintf(path, sizeof path, "%s/model.safetensors", s->path);
        if (access(path, F_OK))
            return mgt__fail(MGT_ERROR_CONFIG, "%s: has config.json but no model.safetensors (nor model.safetensors.index.json); download the weights in "
                             "safetensors form (pytorch_model.bin is not read)", s->path);
        s->files = (mgt__st_file *)mgt__calloc(1, sizeof *s->files);
        if (!s->files) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
        MGT__TRY(mgt__st_read(&s->files[0], path, header_only));
        s->nfiles = 1;
        return MGT_OK;
    }
    if (!(index = mgt__read_text(path, why, sizeof why))) return mgt__fail(MGT_ERROR_CONFIG, "%s: cannot read: %s", path, why);
    map = mgt__json_member(index, "weight_map");
    if (!map || !mgt__json_expect(&map, '{')) res = mgt__fail(MGT_ERROR_CONFIG, "%s: has no \"weight_map\" object", path);
    while (res == MGT_OK) { /* each distinct shard once, in the order the map first names it */
        mgt__buf k, v;
        int seen = 0;
        mgt__json_ws(&map);
        if (*map == '}') break;
        memset(&k, 0, sizeof k);
        memset(&v, 0, sizeof v);
        if (!mgt__json_string(&map, &k) || !mgt__json_expect(&map, ':') || !mgt__json_string(&map, &v) || strchr(v.p, '/') || strlen(v.p) >= 256)
            res = mgt__fail(MGT_ERROR_CONFIG, "%s: a malformed \"weight_map\" (tensor name to a shard file in the same folder)", path);
        for (i = 0; res == MGT_OK && i < s->nfiles && !seen; i++) seen = !strcmp(names[i], v.p);
        if (res == MGT_OK && !seen) {
            mgt__st_file *nf = (mgt__st_file *)MGT_REALLOC(s->files, sizeof *nf * (size_t)(s->nfiles + 1));
            char (*nn)[256] = (char (*)[256])MGT_REALLOC(names, 256 * (size_t)(s->nfiles + 1));
            if (nf) s->files = nf;
            if (nn) names = nn;
            if (!nf || !nn) res = mgt__fail(MGT_ERROR_MEMORY, "out of memory");
            else {
                snprintf(path, sizeof path, "%s/%s", s->path, v.p);
                res = mgt__st_read(&s->files[s->nfiles], path, header_only);
                snprintf(path, sizeof path, "%s/model.safetensors.index.json", s->path);
                if (res == MGT_OK) mgt__strlcpy(names[s->nfiles++], v.p, 256);
            }
        }
        MGT_FREE(k.p);
        MGT_FREE(v.p);
        mgt__json_ws(&map);
        if (*map == ',') map++;
    }
    MGT_FREE(index);
    MGT_FREE(names);
    if (res == MGT_OK && !s->nfiles) res = mgt__fail(MGT_ERROR_CONFIG, "%s: an empty \"weight_map\"", path);
    return res;
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
    mgt__strlcpy(s->what, "the checkpoint's preset", sizeof s->what);
    if ((res = mgt_checkpoint_config(s->path, &c)) != MGT_OK) {
        char why[1024];
        mgt__strlcpy(why, mgt_last_error(), sizeof why);
        return mgt__fail(res, "%s; [model] init takes an mgt checkpoint or run folder, a Hugging Face folder (config.json beside model.safetensors) "
                         "or llm.c's .bin", why);
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

/* opens what [model] init names: its model, and with `weights` its tensors too (MGT__SRC_INDEX:
   a Hugging Face folder's tensor index alone, nothing more of the other kinds) */
#define MGT__SRC_INDEX 2
static mgt_result mgt__src_open(mgt__src **out, const char *init, int weights) {
    mgt__src *s = (mgt__src *)mgt__calloc(1, sizeof *s);
    struct stat st;
    mgt_result res = MGT_OK;
    *out = NULL;
    if (!s) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    mgt_config_init(&s->model);
    mgt__strlcpy(s->path, init, sizeof s->path);
    if (stat(init, &st))
        res = mgt__fail(MGT_ERROR_CONFIG, "%s: no such file or folder (from [model] init); give a Hugging Face folder (config.json and model.safetensors), "
                        "an mgt checkpoint or run folder, or llm.c's gpt2_124M.bin", init);
    else if (S_ISDIR(st.st_mode)) {
        char cj[1400], why[256];
        snprintf(cj, sizeof cj, "%s/config.json", init);
        if (!access(cj, F_OK)) {
            char *json = mgt__read_text(cj, why, sizeof why);
            res = json ? mgt__hf_config(s, json) : mgt__fail(MGT_ERROR_CONFIG, "%s: cannot read: %s", cj, why);
            MGT_FREE(json);
            if (res == MGT_OK && weights) res = mgt__hf_files(s, weights == MGT__SRC_INDEX);
            if (res != MGT_OK) { mgt__src_free(s); return res; }
            *out = s;
            return MGT_OK;
        }
        if (mgt_checkpoint_latest(init, s->path, sizeof s->path) != MGT_OK)
            res = mgt__fail(MGT_ERROR_CONFIG, "%s: neither a Hugging Face folder (no config.json) nor a run folder (no step_*.safetensors); [model] init "
                            "takes either, an mgt checkpoint file or llm.c's .bin", init);
    }
    if (res == MGT_OK) { /* a file: llm.c's magic number, else an mgt checkpoint */
        int32_t magic = 0;
        FILE *fp = fopen(s->path, "rb");
        if (fp && fread(&magic, 4, 1, fp) != 1) magic = 0;
        if (fp) fclose(fp);
        res = magic == MGT__LLMC_MAGIC ? mgt__llmc_open(s, weights == 1) : mgt__ckpt_src(s, weights == 1);
    }
    if (res != MGT_OK) { mgt__src_free(s); return res; }
    *out = s;
    return MGT_OK;
}

/* is the preset's value of model key i the file's? d_ff 0 and n_kv_head 0 mean their defaults */
static int mgt__same_model_key(const mgt_config *cfg, const mgt_config *file, int i) {
    char a[MGT_STR_MAX + 64], b[MGT_STR_MAX + 64];
    mgt_dims x = mgt__model_dims(cfg), y = mgt__model_dims(file);
    if (!strcmp(mgt__keys[i].info.name, "d_ff")) return x.H == y.H;
    if (!strcmp(mgt__keys[i].info.name, "n_kv_head")) return x.NKV == y.NKV;
    mgt_config_value_string(cfg, i, a, sizeof a);
    mgt_config_value_string(file, i, b, sizeof b);
    return !strcmp(a, b);
}

static mgt_result mgt__src_check(const mgt__src *s, const mgt_config *cfg);
MGTDEF mgt_result mgt_config_resolve_init(mgt_config *cfg) {
    mgt__src *s;
    int i;
    mgt_result res = MGT_OK;
    if (!cfg) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_config_resolve_init: cfg is NULL");
    if (!cfg->model.init[0]) return MGT_OK;
    MGT__TRY(mgt__src_open(&s, cfg->model.init, MGT__SRC_INDEX));
    for (i = 0; i < MGT_CONFIG_NKEYS && res == MGT_OK; i++) {
        char where[MGT_STR_MAX + 64], mine[MGT_STR_MAX + 64], theirs[MGT_STR_MAX + 64], why[512];
        const char *name = mgt__keys[i].info.name;
        int user = cfg->line[i] != 0 && cfg->line[i] != MGT__FROM_INIT;
        if (!s->field[i][0]) continue;
        mgt_config_value_string(cfg, i, mine, sizeof mine);
        mgt_config_value_string(&s->model, i, theirs, sizeof theirs);
        if (!strcmp(name, "seq_len") && user) { /* a shorter context than the file's is a training choice; a longer one has no positions */
            if (cfg->model.seq_len > s->positions)
                res = mgt__fail(MGT_ERROR_CONFIG, "%s: [model] seq_len = %d, but [model] init %s has %d positions (%s: %s); set seq_len to at most %d or leave it out",
                                mgt__where(cfg, i, where, sizeof where), cfg->model.seq_len, cfg->model.init, s->positions, s->what, s->field[i], s->positions);
        } else if (!user) {
            if (!mgt__set_value(cfg, i, theirs, why, sizeof why)) res = mgt__fail(MGT_ERROR_CONFIG, "%s: %s", cfg->model.init, why);
            cfg->line[i] = MGT__FROM_INIT;
        } else if (!mgt__same_model_key(cfg, &s->model, i))
            res = mgt__fail(MGT_ERROR_CONFIG, "%s: [model] %s = %s, but [model] init %s has %s = %s (%s: %s); remove %s from the preset (init's model gives it) "
                            "or init from another model", mgt__where(cfg, i, where, sizeof where), name, mine, cfg->model.init, name, theirs, s->what, s->field[i], name);
    }
    /* a config.json that its safetensors contradict: refused here (mgt check), not after the run
       allocated its memory */
    if (res == MGT_OK && (s->kind == MGT__SRC_GPT2 || s->kind == MGT__SRC_LLAMA)) res = mgt__src_check(s, cfg);
    mgt__src_free(s);
    return res;
}

/* the file's tensors that make mgt's global tensor x of the model cfg, stacked by rows in mgt's
   (out, in) order: Llama's q, k, v into c_attn and gate, up into c_fc; transpose: the file keeps
   (in, out) (GPT-2's Conv1D); src_rows: the file's rows, of which mgt takes the first `rows`
   (a position table longer than seq_len). The count, 1 to 3. Export writes the same parts. */
typedef struct mgt__part { char name[128]; int rows, src_rows, cols, transpose; } mgt__part;
static int mgt__hf_parts(int kind, const mgt_config *cfg, int positions, const mgt_tensor_info *x, mgt__part part[3]) {
    static const char *const conv1d[] = {"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"};
    static const char *const llama[][2] = {{"ln_1.weight", "input_layernorm.weight"},     {"attn.c_proj.weight", "self_attn.o_proj.weight"},
                                           {"attn.c_proj.bias", "self_attn.o_proj.bias"}, {"ln_2.weight", "post_attention_layernorm.weight"},
                                           {"mlp.c_proj.weight", "mlp.down_proj.weight"}, {"mlp.c_proj.bias", "mlp.down_proj.bias"}};
    mgt_dims d = mgt__model_dims(cfg);
    int layer = -1, off = 0, i, n = 1;
    const char *rest = x->name, *suffix;
    if (sscanf(x->name, "h.%d.%n", &layer, &off) == 1 && off > 0) rest = x->name + off;
    else layer = -1;
    suffix = strrchr(rest, '.') ? strrchr(rest, '.') + 1 : "weight";
    memset(part, 0, sizeof(mgt__part) * 3);
    part[0].rows = part[0].src_rows = x->shape[0];
    part[0].cols = x->ndim == 2 ? x->shape[1] : 0;
    if (!strcmp(x->name, "wpe")) part[0].src_rows = positions;
    if (kind == MGT__SRC_MGT || kind == MGT__SRC_LLMC) mgt__strlcpy(part[0].name, x->name, sizeof part[0].name);
    else if (!strcmp(x->name, "lm_head.weight")) mgt__strlcpy(part[0].name, x->name, sizeof part[0].name);
    else if (kind == MGT__SRC_GPT2) {
        snprintf(part[0].name, sizeof part[0].name, "transformer.%s%s", x->name, strchr(x->name, '.') ? "" : ".weight");
        for (i = 0; i < 4; i++) part[0].transpose |= layer >= 0 && !strcmp(rest, conv1d[i]);
    } else if (!strcmp(x->name, "wte")) mgt__strlcpy(part[0].name, "model.embed_tokens.weight", sizeof part[0].name);
    else if (!strcmp(x->name, "ln_f.weight")) mgt__strlcpy(part[0].name, "model.norm.weight", sizeof part[0].name);
    else if (!strncmp(rest, "attn.c_attn.", 12) || !strncmp(rest, "mlp.c_fc.", 9)) {
        int qkv = rest[0] == 'a';
        n = qkv ? 3 : 2;
        for (i = 0; i < n; i++) {
            part[i].cols = part[0].cols;
            part[i].rows = part[i].src_rows = qkv ? (i == 0 ? d.NH : d.NKV) * d.hs : d.H;
            if (qkv) snprintf(part[i].name, sizeof part[i].name, "model.layers.%d.self_attn.%c_proj.%s", layer, "qkv"[i], suffix);
            else snprintf(part[i].name, sizeof part[i].name, "model.layers.%d.mlp.%s_proj.%s", layer, i == 0 ? "gate" : "up", suffix);
        }
    } else
        for (i = 0; i < (int)(sizeof llama / sizeof llama[0]); i++)
            if (!strcmp(rest, llama[i][0])) snprintf(part[0].name, sizeof part[0].name, "model.layers.%d.%s", layer, llama[i][1]);
    return n;
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
        int i, n = mgt__hf_parts(s->kind, cfg, s->positions, &g.t[t].info, part), size;
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
        int i, n = mgt__hf_parts(s->kind, cfg, s->positions, &g->t[t].info, part);
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

/* a fresh run's weights from [model] init (its step, moments and data position stay as created) */
static mgt_result mgt__init_weights(mgt_run *r) {
    mgt__src *s;
    mgt__layout g;
    float **tensors;
    mgt_result res = mgt__src_open(&s, r->cfg.model.init, 1);
    if (res == MGT_OK) {
        res = mgt__src_global(s, &r->cfg, "", &g, &tensors);
        if (res == MGT_OK && (res = mgt__mirror_all(r)) == MGT_OK) {
            mgt__exchange(r, MGT__BUF_PARAMS, &g, tensors, 0, NULL);
            mgt__unmirror_all(r, 1);
        }
        if (tensors) { mgt__free_global(&g, tensors); mgt__layout_free(&g); }
        mgt__src_free(s);
    }
    res = mgt__mpi_agree(r->procs, res, "reading [model] init");
    if (res == MGT_OK) mgt__log(MGT_LOG_INFO, "weights from %s (step 0, fresh optimizer)", r->cfg.model.init);
    return res;
}

/* which Hugging Face class expresses model cfg: GPT2LMHeadModel (layernorm, learned positions,
   GELU, biases, n_kv_head = n_head) or LlamaForCausalLM (rmsnorm, rope, swiglu); -1 with why */
static int mgt__hf_kind(const mgt_config *cfg, char *why, size_t cap) {
    mgt_dims d = mgt__model_dims(cfg);
    if (!d.rms && !d.rope && !d.swiglu) {
        if (d.NKV != d.NH) snprintf(why, cap, "[model] n_kv_head = %d with n_head = %d: GPT2LMHeadModel has no grouped-query attention", d.NKV, d.NH);
        else if (!d.bias) snprintf(why, cap, "[model] bias = 0: GPT2LMHeadModel's linear layers all have biases");
        else return MGT__SRC_GPT2;
        return -1;
    }
    if (d.rms && d.rope && d.swiglu) return MGT__SRC_LLAMA;
    snprintf(why, cap, "[model] norm = %s, positions = %s, mlp = %s: Hugging Face's GPT2LMHeadModel is layernorm, learned, gelu and LlamaForCausalLM rmsnorm, "
             "rope, swiglu; a mixture has no class there", d.rms ? "rmsnorm" : "layernorm", d.rope ? "rope" : "learned", d.swiglu ? "swiglu" : "gelu");
    return -1;
}

static mgt_result mgt__write_atomic(const char *path, const void *data, size_t bytes) {
    char tmp[1300];
    FILE *f;
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (!(f = fopen(tmp, "wb"))) return mgt__fail(MGT_ERROR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    return mgt__atomic_finish(f, fwrite(data, 1, bytes, f) == bytes, tmp, path);
}

/* config.json as from_pretrained reads it */
static void mgt__hf_config_json(mgt__buf *b, const mgt_config *cfg, int kind) {
    mgt_dims d = mgt__model_dims(cfg);
    char eps[64], theta[64];
    mgt_config_value_string(cfg, mgt__find_key("model", "norm_eps"), eps, sizeof eps);
    mgt_config_value_string(cfg, mgt__find_key("model", "rope_theta"), theta, sizeof theta);
    if (kind == MGT__SRC_GPT2)
        mgt__buf_printf(b, "{\n  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"model_type\": \"gpt2\",\n  \"vocab_size\": %d,\n  \"n_positions\": %d,\n"
                        "  \"n_embd\": %d,\n  \"n_layer\": %d,\n  \"n_head\": %d,\n  \"n_inner\": %d,\n  \"activation_function\": \"gelu_new\",\n"
                        "  \"layer_norm_epsilon\": %s,\n  \"resid_pdrop\": 0.0,\n  \"embd_pdrop\": 0.0,\n  \"attn_pdrop\": 0.0,\n",
                        cfg->model.vocab_size, cfg->model.seq_len, d.C, cfg->model.n_layer, d.NH, d.H, eps);
    else {
        mgt__buf_printf(b, "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"model_type\": \"llama\",\n  \"vocab_size\": %d,\n"
                        "  \"max_position_embeddings\": %d,\n  \"hidden_size\": %d,\n  \"intermediate_size\": %d,\n  \"num_hidden_layers\": %d,\n",
                        cfg->model.vocab_size, cfg->model.seq_len, d.C, d.H, cfg->model.n_layer);
        mgt__buf_printf(b, "  \"num_attention_heads\": %d,\n  \"num_key_value_heads\": %d,\n  \"head_dim\": %d,\n  \"hidden_act\": \"silu\",\n"
                        "  \"rms_norm_eps\": %s,\n  \"rope_theta\": %s,\n  \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": %s},\n",
                        d.NH, d.NKV, d.hs, eps, theta, theta);
        mgt__buf_printf(b, "  \"attention_bias\": %s,\n  \"mlp_bias\": %s,\n  \"attention_dropout\": 0.0,\n", d.bias ? "true" : "false", d.bias ? "true" : "false");
    }
    mgt__buf_printf(b, "  \"tie_word_embeddings\": %s,\n  \"torch_dtype\": \"float32\",\n  \"generated_by\": \"mgt " MGT_VERSION_STRING " export\"\n}\n",
                    d.tied ? "true" : "false");
}

/* copies a tokenizer file into the export folder under Hugging Face's name */
static mgt_result mgt__copy_file(const char *from, const char *dir, const char *name, const char *fix) {
    char why[256], to[1400];
    char *text = mgt__read_text(from, why, sizeof why);
    mgt_result res;
    if (!text) return mgt__fail(MGT_ERROR_CONFIG, "%s: cannot read the run's tokenizer file: %s; %s", from, why, fix);
    snprintf(to, sizeof to, "%s/%s", dir, name);
    res = mgt__write_atomic(to, text, strlen(text));
    MGT_FREE(text);
    return res;
}

MGTDEF mgt_result mgt_export(const char *checkpoint, const char *dir, char *note, size_t cap) {
    char path[1200], why[512], file[1400];
    static const char *const meta[2] = {"format", "pt"}; /* transformers checks it */
    mgt_config cfg;
    mgt__src s;
    mgt__layout g;
    mgt__st_out *out = NULL;
    float **parts = NULL;
    int kind, t, i, n = 0, cap_out;
    mgt_result res = MGT_OK;
    mgt__buf json;
    if (!checkpoint || !dir) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_export: checkpoint and dir are required");
    MGT__TRY(mgt__resolve_checkpoint(checkpoint, ".", path, sizeof path));
    MGT__TRY(mgt_checkpoint_config(path, &cfg));
    if ((kind = mgt__hf_kind(&cfg, why, sizeof why)) < 0)
        return mgt__fail(MGT_ERROR_UNSUPPORTED, "%s: %s; such a model stays in mgt's checkpoints", path, why);
    MGT__TRY(mgt_mkdirs(dir));
    memset(&s, 0, sizeof s);
    s.kind = MGT__SRC_MGT;
    mgt__strlcpy(s.path, path, sizeof s.path);
    s.files = (mgt__st_file *)mgt__calloc(1, sizeof *s.files);
    if (!s.files) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    if ((res = mgt__checkpoint_open(&s.files[0], path)) != MGT_OK) { MGT_FREE(s.files); return res; }
    s.nfiles = 1;
    s.positions = cfg.model.seq_len;
    if ((res = mgt__global_layout(&cfg, &g)) != MGT_OK) { mgt__st_close(&s.files[0]); MGT_FREE(s.files); return res; }
    cap_out = 3 * g.n;
    out = (mgt__st_out *)mgt__calloc((size_t)cap_out, sizeof *out);
    parts = (float **)mgt__calloc((size_t)cap_out, sizeof *parts);
    if (!out || !parts) res = mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    for (t = 0; t < g.n && res == MGT_OK; t++) { /* each tensor read as init reads mgt's, then cut into Hugging Face's parts */
        mgt__part mine[3], hf[3];
        const mgt_tensor_info *x = &g.t[t].info;
        int np = mgt__hf_parts(kind, &cfg, cfg.model.seq_len, x, hf);
        size_t row = 0, cols = x->ndim == 2 ? (size_t)x->shape[1] : 1, r, c;
        float *whole = (float *)MGT_MALLOC(sizeof(float) * x->numel);
        mgt__hf_parts(MGT__SRC_MGT, &cfg, cfg.model.seq_len, x, mine);
        res = whole ? mgt__src_read(&s, &mine[0], "", x->name, whole) : mgt__fail(MGT_ERROR_MEMORY, "out of memory");
        for (i = 0; i < np && res == MGT_OK; row += (size_t)hf[i].rows, i++) {
            float *p = (float *)MGT_MALLOC(sizeof(float) * (size_t)hf[i].rows * cols);
            char *name = (char *)MGT_MALLOC(sizeof hf[i].name);
            parts[n] = p;
            out[n].name = name;
            if (!p || !name) { MGT_FREE(p); MGT_FREE(name); parts[n] = NULL; out[n].name = NULL; res = mgt__fail(MGT_ERROR_MEMORY, "out of memory"); break; }
            mgt__strlcpy(name, hf[i].name, sizeof hf[i].name);
            for (r = 0; r < (size_t)hf[i].rows; r++)
                for (c = 0; c < cols; c++) p[hf[i].transpose ? c * (size_t)hf[i].rows + r : r * cols + c] = whole[(row + r) * cols + c];
            out[n].data = p;
            out[n].dtype = "F32";
            out[n].ndim = x->ndim;
            out[n].shape[0] = hf[i].transpose ? (long long)cols : hf[i].rows;
            out[n].shape[1] = hf[i].transpose ? hf[i].rows : (long long)cols;
            out[n].bytes = sizeof(float) * (size_t)hf[i].rows * cols;
            n++;
        }
        MGT_FREE(whole);
    }
    mgt__layout_free(&g);
    mgt__st_close(&s.files[0]);
    MGT_FREE(s.files);
    snprintf(file, sizeof file, "%s/model.safetensors", dir);
    if (res == MGT_OK) res = mgt__st_write(file, out, n, meta, 1);
    for (i = 0; i < n; i++) { MGT_FREE((void *)out[i].name); MGT_FREE(parts[i]); }
    MGT_FREE(out);
    MGT_FREE(parts);
    if (res != MGT_OK) return res;
    memset(&json, 0, sizeof json);
    mgt__hf_config_json(&json, &cfg, kind);
    snprintf(file, sizeof file, "%s/config.json", dir);
    res = json.oom ? mgt__fail(MGT_ERROR_MEMORY, "out of memory") : mgt__write_atomic(file, json.p, json.n);
    MGT_FREE(json.p);
    if (res != MGT_OK) return res;
    if (cfg.data.tokenizer == MGT_TOKENIZER_GPT2) { /* GPT-2's encoder.json and vocab.bpe are Hugging Face's vocab.json and merges.txt */
        const char *fix = "export reads it from the checkpoint's [data] bpe_dir: put GPT-2's files back there";
        snprintf(file, sizeof file, "%s/encoder.json", cfg.data.bpe_dir);
        MGT__TRY(mgt__copy_file(file, dir, "vocab.json", fix));
        snprintf(file, sizeof file, "%s/vocab.bpe", cfg.data.bpe_dir);
        MGT__TRY(mgt__copy_file(file, dir, "merges.txt", fix));
        if (note) snprintf(note, cap, "%s: %s, config.json, model.safetensors, vocab.json and merges.txt (GPT-2 BPE from %s)", dir,
                           kind == MGT__SRC_GPT2 ? "GPT2LMHeadModel" : "LlamaForCausalLM", cfg.data.bpe_dir);
    } else if (cfg.data.tokenizer == MGT_TOKENIZER_HF) {
        MGT__TRY(mgt__copy_file(cfg.data.tokenizer_json, dir, "tokenizer.json", "export reads it from the checkpoint's [data] tokenizer_json: put the file back there"));
        if (note) snprintf(note, cap, "%s: %s, config.json, model.safetensors and tokenizer.json (from %s)", dir,
                           kind == MGT__SRC_GPT2 ? "GPT2LMHeadModel" : "LlamaForCausalLM", cfg.data.tokenizer_json);
    } else if (note)
        snprintf(note, cap, "%s: %s, config.json and model.safetensors; no tokenizer files: the run's tokenizer is bytes (token id = byte value), "
                 "which Hugging Face has no file for", dir, kind == MGT__SRC_GPT2 ? "GPT2LMHeadModel" : "LlamaForCausalLM");
    return MGT_OK;
}
