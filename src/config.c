/* src/config.c - presets: the key table, INI loading, validation, printing */
/* ---- presets ---------------------------------------------------------------------------------- */

enum { MGT__T_INT, MGT__T_FLOAT, MGT__T_STR, MGT__T_ENUM };
#define MGT__TYPE_INT MGT__T_INT
#define MGT__TYPE_FLOAT MGT__T_FLOAT
#define MGT__TYPE_STR MGT__T_STR
#define MGT__TYPE_ENUM MGT__T_ENUM

typedef struct mgt__key {
    mgt_key_info info;
    int type;
    size_t offset;
} mgt__key;

static const mgt__key mgt__keys[MGT_CONFIG_NKEYS] = {
#define MGT__KEY_ROW(sec, name, type, def, lo, hi, choices, help) \
    {{#sec, #name, #type, def, choices, help, (double)(lo), (double)(hi)}, MGT__TYPE_##type, offsetof(mgt_config, sec.name)},
    MGT_CONFIG_KEYS(MGT__KEY_ROW)
#undef MGT__KEY_ROW
};

MGTDEF const mgt_key_info *mgt_config_keys(int *count) {
    static mgt_key_info infos[MGT_CONFIG_NKEYS];
    int i;
    for (i = 0; i < MGT_CONFIG_NKEYS; i++) infos[i] = mgt__keys[i].info;
    if (count) *count = MGT_CONFIG_NKEYS;
    return infos;
}

static int mgt__find_key(const char *section, const char *name) {
    int i;
    for (i = 0; i < MGT_CONFIG_NKEYS; i++)
        if (!strcmp(mgt__keys[i].info.section, section) && !strcmp(mgt__keys[i].info.name, name)) return i;
    return -1;
}

/* index of choice `value` in "a|b|c", or -1 */
static int mgt__choice_index(const char *choices, const char *value) {
    int index = 0;
    size_t n = strlen(value);
    const char *p = choices;
    while (*p) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && !strncmp(p, value, n)) return index;
        index++;
        if (!bar) break;
        p = bar + 1;
    }
    return -1;
}
static void mgt__choice_name(const char *choices, int index, char *out, size_t cap) {
    const char *p = index >= 0 ? choices : NULL;
    while (index-- > 0 && p) { p = strchr(p, '|'); if (p) p++; }
    if (!p) { mgt__strlcpy(out, "?", cap); return; }
    {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len >= cap) len = cap - 1;
        memcpy(out, p, len);
        out[len] = 0;
    }
}

static int mgt__edit_distance(const char *a, const char *b) {
    int la = (int)strlen(a), lb = (int)strlen(b), i, j, prev[64], cur[64];
    if (la > 63 || lb > 63) return 99;
    for (j = 0; j <= lb; j++) prev[j] = j;
    for (i = 1; i <= la; i++) {
        cur[0] = i;
        for (j = 1; j <= lb; j++) {
            int sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            int del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, sizeof(int) * (size_t)(lb + 1));
    }
    return prev[lb];
}

/* what people coming from nanoGPT, llm.c, Hugging Face, Megatron and DeepSpeed type, and mgt's key */
static const char *const mgt__key_aliases[][2] = {
    {"learning_rate", "[train] lr"}, {"max_lr", "[train] lr"}, {"min_learning_rate", "[train] min_lr"}, {"lr_min", "[train] min_lr"},
    {"batch_size", "[train] global_batch (sequences per step) or micro_batch (per forward pass)"}, {"total_batch_size", "[train] global_batch"},
    {"global_batch_size", "[train] global_batch"}, {"micro_batch_size", "[train] micro_batch"}, {"per_device_train_batch_size", "[train] micro_batch"},
    {"gradient_accumulation_steps", "[train] global_batch (accumulation = global_batch / (micro_batch x dp))"},
    {"max_steps", "[train] steps"}, {"max_iters", "[train] steps"}, {"num_iterations", "[train] steps"}, {"train_steps", "[train] steps"},
    {"iterations", "[train] steps"}, {"warmup_steps", "[train] warmup"}, {"warmup_iters", "[train] warmup"}, {"lr_warmup_steps", "[train] warmup"},
    {"lr_decay_style", "[train] schedule"}, {"lr_scheduler_type", "[train] schedule"}, {"decay_lr", "[train] schedule"},
    {"max_grad_norm", "[train] grad_clip"}, {"clip_grad", "[train] grad_clip"}, {"gradient_clipping", "[train] grad_clip"},
    {"adam_beta1", "[train] beta1"}, {"adam_beta2", "[train] beta2"}, {"adam_epsilon", "[train] eps"}, {"adam_eps", "[train] eps"},
    {"eval_interval", "[train] eval_every"}, {"val_loss_every", "[train] eval_every"}, {"eval_steps", "[train] eval_every"},
    {"eval_iters", "[train] eval_batches"}, {"val_max_steps", "[train] eval_batches"},
    {"gradient_checkpointing", "[train] recompute = full"}, {"activation_checkpointing", "[train] recompute = full"}, {"recompute_activations", "[train] recompute = full"},
    {"n_embd", "[model] d_model"}, {"n_embed", "[model] d_model"}, {"hidden_size", "[model] d_model"}, {"dim", "[model] d_model"},
    {"block_size", "[model] seq_len"}, {"n_ctx", "[model] seq_len"}, {"n_positions", "[model] seq_len"}, {"max_seq_len", "[model] seq_len"},
    {"seq_length", "[model] seq_len"}, {"sequence_length", "[model] seq_len"}, {"max_position_embeddings", "[model] seq_len"},
    {"num_layers", "[model] n_layer"}, {"num_hidden_layers", "[model] n_layer"},
    {"num_heads", "[model] n_head"}, {"num_attention_heads", "[model] n_head"}, {"vocab", "[model] vocab_size"},
    {"num_key_value_heads", "[model] n_kv_head"}, {"n_kv_heads", "[model] n_kv_head"}, {"intermediate_size", "[model] d_ff"}, {"ffn_dim", "[model] d_ff"},
    {"rms_norm_eps", "[model] norm_eps"}, {"layer_norm_epsilon", "[model] norm_eps"}, {"tie_word_embeddings", "[model] tied_head"},
    {"tensor_model_parallel_size", "[parallel] tp"}, {"tensor_parallel_size", "[parallel] tp"}, {"pipeline_model_parallel_size", "[parallel] pp"},
    {"pipeline_parallel_size", "[parallel] pp"}, {"data_parallel_size", "[parallel] dp"}, {"zero_stage", "[parallel] zero"}, {"stage", "[parallel] zero"},
    {"bf16", "[precision] dtype = bf16"}, {"fp16", "[precision] dtype = fp16"}, {"mixed_precision", "[precision] dtype"},
    {"out_dir", "[checkpoint] dir"}, {"output_dir", "[checkpoint] dir"}, {"save_steps", "[checkpoint] every"}, {"checkpoint_every", "[checkpoint] every"},
    {"save_total_limit", "[checkpoint] keep"}, {"log_interval", "[log] every"}, {"logging_steps", "[log] every"}, {"log_every", "[log] every"},
    {"input_bin", "[data] train"}, {"train_bin", "[data] train"}, {"input_val_bin", "[data] val"}, {"val_bin", "[data] val"}, {"dataset", "[data] train"},
};

/* "did you mean" text for an unknown section or key */
static void mgt__suggest(const char *section, const char *name, char *out, size_t cap) {
    int i, best = -1, best_d = 1 << 30, section_known = 0;
    char lower[64];
    for (i = 0; name[i] && i < 63; i++) lower[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] + 32 : name[i]);
    lower[i] = 0;
    for (i = 0; i < (int)(sizeof mgt__key_aliases / sizeof mgt__key_aliases[0]); i++)
        if (!strcmp(lower, mgt__key_aliases[i][0])) {
            snprintf(out, cap, "unknown key '%s'%s%s%s; did you mean %s? (mgt's name for it)", name, section[0] ? " in [" : "", section, section[0] ? "]" : "",
                     mgt__key_aliases[i][1]);
            return;
        }
    for (i = 0; i < MGT_CONFIG_NKEYS; i++) /* a key of mgt's in another section */
        if (!strcmp(lower, mgt__keys[i].info.name) && strcmp(section, mgt__keys[i].info.section)) {
            snprintf(out, cap, "unknown key '%s' in [%s]; '%s' belongs in [%s]", name, section, mgt__keys[i].info.name, mgt__keys[i].info.section);
            return;
        }
    for (i = 0; i < MGT_CONFIG_NKEYS; i++) if (!strcmp(mgt__keys[i].info.section, section)) section_known = 1;
    if (!section_known) {
        const char *sections[] = {
#define MGT__SECTION_NAME(s) #s,
            MGT_CONFIG_SECTIONS(MGT__SECTION_NAME)
#undef MGT__SECTION_NAME
        };
        for (i = 0; i < (int)(sizeof sections / sizeof sections[0]); i++) {
            int d = mgt__edit_distance(section, sections[i]);
            if (d < best_d) { best_d = d; best = i; }
        }
        snprintf(out, cap, "unknown section [%s]; did you mean [%s]?", section, sections[best]);
        return;
    }
    for (i = 0; i < MGT_CONFIG_NKEYS; i++) {
        int d;
        if (strcmp(mgt__keys[i].info.section, section)) continue;
        d = mgt__edit_distance(name, mgt__keys[i].info.name);
        if (d < best_d) { best_d = d; best = i; }
    }
    snprintf(out, cap, "unknown key '%s' in [%s]; did you mean '%s'?", name, section, mgt__keys[best].info.name);
}

/* of two keys in a consistency error, the one the user set (file or --set) comes first */
static void mgt__order_keys(const mgt_config *cfg, int *first, int *second) {
    if (cfg->line[*first] == 0 && cfg->line[*second] != 0) { int t = *first; *first = *second; *second = t; }
}
#define MGT__FROM_INIT (-2) /* cfg->line of a model key taken from [model] init's file */
#define MGT__FROM_LAYOUT (-7) /* cfg->line of a layout key parallel.layout = auto chose, and of layout itself once it has chosen */
/* the keys parallel.layout = auto chooses */
static const char *const mgt__layout_keys[][2] = {
    {"parallel", "dp"}, {"parallel", "tp"}, {"parallel", "pp"}, {"parallel", "zero"}, {"parallel", "pp_schedule"}, {"train", "micro_batch"}, {"train", "recompute"},
};
#define MGT__LAYOUT_KEYS 7
/* whether cfg asks for a layout still to be chosen: parallel.layout = auto, not yet resolved (mgt_config_resolve_layout) */
static int mgt__layout_unresolved(const mgt_config *cfg) {
    return cfg->parallel.layout == MGT_LAYOUT_AUTO && cfg->line[mgt__find_key("parallel", "layout")] != MGT__FROM_LAYOUT;
}
/* whether layout key `key` constrains an automatic layout: set beside auto or after it. A preset's own
   layout keys pin it only where the preset itself says auto (auto from --set, --auto-layout or a
   program replaces the preset's layout); --set and a program's options always pin; a default, or a
   value auto chose before, never does */
static int mgt__layout_pinned(const mgt_config *cfg, int key) {
    int line = cfg->line[key];
    if (line == 0 || line == MGT__FROM_LAYOUT || line == MGT__FROM_INIT) return 0;
    return line < 0 || cfg->line[mgt__find_key("parallel", "layout")] > 0;
}
/* where a key got its value: "file:line", "--set section.key", init's model or "the default" */
static const char *mgt__where(const mgt_config *cfg, int key, char *buf, size_t cap) {
    int line = cfg->line[key];
    if (line > 0) snprintf(buf, cap, "%s:%d", cfg->path, line);
    else if (line == MGT__FROM_INIT) snprintf(buf, cap, "[model] init's model");
    else if (line == MGT__FROM_LAYOUT) snprintf(buf, cap, "parallel.layout = auto's choice");
    else if (line <= -3 && line >= -6) snprintf(buf, cap, "%s", cfg->option[-3 - line]);
    else if (line < 0) snprintf(buf, cap, "--set %s.%s", mgt__keys[key].info.section, mgt__keys[key].info.name);
    else snprintf(buf, cap, "the default of [%s] %s", mgt__keys[key].info.section, mgt__keys[key].info.name);
    return buf;
}
/* MGT_OK, or (with the error set) where cfg's layout is parallel.layout = auto still to be chosen:
   `who` needs a layout */
static mgt_result mgt__layout_chosen(const mgt_config *cfg, const char *who) {
    char where[300];
    if (!mgt__layout_unresolved(cfg)) return MGT_OK;
    return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] layout = auto: %s needs the layout chosen first: mgt_config_resolve_layout(&cfg, &choice) "
                     "chooses it (mgt train does)", mgt__where(cfg, mgt__find_key("parallel", "layout"), where, sizeof where), who);
}

/* why a string value is refused (NULL when it is fine): a value is UTF-8 text of one line, so that
   any value stores exactly in a checkpoint's JSON and prints as it is */
static const char *mgt__str_problem(const char *s, char *why, size_t cap) {
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    if (n >= MGT_STR_MAX) { snprintf(why, cap, "a value of %zu bytes is longer than %d", n, MGT_STR_MAX - 1); return why; }
    while (*p) {
        int len = *p < 0x80 ? 1 : (*p & 0xe0) == 0xc0 ? 2 : (*p & 0xf0) == 0xe0 ? 3 : (*p & 0xf8) == 0xf0 ? 4 : 0, i;
        unsigned cp = len == 1 ? *p : len == 2 ? *p & 0x1fu : len == 3 ? *p & 0x0fu : *p & 0x07u;
        if (*p < 0x20 || *p == 0x7f) {
            snprintf(why, cap, "byte %d is the control character 0x%02x; a value is text on one line", (int)(p - (const unsigned char *)s) + 1, *p);
            return why;
        }
        for (i = 1; i < len; i++) {
            if ((p[i] & 0xc0) != 0x80) { len = 0; break; }
            cp = cp << 6 | (p[i] & 0x3fu);
        }
        if (!len || (len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff)) {
            snprintf(why, cap, "byte %d is not UTF-8 text; a value is UTF-8", (int)(p - (const unsigned char *)s) + 1);
            return why;
        }
        p += len;
    }
    return NULL;
}

/* Parses one value into cfg; on error writes what is valid into why. A string is taken as it is
   (inih has already stripped a file's spaces around it); numbers and choices may have spaces. */
static int mgt__set_value(mgt_config *cfg, int key, const char *value, char *why, size_t cap) {
    const mgt__key *k = &mgt__keys[key];
    char *field = (char *)cfg + k->offset, *end;
    if (k->type != MGT__T_STR) while (*value == ' ' || *value == '\t') value++;
    switch (k->type) {
    case MGT__T_INT: {
        long long v;
        errno = 0;
        v = strtoll(value, &end, 10);
        while (*end == ' ' || *end == '\t') end++;
        if (!*value || *end || errno) {
            snprintf(why, cap, "'%s' is not an integer (valid: %.0f..%.0f)", value, k->info.min, k->info.max);
            return 0;
        }
        if ((double)v < k->info.min || (double)v > k->info.max) {
            snprintf(why, cap, "%lld is out of range (valid: %.0f..%.0f)", v, k->info.min, k->info.max);
            return 0;
        }
        *(int *)field = (int)v;
        return 1;
    }
    case MGT__T_FLOAT: {
        double v;
        errno = 0;
        v = strtod(value, &end);
        while (*end == ' ' || *end == '\t') end++;
        if (errno == ERANGE && isfinite(v)) errno = 0; /* a subnormal number, or below it: the nearest double */
        if (!*value || *end || errno || v != v) {
            snprintf(why, cap, "'%s' is not a number (valid: %g..%g)", value, k->info.min, k->info.max);
            return 0;
        }
        if (v < k->info.min || v > k->info.max) {
            snprintf(why, cap, "%g is out of range (valid: %g..%g)", v, k->info.min, k->info.max);
            return 0;
        }
        *(double *)field = v;
        return 1;
    }
    case MGT__T_ENUM: {
        int index = mgt__choice_index(k->info.choices, value);
        if (index < 0) {
            snprintf(why, cap, "'%s' is not one of %s", value, k->info.choices);
            return 0;
        }
        *(int *)field = index;
        return 1;
    }
    default:
        if (mgt__str_problem(value, why, cap)) return 0;
        memset(field, 0, MGT_STR_MAX); /* the same value is the same bytes */
        memcpy(field, value, strlen(value));
        return 1;
    }
}

MGTDEF const char *mgt_recompute_name(int mode) {
    static const char *const names[] = MGT_RECOMPUTE_NAMES;
    return mode >= 0 && mode < (int)(sizeof names / sizeof names[0]) ? names[mode] : "?";
}

MGTDEF void mgt_config_init(mgt_config *cfg) {
    int i;
    char why[256];
    if (!cfg) return;
    memset(cfg, 0, sizeof *cfg);
    for (i = 0; i < MGT_CONFIG_NKEYS; i++) (void)mgt__set_value(cfg, i, mgt__keys[i].info.def, why, sizeof why);
}

MGTDEF int mgt_config_value_string(const mgt_config *cfg, int key, char *buf, size_t cap) {
    const mgt__key *k;
    const char *field;
    if (!cfg || key < 0 || key >= MGT_CONFIG_NKEYS || !buf) return -1;
    k = &mgt__keys[key];
    field = (const char *)cfg + k->offset;
    switch (k->type) {
    case MGT__T_INT: return snprintf(buf, cap, "%d", *(const int *)field);
    case MGT__T_FLOAT: { /* the shortest text that reads back to the same double */
        double v = *(const double *)field;
        int digits;
        for (digits = 6; digits < 17; digits++) {
            snprintf(buf, cap, "%.*g", digits, v);
            if (strtod(buf, NULL) == v) break;
        }
        return snprintf(buf, cap, "%.*g", digits, v);
    }
    case MGT__T_ENUM: mgt__choice_name(k->info.choices, *(const int *)field, buf, cap); return (int)strlen(buf);
    default: return snprintf(buf, cap, "%s", field);
    }
}

/* Preset text goes through inih one physical line per reader call, so inih's line numbers are the
   file's. inih reads at most `num` bytes of a line (INI_MAX_LINE: 200 in Debian's build, which has
   neither INI_ALLOW_REALLOC nor INI_USE_STACK 0) and would read the rest as the next line; the
   reader reads each line whole instead and hands inih what it needs of it: a longer comment or
   blank line shortened (inih ignores it), a longer [section] header up to its ']', a longer
   key = value line as "key =" with the value kept aside for the handler (st->long_value), cut where
   inih cuts a value (mgt__ini_value). A NUL byte is refused: a preset is text. */
enum { MGT__NSECTIONS = 0
#define MGT__COUNT_SECTION(s) +1
    MGT_CONFIG_SECTIONS(MGT__COUNT_SECTION)
#undef MGT__COUNT_SECTION
};
static const char *const mgt__section_names[MGT__NSECTIONS] = {
#define MGT__SECTION_NAME(s) #s,
    MGT_CONFIG_SECTIONS(MGT__SECTION_NAME)
#undef MGT__SECTION_NAME
};
#define MGT__INI_LINE_MAX 65536 /* a longer line is refused: not a preset */

typedef struct mgt__ini_state {
    mgt_config *cfg;
    const char *text;        /* for string input */
    FILE *file;              /* for file input */
    int line;                /* line the reader returned last: inih calls the handler for it */
    mgt_result failed;       /* the error that ended the parse, MGT_OK while none */
    char *buf;               /* that line, whole */
    size_t cap;
    const char *long_value;  /* its value when inih got "key =" without it, else NULL */
    int last_key;            /* the key inih continues with an indented line (its prev_name); -1 after a header */
    int key_line[MGT_CONFIG_NKEYS];   /* the line of this text that set each key, 0 for none */
    int section_line[MGT__NSECTIONS]; /* the line of each section's first header, 0 for none */
    char base[MGT_STR_MAX];  /* a preset file's folder, with its '/': the paths in it are relative to it */
} mgt__ini_state;

static int mgt__ini_space(int c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; } /* isspace in "C" */
/* inih's scan for one of `chars` or an inline comment (a ';' after a space) */
static char *mgt__ini_find(char *s, const char *chars) {
    int was_space = 0;
    while (*s && !(chars && strchr(chars, *s)) && !(was_space && *s == ';')) { was_space = mgt__ini_space((unsigned char)*s); s++; }
    return s;
}
/* what inih makes of the text after a key's '=': up to an inline comment, spaces stripped */
static char *mgt__ini_value(char *v) {
    char *end = mgt__ini_find(v, NULL);
    *end = 0;
    while (end > v && mgt__ini_space((unsigned char)end[-1])) *--end = 0;
    while (mgt__ini_space((unsigned char)*v)) v++;
    return v;
}

/* the next physical line into st->buf, without its '\n': 1, or 0 at the end or on an error (st->failed) */
static int mgt__ini_getline(mgt__ini_state *st) {
    size_t n = 0;
    int c, any = 0;
    for (;;) {
        if (st->file) { if ((c = getc(st->file)) == EOF) break; }
        else { if (!*st->text) break; c = (unsigned char)*st->text++; }
        any = 1;
        if (c == '\n') break;
        if (c == 0) {
            st->failed = mgt__fail(MGT_ERROR_CONFIG, "%s:%d: a NUL byte at column %zu: a preset is INI text (UTF-8); is this a binary or UTF-16 file?",
                                   st->cfg->path, st->line + 1, n + 1);
            return 0;
        }
        if (n + 1 >= st->cap) {
            size_t cap = st->cap ? 2 * st->cap : 256;
            char *p;
            if (cap > MGT__INI_LINE_MAX) {
                st->failed = mgt__fail(MGT_ERROR_CONFIG, "%s:%d: a line of more than %d characters: not a preset", st->cfg->path, st->line + 1,
                                       MGT__INI_LINE_MAX);
                return 0;
            }
            if (!(p = (char *)MGT_REALLOC(st->buf, cap))) { st->failed = mgt__fail(MGT_ERROR_MEMORY, "%s: out of memory reading the preset", st->cfg->path); return 0; }
            st->buf = p;
            st->cap = cap;
        }
        st->buf[n++] = (char)c;
    }
    if (st->file && ferror(st->file)) {
        st->failed = mgt__fail(MGT_ERROR_IO, "%s:%d: cannot read the preset: %s", st->cfg->path, st->line + 1, strerror(errno));
        return 0;
    }
    if (!any) return 0;
    if (!st->buf) { /* a first line that is empty */
        if (!(st->buf = (char *)MGT_REALLOC(NULL, 256))) { st->failed = mgt__fail(MGT_ERROR_MEMORY, "%s: out of memory reading the preset", st->cfg->path); return 0; }
        st->cap = 256;
    }
    if (n > 0 && st->buf[n - 1] == '\r') n--; /* CRLF; inih strips it too */
    st->buf[n] = 0;
    return 1;
}

/* a [section] header, its name from s to close: an unknown section fails at its own line (inih
   reports keys, not sections); a repeated one is a warning naming both lines */
static int mgt__ini_section(mgt__ini_state *st, const char *s, const char *close) {
    char name[64], why[256];
    size_t len = (size_t)(close - s), n = len < sizeof name - 1 ? len : sizeof name - 1;
    int i;
    memcpy(name, s, n);
    name[n] = 0;
    for (i = 0; i < MGT__NSECTIONS; i++)
        if (len == strlen(mgt__section_names[i]) && !strncmp(s, mgt__section_names[i], len)) break;
    if (i == MGT__NSECTIONS) {
        mgt__suggest(name, "", why, sizeof why);
        st->failed = mgt__fail(MGT_ERROR_CONFIG, "%s:%d: %s", st->cfg->path, st->line, why);
        return 0;
    }
    if (st->section_line[i])
        mgt__log(MGT_LOG_WARN, "%s:%d: [%s] again (first at %s:%d): the keys under both headers are read as one [%s] section", st->cfg->path, st->line,
                 name, st->cfg->path, st->section_line[i], name);
    else st->section_line[i] = st->line;
    return 1;
}

static char *mgt__ini_reader(char *str, int num, void *stream) {
    mgt__ini_state *st = (mgt__ini_state *)stream;
    size_t room = num > 2 ? (size_t)num - 2 : 0, hand; /* what fits beside '\n' and the terminator */
    char *line, *p;
    if (st->failed || !mgt__ini_getline(st)) return NULL;
    st->line++;
    st->long_value = NULL;
    line = p = st->buf;
    if (st->line == 1 && !strncmp(p, "\xEF\xBB\xBF", 3)) p += 3; /* a UTF-8 byte-order mark, which inih skips */
    while (mgt__ini_space((unsigned char)*p)) p++;
    hand = strlen(p); /* inih gets the line from p: without the indentation and the mark, which it skips */
    if (!*p || *p == ';' || *p == '#') { /* blank or a comment: inih reads nothing of it */
        if (hand > room) hand = room;
    } else if (p > line && st->last_key >= 0) { /* inih would continue the previous key's value */
        const mgt_key_info *k = &mgt__keys[st->last_key].info;
        st->failed = mgt__fail(MGT_ERROR_CONFIG, "%s:%d: an indented line continues the value of [%s] %s (%s:%d) in INI; a value is one line: "
                               "remove the indentation", st->cfg->path, st->line, k->section, k->name, st->cfg->path, st->key_line[st->last_key]);
        return NULL;
    } else if (*p == '[') {
        char *close = mgt__ini_find(p + 1, "]");
        if (*close != ']') {
            st->failed = mgt__fail(MGT_ERROR_CONFIG, "%s:%d: a [section] header without its ']' (before any ; comment)", st->cfg->path, st->line);
            return NULL;
        }
        if (!mgt__ini_section(st, p + 1, close)) return NULL;
        st->last_key = -1;
        hand = (size_t)(close + 1 - p); /* inih ignores what follows the ']'; a known name fits */
    } else {
        char *sep = mgt__ini_find(p, "=:");
        if (*sep != '=' && *sep != ':') {
            st->failed = mgt__fail(MGT_ERROR_CONFIG, "%s:%d: not an INI line (expected [section], key = value or a ; comment)", st->cfg->path, st->line);
            return NULL;
        }
        if (hand > room) { /* too long for inih's buffer: the value goes around it */
            if ((size_t)(sep + 1 - p) > room) {
                *sep = 0;
                st->failed = mgt__fail(MGT_ERROR_CONFIG, "%s:%d: a key name of %zu characters: not a key of mgt (see `mgt keys`)", st->cfg->path, st->line,
                                       strlen(p));
                return NULL;
            }
            st->long_value = mgt__ini_value(sep + 1);
            hand = (size_t)(sep + 1 - p);
        }
    }
    memcpy(str, p, hand);
    str[hand] = '\n';
    str[hand + 1] = 0;
    return str;
}

/* path, relative to the folder base (ending in '/', or "" for the working directory), as a path
   relative to the working directory; a leading "../" takes back a folder of base ("presets/" and
   "../data/x.bin" make "data/x.bin"). 0 when it does not fit cap. */
static int mgt__join_path(const char *base, const char *path, char *out, size_t cap) {
    size_t keep = strlen(base);
    if (!path[0] || path[0] == '/' || !base[0]) return (size_t)snprintf(out, cap, "%s", path) < cap;
    while (path[0] == '.' && path[1] == '/') path += 2; /* ./x is x */
    while (!strncmp(path, "../", 3) && keep > 0) {
        size_t start = keep - 1; /* the last folder of base: base[start..keep) is "name/" */
        while (start > 0 && base[start - 1] != '/') start--;
        if (keep - start == 3 && !strncmp(base + start, "../", 3)) break; /* base is above the working directory already */
        if (keep - start == 2 && !strncmp(base + start, "./", 2)) { keep = start; continue; }
        keep = start;
        path += 3;
    }
    return (size_t)snprintf(out, cap, "%.*s%s", (int)keep, base, path) < cap;
}

/* a preset file's path keys (every STR key) relative to its folder; data lists item by item */
static int mgt__preset_path(const mgt__ini_state *st, int key, const char *value, char *out, size_t cap) {
    const char *name = mgt__keys[key].info.name;
    size_t used = 0;
    int list = !strcmp(mgt__keys[key].info.section, "data") && (!strcmp(name, "train") || !strcmp(name, "val"));
    if (!strcmp(name, "metrics") && (!strcmp(value, "auto") || !strcmp(value, "none"))) return (size_t)snprintf(out, cap, "%s", value) < cap;
    out[0] = 0;
    for (;;) {
        char item[MGT_STR_MAX], joined[MGT_STR_MAX];
        size_t n = list ? strcspn(value, ",") : strlen(value), lead = 0;
        while (lead < n && (value[lead] == ' ' || value[lead] == '\t')) lead++;
        if (n - lead >= sizeof item) return 0;
        memcpy(item, value + lead, n - lead);
        item[n - lead] = 0;
        if (!mgt__join_path(st->base, item, joined, sizeof joined)) return 0;
        if ((size_t)snprintf(out + used, cap - used, "%s%s", used ? "," : "", joined) >= cap - used) return 0;
        used = strlen(out);
        if (!list || !value[n]) return 1;
        value += n + 1;
    }
}

static int mgt__ini_handler(void *user, const char *section, const char *name, const char *value) {
    mgt__ini_state *st = (mgt__ini_state *)user;
    char why[512];
    int key;
    if (st->failed) return 0;
    if (st->long_value) value = st->long_value;
    key = mgt__find_key(section, name);
    if (key < 0) {
        if (!section[0]) snprintf(why, sizeof why, "key '%s' outside a section; put it under its [section] (see `mgt keys`)", name);
        else mgt__suggest(section, name, why, sizeof why);
        st->failed = mgt__fail(MGT_ERROR_CONFIG, "%s:%d: %s", st->cfg->path, st->line, why);
        return 0;
    }
    if (st->key_line[key]) {
        st->failed = mgt__fail(MGT_ERROR_CONFIG, "%s:%d: [%s] %s is set again (first at %s:%d); a preset sets a key once: delete one of the two lines",
                               st->cfg->path, st->line, section, name, st->cfg->path, st->key_line[key]);
        return 0;
    }
    if (mgt__keys[key].type == MGT__T_STR && st->base[0]) {
        char path[MGT_STR_MAX];
        if (!mgt__preset_path(st, key, value, path, sizeof path)) {
            st->failed = mgt__fail(MGT_ERROR_CONFIG, "%s:%d: [%s] %s: '%s' relative to the preset's folder %s is longer than %d characters", st->cfg->path,
                                   st->line, section, name, value, st->base, MGT_STR_MAX - 1);
            return 0;
        }
        value = path;
        if (!mgt__set_value(st->cfg, key, value, why, sizeof why)) {
            st->failed = mgt__fail(MGT_ERROR_CONFIG, "%s:%d: [%s] %s: %s", st->cfg->path, st->line, section, name, why);
            return 0;
        }
    } else if (!mgt__set_value(st->cfg, key, value, why, sizeof why)) {
        st->failed = mgt__fail(MGT_ERROR_CONFIG, "%s:%d: [%s] %s: %s", st->cfg->path, st->line, section, name, why);
        return 0;
    }
    st->cfg->line[key] = st->key_line[key] = st->line;
    st->last_key = key;
    return 1;
}

static mgt_result mgt__config_parse(mgt_config *cfg, mgt__ini_state *st, const char *name) {
    int rc;
    mgt__strlcpy(cfg->path, name, sizeof cfg->path);
    st->cfg = cfg;
    st->last_key = -1;
    rc = ini_parse_stream(mgt__ini_reader, st, mgt__ini_handler, st);
    MGT_FREE(st->buf);
    st->buf = NULL;
    if (st->failed) return st->failed;
    if (rc > 0) return mgt__fail(MGT_ERROR_CONFIG, "%s:%d: not an INI line (expected [section], key = value or a ; comment)", name, rc);
    if (rc < 0) return mgt__fail(MGT_ERROR_IO, "%s: cannot read the preset", name);
    return MGT_OK;
}

MGTDEF mgt_result mgt_config_load(mgt_config *cfg, const char *path) {
    mgt__ini_state st;
    mgt_result r;
    char why[128];
    int fd;
    if (!cfg || !path) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_config_load: cfg and path are required");
    memset(&st, 0, sizeof st);
    fd = mgt__open_regular(path, NULL, why, sizeof why);
    if (fd < 0) return mgt__fail(MGT_ERROR_CONFIG, "%s: cannot open the preset: %s (check the path; presets live in presets/)", path, why);
    if (strrchr(path, '/')) { /* its paths are relative to its folder, as most tools' config files' are */
        size_t n = (size_t)(strrchr(path, '/') - path) + 1;
        if (n >= sizeof st.base) { close(fd); return mgt__fail(MGT_ERROR_CONFIG, "%s: the preset's folder is longer than %d characters", path, MGT_STR_MAX - 1); }
        memcpy(st.base, path, n);
        st.base[n] = 0;
    }
    if (!(st.file = fdopen(fd, "r"))) {
        int e = errno;
        close(fd);
        return mgt__fail(MGT_ERROR_IO, "%s: cannot open the preset: %s", path, strerror(e));
    }
    r = mgt__config_parse(cfg, &st, path);
    fclose(st.file);
    return r;
}

MGTDEF mgt_result mgt_config_load_string(mgt_config *cfg, const char *ini_text, const char *name) {
    mgt__ini_state st;
    if (!cfg || !ini_text) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_config_load_string: cfg and text are required");
    memset(&st, 0, sizeof st);
    st.text = ini_text;
    return mgt__config_parse(cfg, &st, name ? name : "<string>");
}

MGTDEF mgt_result mgt_config_set(mgt_config *cfg, const char *assignment) { return mgt_config_set_from(cfg, assignment, NULL); }

MGTDEF const char *mgt_config_where(const mgt_config *cfg, const char *section, const char *name, char *buf, size_t cap) {
    int key = cfg && section && name ? mgt__find_key(section, name) : -1;
    if (cap) buf[0] = 0;
    if (key >= 0 && cfg->line[key] != 0) mgt__where(cfg, key, buf, cap);
    return buf;
}

MGTDEF mgt_result mgt_config_set_from(mgt_config *cfg, const char *assignment, const char *option) {
    char section[64], name[64], why[512], by[80];
    const char *dot, *eq;
    int key, slot;
    if (!cfg || !assignment) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_config_set: cfg and assignment are required");
    if (option) snprintf(by, sizeof by, "%s (%s)", option, assignment);
    else snprintf(by, sizeof by, "--set %.70s", assignment);
    dot = strchr(assignment, '.');
    eq = strchr(assignment, '=');
    if (!dot || !eq || dot > eq || (size_t)(dot - assignment) >= sizeof section || (size_t)(eq - dot - 1) >= sizeof name)
        return mgt__fail(MGT_ERROR_CONFIG, "%s: expected section.key=value, for example --set train.steps=100", by);
    memcpy(section, assignment, (size_t)(dot - assignment));
    section[dot - assignment] = 0;
    memcpy(name, dot + 1, (size_t)(eq - dot - 1));
    name[eq - dot - 1] = 0;
    key = mgt__find_key(section, name);
    if (key < 0) {
        mgt__suggest(section, name, why, sizeof why);
        return mgt__fail(MGT_ERROR_CONFIG, "%s: %s", by, why);
    }
    if (!mgt__set_value(cfg, key, eq + 1, why, sizeof why))
        return mgt__fail(MGT_ERROR_CONFIG, "%s: [%s] %s: %s", by, section, name, why);
    cfg->line[key] = -1;
    if (!option) return MGT_OK;
    for (slot = 0; slot < 3 && cfg->option[slot][0] && strcmp(cfg->option[slot], option); slot++) {} /* the last slot is reused */
    mgt__strlcpy(cfg->option[slot], option, sizeof cfg->option[slot]);
    cfg->line[key] = -3 - slot;
    return MGT_OK;
}

#define MGT__KEY(sec, name) mgt__find_key(#sec, #name)

MGTDEF int mgt_config_ranks(const mgt_config *cfg) { return cfg->parallel.dp * cfg->parallel.cp * cfg->parallel.tp * cfg->parallel.pp; }

MGTDEF mgt_result mgt_config_validate(const mgt_config *cfg) {
    char w1[300], w2[300], w3[300], w4[300];
    int tok_vocab;
    if (!cfg) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_config_validate: cfg is required");
    { /* each key as a file or --set could give it (a program may set fields directly) */
        int i;
        for (i = 0; i < MGT_CONFIG_NKEYS; i++) {
            mgt_config copy;
            char text[MGT_STR_MAX + 64], why[512];
            const mgt__key *k = &mgt__keys[i];
            if (k->type == MGT__T_STR && !memchr((const char *)cfg + k->offset, 0, MGT_STR_MAX))
                return mgt__fail(MGT_ERROR_CONFIG, "%s: [%s] %s: not a string (no terminating NUL in %d bytes)",
                                 cfg->line[i] ? mgt__where(cfg, i, w1, sizeof w1) : "set by the program", k->info.section, k->info.name, MGT_STR_MAX);
            mgt_config_value_string(cfg, i, text, sizeof text);
            copy = *cfg;
            if (!mgt__set_value(&copy, i, text, why, sizeof why)) /* a default is valid: line 0 here is a program's assignment */
                return mgt__fail(MGT_ERROR_CONFIG, "%s: [%s] %s: %s", cfg->line[i] ? mgt__where(cfg, i, w1, sizeof w1) : "set by the program",
                                 k->info.section, k->info.name, why);
        }
    }
    if (cfg->parallel.cp > 1 && mgt__layout_unresolved(cfg))
        return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] cp = %d with layout = auto (from %s): the layout search does not choose context parallelism, nor keep "
                         "it; set layout = manual with the layout you want, or cp = 1", mgt__where(cfg, MGT__KEY(parallel, cp), w1, sizeof w1),
                         cfg->parallel.cp, mgt__where(cfg, MGT__KEY(parallel, layout), w2, sizeof w2));
    if (mgt__layout_unresolved(cfg)) { /* the keys auto chooses are checked once chosen: here those set (pinned) against the rest */
        mgt_config pinned = *cfg;
        int k;
        for (k = 0; k < MGT__LAYOUT_KEYS; k++) {
            int key = mgt__find_key(mgt__layout_keys[k][0], mgt__layout_keys[k][1]);
            if (mgt__layout_pinned(cfg, key)) continue;
            if (k == 0) pinned.parallel.dp = 1;
            else if (k == 1) pinned.parallel.tp = 1;
            else if (k == 2) pinned.parallel.pp = 1;
            else if (k == 3) pinned.parallel.zero = 0;
            else if (k == 4) pinned.parallel.pp_schedule = 0;
            else if (k == 5) pinned.train.micro_batch = 1;
            else pinned.train.recompute = MGT_RECOMPUTE_NONE;
        }
        pinned.parallel.sp = 0; /* its rules are of tp and the micro-batch's rows: checked once they are chosen */
        pinned.parallel.layout = MGT_LAYOUT_MANUAL;
        return mgt_config_validate(&pinned);
    }
    {
        int e;
        if (frexp(cfg->precision.loss_scale, &e) != 0.5) /* a power of two scales and unscales exactly */
            return mgt__fail(MGT_ERROR_CONFIG, "%s: [precision] loss_scale = %g is not a power of two; scaling by one is exact: use for example 65536 (2^16)",
                             mgt__where(cfg, MGT__KEY(precision, loss_scale), w1, sizeof w1), cfg->precision.loss_scale);
    }
    if (cfg->model.d_model % cfg->model.n_head) {
        int a = MGT__KEY(model, n_head), b = MGT__KEY(model, d_model);
        mgt__order_keys(cfg, &a, &b);
        return mgt__fail(MGT_ERROR_CONFIG, "%s: [model] d_model = %d does not divide by n_head = %d (d_model from %s, n_head from %s); pick n_head among the divisors of d_model",
                         mgt__where(cfg, a, w1, sizeof w1), cfg->model.d_model, cfg->model.n_head, mgt__where(cfg, MGT__KEY(model, d_model), w2, sizeof w2),
                         mgt__where(cfg, MGT__KEY(model, n_head), w3, sizeof w3));
    }
    if ((long long)cfg->train.global_batch % ((long long)cfg->train.micro_batch * cfg->parallel.dp)) { /* 1e6 x 4096 does not fit an int */
        int keys[3], k, primary;
        keys[0] = MGT__KEY(parallel, dp); keys[1] = MGT__KEY(train, global_batch); keys[2] = MGT__KEY(train, micro_batch);
        int per = cfg->train.global_batch % cfg->parallel.dp ? 0 : cfg->train.global_batch / cfg->parallel.dp, m = 0;
        char keep[160] = "";
        for (primary = keys[1], k = 2; k >= 0; k--) if (cfg->line[keys[k]] != 0) primary = keys[k]; /* a key the user set */
        for (m = per && cfg->train.micro_batch < per ? cfg->train.micro_batch : per; m > 1 && per % m; m--) {}
        if (per) /* the micro-batch that keeps the batch, and with it the training */
            snprintf(keep, sizeof keep, ", or keep the batch with [train] micro_batch = %d (%d micro-batch%s of %d on each of the %d DP ranks)", m, per / m,
                     per / m == 1 ? "" : "es", m, cfg->parallel.dp);
        else { /* no micro-batch keeps it: the data-parallel sizes that would */
            int d, shown = 0;
            snprintf(keep, sizeof keep, ", or keep the batch with a dp that divides %d:", cfg->train.global_batch);
            for (d = 1; d <= cfg->train.global_batch && shown < 8; d++)
                if (cfg->train.global_batch % d == 0) snprintf(keep + strlen(keep), sizeof keep - strlen(keep), "%s %d", shown++ ? "," : "", d);
        }
        return mgt__fail(MGT_ERROR_CONFIG, "%s: [train] global_batch = %d is not a multiple of micro_batch x dp = %d x %d (global_batch from %s, micro_batch from %s, dp from %s); make global_batch a multiple of %lld%s",
                         mgt__where(cfg, primary, w1, sizeof w1), cfg->train.global_batch, cfg->train.micro_batch, cfg->parallel.dp,
                         mgt__where(cfg, keys[1], w2, sizeof w2), mgt__where(cfg, keys[2], w3, sizeof w3), mgt__where(cfg, keys[0], w4, sizeof w4),
                         (long long)cfg->train.micro_batch * cfg->parallel.dp, keep);
    }
    if (cfg->model.n_head % cfg->parallel.tp) {
        int a = MGT__KEY(parallel, tp), b = MGT__KEY(model, n_head);
        mgt__order_keys(cfg, &a, &b);
        return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] tp = %d does not divide n_head = %d (tp from %s, n_head from %s); tensor parallelism splits the heads, so pick tp among the divisors of n_head",
                         mgt__where(cfg, a, w1, sizeof w1), cfg->parallel.tp, cfg->model.n_head, mgt__where(cfg, MGT__KEY(parallel, tp), w2, sizeof w2),
                         mgt__where(cfg, MGT__KEY(model, n_head), w3, sizeof w3));
    }
    {
        int nkv = cfg->model.n_kv_head ? cfg->model.n_kv_head : cfg->model.n_head, dff = cfg->model.d_ff ? cfg->model.d_ff : 4 * cfg->model.d_model;
        if (cfg->model.n_head % nkv)
            return mgt__fail(MGT_ERROR_CONFIG, "%s: [model] n_kv_head = %d does not divide n_head = %d; each key/value head serves n_head / n_kv_head query heads",
                             mgt__where(cfg, MGT__KEY(model, n_kv_head), w1, sizeof w1), nkv, cfg->model.n_head);
        if (nkv % cfg->parallel.tp && cfg->parallel.tp % nkv) { /* neither split nor replicated (see mgt__kv_local) */
            char valid[200] = "";
            int t;
            for (t = 1; t <= cfg->model.n_head; t++)
                if (cfg->model.n_head % t == 0 && (nkv % t == 0 || t % nkv == 0)) mgt__catf(valid, sizeof valid, "%s%d", valid[0] ? ", " : "", t);
            return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] tp = %d with n_kv_head = %d (n_kv_head from %s): tensor parallelism splits the key/value heads "
                             "(tp divides n_kv_head) or, when tp is a multiple of n_kv_head, gives each rank the one its query heads read; valid tp "
                             "for n_head = %d: %s", mgt__where(cfg, MGT__KEY(parallel, tp), w1, sizeof w1), cfg->parallel.tp, nkv,
                             mgt__where(cfg, MGT__KEY(model, n_kv_head), w2, sizeof w2), cfg->model.n_head, valid);
        }
        if (dff % cfg->parallel.tp)
            return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] tp = %d does not divide the MLP's d_ff = %d (d_ff from %s); tensor parallelism splits its hidden units",
                             mgt__where(cfg, MGT__KEY(parallel, tp), w1, sizeof w1), cfg->parallel.tp, dff, mgt__where(cfg, MGT__KEY(model, d_ff), w2, sizeof w2));
        if (cfg->model.positions == MGT_POSITIONS_ROPE && (cfg->model.d_model / cfg->model.n_head) % 2)
            return mgt__fail(MGT_ERROR_CONFIG, "%s: [model] positions = rope rotates pairs of channels, but the head size d_model / n_head = %d is odd",
                             mgt__where(cfg, MGT__KEY(model, positions), w1, sizeof w1), cfg->model.d_model / cfg->model.n_head);
        if (cfg->model.norm == MGT_NORM_LAYERNORM && cfg->model.norm_eps != 1e-5)
            return mgt__fail(MGT_ERROR_CONFIG, "%s: [model] norm_eps = %g with norm = layernorm; LayerNorm's epsilon is fixed at 1e-5 (GPT-2's), only rmsnorm takes another",
                             mgt__where(cfg, MGT__KEY(model, norm_eps), w1, sizeof w1), cfg->model.norm_eps);
    }
    if (cfg->parallel.sp && cfg->parallel.tp == 1)
        return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] sp = 1 with tp = 1 (tp from %s): sequence parallelism splits the rows between the tensor-parallel "
                         "layers over the TP ranks, so it needs tp > 1; set parallel.tp to 2 or more, or parallel.sp = 0",
                         mgt__where(cfg, MGT__KEY(parallel, sp), w1, sizeof w1), mgt__where(cfg, MGT__KEY(parallel, tp), w2, sizeof w2));
    if (cfg->parallel.sp && ((long long)cfg->train.micro_batch * (cfg->model.seq_len / cfg->parallel.cp)) % cfg->parallel.tp)
        return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] sp = 1 with tp = %d: the micro-batch's micro_batch x seq_len = %d x %d = %lld rows do not divide "
                         "by tp (micro_batch from %s, seq_len from %s); each TP rank holds an equal share of the rows: make micro_batch x seq_len a "
                         "multiple of %d, or set parallel.sp = 0", mgt__where(cfg, MGT__KEY(parallel, sp), w1, sizeof w1), cfg->parallel.tp,
                         cfg->train.micro_batch, cfg->model.seq_len, (long long)cfg->train.micro_batch * cfg->model.seq_len,
                         mgt__where(cfg, MGT__KEY(train, micro_batch), w2, sizeof w2), mgt__where(cfg, MGT__KEY(model, seq_len), w3, sizeof w3), cfg->parallel.tp);
    if (cfg->parallel.cp > 1 && cfg->model.seq_len % (2 * cfg->parallel.cp))
        return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] cp = %d with seq_len = %d (from %s): context parallelism cuts the sequence into 2 cp = %d chunks of "
                         "equal size (each rank takes chunk i and its mirror 2 cp - 1 - i, for an equal share of causal attention); make seq_len a "
                         "multiple of %d, or choose cp so that 2 cp divides it", mgt__where(cfg, MGT__KEY(parallel, cp), w1, sizeof w1), cfg->parallel.cp,
                         cfg->model.seq_len, mgt__where(cfg, MGT__KEY(model, seq_len), w2, sizeof w2), 2 * cfg->parallel.cp, 2 * cfg->parallel.cp);
    if (cfg->parallel.pp > cfg->model.n_layer || cfg->parallel.pp > 256) {
        int a = MGT__KEY(parallel, pp), b = MGT__KEY(model, n_layer);
        mgt__order_keys(cfg, &a, &b);
        return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] pp = %d stages for n_layer = %d blocks (pp from %s); every stage needs a block: use pp <= min(n_layer, 256)",
                         mgt__where(cfg, a, w1, sizeof w1), cfg->parallel.pp, cfg->model.n_layer, mgt__where(cfg, MGT__KEY(parallel, pp), w2, sizeof w2));
    }
    if (cfg->parallel.pp_virtual > 1) { /* interleaved 1F1B (mgt__pipeline_actions): what its chunks and groups of micro-batches need */
        int V = cfg->parallel.pp_virtual, P = cfg->parallel.pp, L = cfg->model.n_layer, M = cfg->train.global_batch / (cfg->train.micro_batch * cfg->parallel.dp);
        const char *at = mgt__where(cfg, MGT__KEY(parallel, pp_virtual), w1, sizeof w1);
        if (P == 1)
            return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] pp_virtual = %d with pp = 1: a stage's chunks interleave with the other stages'; set pp_virtual = 1, or pp >= 2",
                             at, V);
        if (cfg->parallel.pp_schedule == 1)
            return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] pp_virtual = %d with pp_schedule = gpipe: the chunks interleave the 1f1b schedule; set pp_schedule = 1f1b, or pp_virtual = 1",
                             at, V);
        if (L % (P * V)) {
            char valid[200] = "";
            int v;
            for (v = 1; v <= 64 && P * v <= L; v++)
                if (L % (P * v) == 0) mgt__catf(valid, sizeof valid, "%s%d", valid[0] ? ", " : "", v);
            return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] pp_virtual = %d with pp = %d cuts n_layer = %d blocks into %d chunks of equal size; make n_layer a multiple of "
                             "pp x pp_virtual = %d, or set pp_virtual to one of: %s", at, V, P, L, P * V, P * V, valid);
        }
        if (M % P)
            return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] pp_virtual = %d runs micro-batches in groups of pp = %d, but a step has global_batch / (micro_batch x dp) = "
                             "%d of them; make [train] global_batch a multiple of micro_batch x dp x pp = %lld, or set pp_virtual = 1",
                             at, V, P, M, (long long)cfg->train.micro_batch * cfg->parallel.dp * P);
    }
    if (cfg->parallel.pp_schedule == 2 /* zb */ && cfg->parallel.pp > 1) { /* what the split backward (src/pipeline.c) does not do */
        const char *at = mgt__where(cfg, MGT__KEY(parallel, pp_schedule), w1, sizeof w1);
        if (cfg->parallel.pp_virtual > 1)
            return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] pp_schedule = zb with pp_virtual = %d: the zero-bubble schedule runs one chunk per stage; set pp_virtual = 1, "
                             "or pp_schedule = 1f1b for interleaving", at, cfg->parallel.pp_virtual);
        if (cfg->train.recompute == MGT_RECOMPUTE_FULL)
            return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] pp_schedule = zb with [train] recompute = full: the weight-gradient pass reads every block's matmul inputs, "
                             "which full recompute would rebuild a second time; set recompute = selective or none, or pp_schedule = 1f1b", at);
        if (cfg->parallel.zero >= 2)
            return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] pp_schedule = zb with zero = %d: a block's gradients are complete only after its deferred weight-gradient pass, "
                             "but ZeRO %d reduce-scatters each block's after its backward; set zero = 0 or 1, or pp_schedule = 1f1b", at, cfg->parallel.zero, cfg->parallel.zero);
    }
    if ((long long)cfg->parallel.dp * cfg->parallel.cp * cfg->parallel.tp * cfg->parallel.pp > 4096)
        return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] dp x cp x tp x pp = %lld ranks; at most 4096", mgt__where(cfg, MGT__KEY(parallel, dp), w1, sizeof w1),
                         (long long)cfg->parallel.dp * cfg->parallel.cp * cfg->parallel.tp * cfg->parallel.pp);
    if (cfg->train.min_lr > cfg->train.lr)
        return mgt__fail(MGT_ERROR_CONFIG, "%s: [train] min_lr = %g is above lr = %g; the schedule decays from lr down to min_lr",
                         mgt__where(cfg, MGT__KEY(train, min_lr), w1, sizeof w1), cfg->train.min_lr, cfg->train.lr);
    if (cfg->data.tokenizer == MGT_TOKENIZER_HF && !cfg->data.tokenizer_json[0])
        return mgt__fail(MGT_ERROR_CONFIG, "%s: [data] tokenizer = hf needs [data] tokenizer_json, the path of a Hugging Face tokenizer.json",
                         mgt__where(cfg, MGT__KEY(data, tokenizer), w1, sizeof w1));
    /* hf's vocabulary is in its file, which mgt.h does not read: `mgt sample` compares the two */
    tok_vocab = cfg->data.tokenizer == MGT_TOKENIZER_GPT2 ? 50257 : cfg->data.tokenizer == MGT_TOKENIZER_HF ? 2 : 256;
    if (cfg->model.vocab_size < tok_vocab && cfg->line[MGT__KEY(model, vocab_size)] == MGT__FROM_INIT)
        return mgt__fail(MGT_ERROR_CONFIG, "[model] init %s has %d tokens, fewer than the %s tokenizer's %d; set [data] tokenizer to the tokenizer the "
                         "model was trained with", cfg->model.init, cfg->model.vocab_size, cfg->data.tokenizer == MGT_TOKENIZER_GPT2 ? "gpt2" : "byte", tok_vocab);
    if (cfg->model.vocab_size < tok_vocab)
        return mgt__fail(MGT_ERROR_CONFIG, "%s: [model] vocab_size = %d is smaller than the %s tokenizer's %d tokens; set vocab_size to at least %d",
                         mgt__where(cfg, MGT__KEY(model, vocab_size), w1, sizeof w1), cfg->model.vocab_size,
                         cfg->data.tokenizer == MGT_TOKENIZER_GPT2 ? "gpt2" : "byte", tok_vocab, tok_vocab);
    return MGT_OK;
}

MGTDEF int mgt_config_format(const mgt_config *cfg, char *buf, size_t cap) {
    size_t used = 0;
    int i;
    const char *section = "";
    char value[MGT_STR_MAX + 8];
    if (!cfg || !buf || cap == 0) return -1;
    buf[0] = 0;
    for (i = 0; i < MGT_CONFIG_NKEYS; i++) {
        const mgt_key_info *k = &mgt__keys[i].info;
        int n;
        mgt_config_value_string(cfg, i, value, sizeof value);
        if (strcmp(section, k->section)) {
            n = snprintf(buf + used, cap - used, "%s[%s]\n", used ? "\n" : "", k->section);
            if (n < 0 || (size_t)n >= cap - used) return -1;
            used += (size_t)n;
            section = k->section;
        }
        n = snprintf(buf + used, cap - used, "%-13s = %-28s ; %s\n", k->name, value, k->help);
        if (n < 0 || (size_t)n >= cap - used) return -1;
        used += (size_t)n;
    }
    return (int)used;
}

