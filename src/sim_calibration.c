/* src/sim_calibration.c - the step simulator: calibration from per-family times measured on a GPU */
/* ---- calibration: per-family times measured on a GPU, in an INI file (mgt.h section 3d's
   declarations; docs/simulator.md, "Calibration"). The [calibration] section is read here, line by
   line; the shape's sections go to the preset reader with the calibration's lines blanked, so its
   errors name the file's own lines. */
static const char *const mgt__sim_cal_sections[] = {"model", "precision"};

MGTDEF mgt_result mgt_sim_calibration_write(const char *path, const char *gpu_name, const mgt_config *cfg, const double *family_seconds) {
    const mgt_key_info *keys;
    char value[MGT_STR_MAX + 64];
    FILE *f;
    int n, i, s, c, err;
    if (!path || !gpu_name || !cfg || !family_seconds) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_sim_calibration_write: path, gpu_name, cfg and family_seconds are required");
    if (strpbrk(gpu_name, ";#\n\r[]")) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_sim_calibration_write: the GPU's name '%s' has a character INI cannot hold (; # [ ] or a line break)", gpu_name);
    for (c = 0; c < MGT_SIM_FAMILIES; c++)
        if (family_seconds[c] >= 0 && !isfinite(family_seconds[c]))
            return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_sim_calibration_write: %s's time is not finite", mgt_sim_family_name(c));
    if (!(f = fopen(path, "w"))) return mgt__fail(MGT_ERROR_IO, "cannot write the calibration %s: %s", path, strerror(errno));
    keys = mgt_config_keys(&n);
    fprintf(f, "; mgt step simulator calibration (docs/simulator.md, \"Calibration\"): `mgt plan PRESET --gpu NAME --calibrate %s`\n", path);
    fprintf(f, "[calibration]\ngpu = %s\n", gpu_name);
    fprintf(f, "; milliseconds of one micro-batch's forward, backward and optimizer step on one GPU, by op family\n");
    for (c = 0; c < MGT_SIM_FAMILIES; c++)
        if (family_seconds[c] >= 0) fprintf(f, "%s = %.9g\n", mgt_sim_family_name(c), family_seconds[c] * 1e3);
    fprintf(f, "; the shape measured\n");
    for (s = 0; s < 2; s++) {
        fprintf(f, "[%s]\n", mgt__sim_cal_sections[s]);
        for (i = 0; i < n; i++)
            if (!strcmp(keys[i].section, mgt__sim_cal_sections[s])) {
                mgt_config_value_string(cfg, i, value, sizeof value);
                fprintf(f, "%s = %s\n", keys[i].name, value);
            }
    }
    fprintf(f, "[train]\nmicro_batch = %d\nrecompute = %s\n", cfg->train.micro_batch, mgt_recompute_name(cfg->train.recompute));
    err = ferror(f);
    if (fclose(f) != 0 || err) return mgt__fail(MGT_ERROR_IO, "cannot write the calibration %s", path);
    return MGT_OK;
}

/* one line of [calibration]: "key = value ; comment", trimmed in place; 0 when it has no '=' */
static int mgt__sim_cal_split(char *line, char **key, char **value) {
    char *eq = strchr(line, '='), *end;
    size_t i;
    if (!eq) return 0;
    *eq = 0;
    *key = line;
    *value = eq + 1;
    for (i = 0; (*value)[i]; i++) /* an inline comment, after a space (inih's rule) */
        if (((*value)[i] == ';' || (*value)[i] == '#') && i > 0 && ((*value)[i - 1] == ' ' || (*value)[i - 1] == '\t')) { (*value)[i] = 0; break; }
    while (**key == ' ' || **key == '\t') (*key)++;
    while (**value == ' ' || **value == '\t') (*value)++;
    for (end = *key + strlen(*key); end > *key && (end[-1] == ' ' || end[-1] == '\t'); end--) end[-1] = 0;
    for (end = *value + strlen(*value); end > *value && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'); end--) end[-1] = 0;
    return 1;
}

MGTDEF mgt_result mgt_sim_calibration_read(const char *path, mgt_sim_calibration *out) {
    FILE *f;
    char *text = NULL, *line, *next;
    size_t len = 0, cap = 0;
    int lineno = 0, in_cal = 0, seen_cal = 0, c, families = 0;
    mgt_result r = MGT_OK;
    if (!path || !out) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_sim_calibration_read: path and out are required");
    memset(out, 0, sizeof *out);
    for (c = 0; c < MGT_SIM_FAMILIES; c++) out->measured_s[c] = -1;
    mgt__strlcpy(out->path, path, sizeof out->path);
    if (!(f = fopen(path, "r")))
        return mgt__fail(MGT_ERROR_CONFIG, "%s: cannot read the calibration: %s (write one with mgt_sim_calibration_write; format in docs/simulator.md)", path,
                         strerror(errno));
    for (;;) { /* the whole file, as text */
        size_t got;
        if (len + 4096 + 1 > cap) {
            char *p = (char *)MGT_REALLOC(text, cap = 2 * cap + 4096 + 1);
            if (!p) { MGT_FREE(text); fclose(f); return mgt__fail(MGT_ERROR_MEMORY, "out of memory"); }
            text = p;
        }
        got = fread(text + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0) break;
    }
    fclose(f);
    text[len] = 0;
    if (strlen(text) != len) { MGT_FREE(text); return mgt__fail(MGT_ERROR_CONFIG, "%s: a NUL byte: not a text file (a calibration is INI text)", path); }
    for (line = text; line && r == MGT_OK; line = next) { /* [calibration] read and blanked; the rest left for the preset reader */
        char *p = line, *key, *value, *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) : strlen(line);
        next = nl ? nl + 1 : NULL;
        if (nl) *nl = 0;
        lineno++;
        while (*p == ' ' || *p == '\t') p++;
        if (*p == '[') {
            in_cal = !strncmp(p, "[calibration]", 13);
            seen_cal |= in_cal;
        }
        if (in_cal && *p && *p != ';' && *p != '#' && *p != '[') {
            if (!mgt__sim_cal_split(p, &key, &value))
                r = mgt__fail(MGT_ERROR_CONFIG, "%s:%d: not an INI line (expected key = value or a ; comment)", path, lineno);
            else if (!strcmp(key, "gpu")) {
                if (!value[0] || strlen(value) >= sizeof out->gpu) r = mgt__fail(MGT_ERROR_CONFIG, "%s:%d: gpu: the GPU's name, 1 to %d characters", path, lineno, (int)sizeof out->gpu - 1);
                else mgt__strlcpy(out->gpu, value, sizeof out->gpu);
            } else {
                char *end;
                double ms;
                for (c = 0; c < MGT_SIM_FAMILIES && strcmp(key, mgt_sim_family_name(c)); c++) {}
                if (c == MGT_SIM_FAMILIES) {
                    char valid[160] = "gpu";
                    int k;
                    for (k = 0; k < MGT_SIM_FAMILIES; k++) { strcat(valid, ", "); strcat(valid, mgt_sim_family_name(k)); }
                    r = mgt__fail(MGT_ERROR_CONFIG, "%s:%d: [calibration] has no key '%s' (valid: %s)", path, lineno, key, valid);
                } else if (out->measured_s[c] >= 0)
                    r = mgt__fail(MGT_ERROR_CONFIG, "%s:%d: %s is set again: a family's time is given once", path, lineno, key);
                else {
                    errno = 0;
                    ms = strtod(value, &end);
                    if (end == value || *end || errno || !isfinite(ms) || ms <= 0 || ms > 1e9)
                        r = mgt__fail(MGT_ERROR_CONFIG, "%s:%d: %s = '%s': milliseconds, a number above 0 (the family's measured time)", path, lineno, key, value);
                    else {
                        out->measured_s[c] = ms * 1e-3;
                        families++;
                    }
                }
            }
        }
        if (in_cal) memset(line, ' ', n); /* the preset reader sees a blank line (the split left NULs in it) */
        if (nl) *nl = '\n';
    }
    if (r == MGT_OK && !seen_cal) r = mgt__fail(MGT_ERROR_CONFIG, "%s: no [calibration] section (format in docs/simulator.md, \"Calibration\")", path);
    if (r == MGT_OK && !out->gpu[0]) r = mgt__fail(MGT_ERROR_CONFIG, "%s: [calibration] names no gpu (add gpu = the GPU's name)", path);
    if (r == MGT_OK && !families) r = mgt__fail(MGT_ERROR_CONFIG, "%s: [calibration] has no measured family (add e.g. gemm = 19.1, in milliseconds)", path);
    if (r == MGT_OK) {
        mgt_config_init(&out->shape);
        r = mgt_config_load_string(&out->shape, text, path);
    }
    MGT_FREE(text);
    if (r == MGT_OK) { /* one GPU, one micro-batch a step, nothing read */
        mgt_config *k = &out->shape;
        char kv[64];
        snprintf(kv, sizeof kv, "train.global_batch=%d", k->train.micro_batch);
        if ((r = mgt_config_set(k, kv)) == MGT_OK && (r = mgt_config_set(k, "parallel.dp=1")) == MGT_OK && (r = mgt_config_set(k, "parallel.tp=1")) == MGT_OK &&
            (r = mgt_config_set(k, "parallel.sp=0")) == MGT_OK && (r = mgt_config_set(k, "parallel.pp_virtual=1")) == MGT_OK &&
            (r = mgt_config_set(k, "parallel.pp=1")) == MGT_OK && (r = mgt_config_set(k, "data.train=")) == MGT_OK && (r = mgt_config_set(k, "data.val=")) == MGT_OK)
            r = mgt_config_validate(k);
        if (r != MGT_OK) r = mgt__fail(MGT_ERROR_CONFIG, "%s: the shape measured is not a valid preset: %s", path, mgt_last_error());
    }
    return r;
}

MGTDEF mgt_result mgt_sim_calibrate(mgt_sim_calibration *cal, mgt_sim_options *opt) {
    mgt_sim_options o;
    mgt_sim_result res;
    int c;
    if (!cal || !opt) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_sim_calibrate: cal and opt are required");
    if (opt->device.host_sync) return mgt__fail(MGT_ERROR_ARGUMENT, "a calibration rescales a GPU's model; the cpu device measures its ops itself");
    o = *opt;
    memset(o.family_scale, 0, sizeof o.family_scale);
    o.trace = NULL;
    o.cost = NULL;
    MGT__TRY(mgt_sim_run(&cal->shape, &o, &res));
    for (c = 0; c < MGT_SIM_FAMILIES; c++) {
        double predicted = res.ranks[0].busy_s[c];
        cal->scale[c] = 0;
        if (cal->measured_s[c] < 0) continue;
        if (predicted <= 0) {
            mgt_sim_result_free(&res);
            return mgt__fail(MGT_ERROR_CONFIG, "%s: %s is measured but no op of the family runs in the shape measured (remove the line)", cal->path,
                             mgt_sim_family_name(c));
        }
        cal->scale[c] = cal->measured_s[c] / predicted;
    }
    mgt_sim_result_free(&res);
    memcpy(opt->family_scale, cal->scale, sizeof opt->family_scale);
    return MGT_OK;
}
