/* src/weights_hf.c - Hugging Face's weights in and out: a folder as [model] init (config.json and its
   JSON reader, model.safetensors or its shards, the tensor names), mgt_export; left out by MGT_NO_HF */
/* ---- Hugging Face in and out --------------------------------------------------------------------
   A Hugging Face folder (config.json and model.safetensors, or shards listed by
   model.safetensors.index.json) of GPT2LMHeadModel or LlamaForCausalLM is a source of [model] init
   (src/weights.c); mgt_export writes the reverse: a folder from_pretrained loads. One table
   (mgt__hf_parts) maps mgt's names to Hugging Face's both ways. */

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

/* the safetensors files of a Hugging Face folder: model.safetensors, or the shards its index names;
   header_only: their tensor index alone (a check of the shapes before a run allocates anything) */
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

/* Hugging Face's names of mgt's tensors (mgt__part): GPT-2's under "transformer.", its Conv1D
   weights kept (in, out); Llama's under "model.", q, k, v and gate, up apart */
static int mgt__hf_parts(int kind, const mgt_config *cfg, int positions, const mgt_tensor_info *x, mgt__part part[3]) {
    static const char *const conv1d[] = {"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"};
    static const char *const llama[][2] = {{"ln_1.weight", "input_layernorm.weight"},     {"attn.c_proj.weight", "self_attn.o_proj.weight"},
                                           {"attn.c_proj.bias", "self_attn.o_proj.bias"}, {"ln_2.weight", "post_attention_layernorm.weight"},
                                           {"mlp.c_proj.weight", "mlp.down_proj.weight"}, {"mlp.c_proj.bias", "mlp.down_proj.bias"}};
    mgt_dims d = mgt__model_dims(cfg);
    int layer = -1, off = 0, i, n = mgt__own_parts(kind, cfg, positions, x, part);
    const char *rest = x->name, *suffix;
    if (sscanf(x->name, "h.%d.%n", &layer, &off) == 1 && off > 0) rest = x->name + off;
    else layer = -1;
    suffix = strrchr(rest, '.') ? strrchr(rest, '.') + 1 : "weight";
    if (!strcmp(x->name, "lm_head.weight")) return n; /* the same name in both */
    if (kind == MGT__SRC_GPT2) {
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

/* a Hugging Face folder s->path (it has config.json) as a source: its model, and with `weights`
   its tensors (MGT__SRC_INDEX: their index alone) */
static mgt_result mgt__hf_open(mgt__src *s, int weights) {
    char cj[1400], why[256];
    char *json;
    mgt_result res;
    snprintf(cj, sizeof cj, "%s/config.json", s->path);
    json = mgt__read_text(cj, why, sizeof why);
    res = json ? mgt__hf_config(s, json) : mgt__fail(MGT_ERROR_CONFIG, "%s: cannot read: %s", cj, why);
    MGT_FREE(json);
    s->parts = mgt__hf_parts;
    if (res == MGT_OK && weights) res = mgt__hf_files(s, weights == MGT__SRC_INDEX);
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
        mgt__own_parts(MGT__SRC_MGT, &cfg, cfg.model.seq_len, x, mine);
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
