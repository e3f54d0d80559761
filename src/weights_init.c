/* src/weights_init.c - [model] init: what it names opened, the preset's model resolved from it, a
   fresh run's weights; under MGT_NO_HF, a Hugging Face folder and mgt_export refused */
/* ---- [model] init -------------------------------------------------------------------------------
   A folder with config.json is Hugging Face's (src/weights_hf.c), a folder of checkpoints a run's
   (its newest), a file llm.c's .bin by its magic number or else an mgt checkpoint (src/weights.c). */

#ifdef MGT_NO_HF /* src/weights_hf.c is left out: what needs Hugging Face's files is refused, naming the switch */
static mgt_result mgt__hf_open(mgt__src *s, int weights) {
    (void)weights;
    return mgt__fail(MGT_ERROR_CONFIG, "%s: a Hugging Face folder (it has config.json), but this program was built with MGT_NO_HF (no Hugging Face "
                     "weights formats): init from an mgt checkpoint or run folder or llm.c's .bin, or build without the switch", s->path);
}
MGTDEF mgt_result mgt_export(const char *checkpoint, const char *dir, char *note, size_t cap) {
    (void)dir, (void)note, (void)cap;
    return mgt__fail(MGT_ERROR_UNSUPPORTED, "mgt_export of %s: this program was built with MGT_NO_HF (no Hugging Face weights formats), and export "
                     "writes Hugging Face's; build without the switch", checkpoint ? checkpoint : "(null)");
}
#endif /* MGT_NO_HF */

/* opens what [model] init names: its model, and with `weights` its tensors too (MGT__SRC_INDEX:
   a Hugging Face folder's tensor index alone, nothing more of the other kinds) */
static mgt_result mgt__src_open(mgt__src **out, const char *init, int weights) {
    mgt__src *s = (mgt__src *)mgt__calloc(1, sizeof *s);
    struct stat st;
    mgt_result res = MGT_OK;
    int hf = 0;
    *out = NULL;
    if (!s) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    mgt_config_init(&s->model);
    mgt__strlcpy(s->path, init, sizeof s->path);
    if (stat(init, &st))
        res = mgt__fail(MGT_ERROR_CONFIG, "%s: no such file or folder (from [model] init); [model] init takes " MGT__INIT_TAKES, init);
    else if (S_ISDIR(st.st_mode)) {
        char cj[1400];
        snprintf(cj, sizeof cj, "%s/config.json", init);
        if (!access(cj, F_OK)) hf = 1;
        else if (mgt_checkpoint_latest(init, s->path, sizeof s->path) != MGT_OK)
            res = mgt__fail(MGT_ERROR_CONFIG, "%s: neither a Hugging Face folder (no config.json) nor a run folder (no step_*.safetensors); [model] init "
                            "takes either, an mgt checkpoint file or llm.c's .bin", init);
    }
    if (res == MGT_OK && hf) res = mgt__hf_open(s, weights);
    else if (res == MGT_OK) { /* a file: llm.c's magic number, else an mgt checkpoint */
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

/* a fresh run's weights from [model] init (its step, moments and data position stay as created) */
static mgt_result mgt__init_weights(mgt_run *r) {
    mgt__src *s;
    mgt__layout g;
    float **tensors;
    mgt_result res = mgt__src_open(&s, r->plan.cfg.model.init, 1);
    if (res == MGT_OK) {
        res = mgt__src_global(s, &r->plan.cfg, "", &g, &tensors);
        if (res == MGT_OK && (res = mgt__mirror_all(r)) == MGT_OK) {
            mgt__exchange(r, MGT__BUF_PARAMS, &g, tensors, 0, NULL);
            mgt__unmirror_all(r, 1);
        }
        if (tensors) { mgt__free_global(&g, tensors); mgt__layout_free(&g); }
        mgt__src_free(s);
    }
    res = mgt__mpi_agree(r->procs, res, "reading [model] init");
    if (res == MGT_OK) mgt__log(MGT_LOG_INFO, "weights from %s (step 0, fresh optimizer)", r->plan.cfg.model.init);
    return res;
}

