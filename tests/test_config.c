/* Presets as input, and the preset a checkpoint keeps:
   - a preset or a token shard must be a regular file: a folder, /dev/null, a FIFO (never waited
     on) is refused saying what it is; a NUL byte in a preset is refused at its line;
   - lines longer than inih's buffer are read whole (a long comment stays a comment, a long value
     is the whole value, cut where inih cuts a short line's) and line numbers stay right;
   - a key set twice is refused naming both lines, an indented line (INI's continuation of a value)
     is refused, a repeated [section] is a warning naming both lines;
   - string values are kept as given (UTF-8, no control characters); mgt_config_validate refuses
     fields a program set out of range;
   - random valid configs stored (mgt__config_store) and restored come back exactly: every key's
     text and every field's bytes; and through real checkpoints (mgt_run_save, mgt_checkpoint_config). */
#define MGT_IMPLEMENTATION
#include "mgt.h"
#include "train_util.h"
#include <float.h>  /* defines: DBL_MIN, DBL_TRUE_MIN */
#include <signal.h> /* defines: signal, SIGALRM */

static char dir[256];
static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t next(void) { rng = mgt__mix64(rng + 0x9e3779b97f4a7c15ULL); return rng; }
static int below(int n) { return (int)(next() % (uint64_t)n); }

static void on_alarm(int sig) {
    static const char msg[] = "FAIL timed out: a call blocked (a FIFO opened without O_NONBLOCK?)\n";
    (void)sig;
    if (write(1, msg, sizeof msg - 1) < 0) _exit(1);
    _exit(1);
}

static char warning[1024];
static void logger(void *user, int level, const char *message) {
    (void)user;
    if (level == MGT_LOG_WARN) snprintf(warning, sizeof warning, "%s", message);
}

static void write_file(const char *path, const char *text, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(text, 1, n, f) != n || fclose(f)) { printf("FAIL cannot write %s\n", path); exit(1); }
}

/* loads text as a preset file; returns the result, the message in mgt_last_error() */
static mgt_result load_text(mgt_config *cfg, const char *name, const char *text) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    write_file(path, text, strlen(text));
    mgt_config_init(cfg);
    return mgt_config_load(cfg, path);
}
static int has(const char *needle) { return strstr(mgt_last_error(), needle) != NULL; }
/* a path key of a preset in dir: its value is relative to dir, so it reads dir/value */
static const char *rel(const char *path) {
    size_t n = strlen(dir);
    return !strncmp(path, dir, n) && path[n] == '/' ? path + n + 1 : "(not in the preset's folder)";
}
static const char *said(mgt_result r) { return r == MGT_OK ? "ok" : mgt_last_error(); }

static void test_files(void) {
    mgt_config cfg;
    char path[600], fifo[600];
    mgt_result r;
    static const char nul[] = "[model]\nn_layer = 2\n\0garbage\n";
    snprintf(path, sizeof path, "%s/folder.ini", dir);
    mkdir(path, 0700);
    mgt_config_init(&cfg);
    r = mgt_config_load(&cfg, path);
    check(r == MGT_ERROR_CONFIG && has("folder.ini") && has("a folder"), "a folder as preset is refused: %s", mgt_last_error());
    r = mgt_config_load(&cfg, "/dev/null");
    check(r == MGT_ERROR_CONFIG && has("/dev/null") && has("character device"), "/dev/null as preset is refused: %s", mgt_last_error());
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    if (mkfifo(fifo, 0600)) { printf("FAIL mkfifo %s\n", fifo); exit(1); }
    alarm(10);
    r = mgt_config_load(&cfg, fifo);
    check(r == MGT_ERROR_CONFIG && has("FIFO"), "a FIFO as preset is refused at once: %s", mgt_last_error());
    r = mgt_shard_check(fifo, 256, NULL);
    check(r == MGT_ERROR_DATA && has("FIFO") && has("token shard"), "a FIFO as token shard is refused at once: %s", mgt_last_error());
    alarm(0);
    r = mgt_shard_check(path, 256, NULL);
    check(r == MGT_ERROR_DATA && has("a folder"), "a folder as token shard is refused: %s", mgt_last_error());

    snprintf(path, sizeof path, "%s/nul.ini", dir);
    write_file(path, nul, sizeof nul - 1);
    r = mgt_config_load(&cfg, path);
    check(r == MGT_ERROR_CONFIG && has("nul.ini:3:") && has("NUL"), "a NUL byte is refused at its line: %s", mgt_last_error());
    snprintf(path, sizeof path, "%s/zeros.ini", dir);
    write_file(path, "\0\0\0\0\0\0\0\0", 8);
    r = mgt_config_load(&cfg, path);
    check(r == MGT_ERROR_CONFIG && has("zeros.ini:1:") && has("NUL"), "a file of zeros is not an empty preset: %s", mgt_last_error());
    r = load_text(&cfg, "empty.ini", "");
    check(r == MGT_OK && cfg.model.n_layer == 4, "an empty regular file is a preset of defaults");
}

static void test_long_lines(void) {
    mgt_config cfg;
    char text[4096], want[256];
    mgt_result r;
    int i;
    /* inih reads 199 characters of a line: the tail of this comment would be a live key */
    snprintf(text, sizeof text, "[model]\n; %0*d n_layer = 7\nn_head = 2\n", 196, 0);
    r = load_text(&cfg, "long_comment.ini", text);
    check(r == MGT_OK && cfg.model.n_layer == 4 && cfg.model.n_head == 2, "a long comment stays a comment (n_layer %d, n_head %d): %s",
          cfg.model.n_layer, cfg.model.n_head, said(r));
    memset(want, 'd', 230);
    want[230] = 0;
    snprintf(text, sizeof text, "[checkpoint]\ndir = %s   ; the folder\n[model]\nn_layer = 3\n", want);
    r = load_text(&cfg, "long_value.ini", text);
    check(r == MGT_OK && !strcmp(rel(cfg.checkpoint.dir), want) && cfg.model.n_layer == 3, "a value of 230 characters is read whole (%zu read)",
          strlen(rel(cfg.checkpoint.dir)));
    snprintf(text, sizeof text, "[checkpoint]\ndir = %s\n[model]\nn_layers = 3\n", want);
    r = load_text(&cfg, "long_lines.ini", text);
    check(r == MGT_ERROR_CONFIG && has("long_lines.ini:4:") && has("n_layers"), "after a long line, errors name the right line: %s", mgt_last_error());
    snprintf(text, sizeof text, "[model] ; %0*d\nn_layer = 3\n", 300, 0);
    r = load_text(&cfg, "long_header.ini", text);
    check(r == MGT_OK && cfg.model.n_layer == 3, "a long [section] line (a comment after it) is read: %s", said(r));
    snprintf(text, sizeof text, "[checkpoint]\ndir = %0*d\n", 300, 0);
    r = load_text(&cfg, "too_long.ini", text);
    check(r == MGT_ERROR_CONFIG && has("too_long.ini:2:") && has("longer than 255"), "a value of 300 characters is refused at its line: %s",
          mgt_last_error());
    {
        char *big = (char *)malloc(70000);
        memcpy(big, "[model]\n; ", 10);
        memset(big + 10, 'x', 69980);
        big[69990] = 0;
        r = load_text(&cfg, "huge.ini", big);
        free(big);
        check(r == MGT_ERROR_CONFIG && has("huge.ini:2:"), "a line of 70000 characters is refused: %s", mgt_last_error());
    }
    /* a long key = value line gives the value inih gives the same line when it is short: the value
       with a comment of 300 characters after it (long: read around inih) against the value alone */
    for (i = 0; i < 3000; i++) {
        static const char *parts[] = {" ", " ", ";", "#", "=", ":", "a", "b", "/", "\"", "\\", "\xc3\xa9", "'", "[", "]", " ;", "; ", "x;y"};
        char value[160] = "", line_short[400], line_long[800];
        mgt_config a, b;
        mgt_result ra, rb;
        int n = below(12), k;
        const char *sep = below(3) == 0 ? ":" : "=", *gap = below(3) == 0 ? "" : " ";
        for (k = 0; k < n; k++) strcat(value, parts[below((int)(sizeof parts / sizeof parts[0]))]);
        snprintf(line_short, sizeof line_short, "[checkpoint]\ndir%s%s%s%s\n", gap, sep, gap, value);
        snprintf(line_long, sizeof line_long, "[checkpoint]\ndir%s%s%s%s ; %0*d\n", gap, sep, gap, value, 300, 0);
        mgt_config_init(&a);
        mgt_config_init(&b);
        ra = mgt_config_load_string(&a, line_short, "short");
        rb = mgt_config_load_string(&b, line_long, "long");
        if (ra != rb || (ra == MGT_OK && strcmp(a.checkpoint.dir, b.checkpoint.dir))) {
            check(0, "value '%s': short line gives '%s' (%d), long line '%s' (%d)", value, a.checkpoint.dir, ra, b.checkpoint.dir, rb);
            break;
        }
    }
    check(i == 3000, "3000 random values: a long line's value is what inih makes of the short line");
}

static void test_duplicates(void) {
    mgt_config cfg;
    mgt_result r;
    r = load_text(&cfg, "dup.ini", "[model]\nn_layer = 2\nn_layer = 3\n");
    check(r == MGT_ERROR_CONFIG && has("dup.ini:3:") && has("dup.ini:2") && has("n_layer"), "a key set twice names both lines: %s", mgt_last_error());
    r = load_text(&cfg, "dup2.ini", "[model]\nn_layer = 2\n[train]\nsteps = 3\n[model]\nn_layer = 5\n");
    check(r == MGT_ERROR_CONFIG && has("dup2.ini:6:") && has("dup2.ini:2"), "a key set again under a repeated [section] names both lines: %s",
          mgt_last_error());
    warning[0] = 0;
    mgt_set_logger(logger, NULL);
    r = load_text(&cfg, "sections.ini", "[model]\nn_layer = 2\n[train]\nsteps = 3\n[model]\nn_head = 1\n");
    mgt_set_logger(NULL, NULL);
    check(r == MGT_OK && cfg.model.n_layer == 2 && cfg.model.n_head == 1 && strstr(warning, "sections.ini:5:") && strstr(warning, "sections.ini:1"),
          "a repeated [section] is read, with a warning naming both lines: %s", warning);
    r = load_text(&cfg, "indent.ini", "[data]\ntrain = a.bin\n  val = b.bin\n");
    check(r == MGT_ERROR_CONFIG && has("indent.ini:3:") && has("indent.ini:2") && has("train") && has("indent"),
          "an indented line (INI would append it to train's value) is refused: %s", mgt_last_error());
    r = load_text(&cfg, "indent_ok.ini", "[data]\n  train = a.bin\n");
    check(r == MGT_OK && !strcmp(rel(cfg.data.train), "a.bin"), "an indented first key of a section is a key: %s", said(r));
    r = load_text(&cfg, "one.ini", "[model]\nn_layer = 2\n");
    if (r == MGT_OK) r = mgt_config_load(&cfg, cfg.path); /* the same file over the same config: each load on its own */
    check(r == MGT_OK, "a second load over a config is not a duplicate: %s", said(r));
}

static void test_values(void) {
    mgt_config cfg;
    char set[400];
    mgt_result r;
    mgt_config_init(&cfg);
    check(mgt_config_set(&cfg, "checkpoint.dir=  a ; b # = \"q\" \\  ") == MGT_OK && !strcmp(cfg.checkpoint.dir, "  a ; b # = \"q\" \\  "),
          "--set keeps a string as given: '%s'", cfg.checkpoint.dir);
    check(mgt_config_set(&cfg, "checkpoint.dir=a\tb") == MGT_ERROR_CONFIG && has("control character"), "a tab in a value is refused: %s",
          mgt_last_error());
    check(mgt_config_set(&cfg, "checkpoint.dir=a\xff") == MGT_ERROR_CONFIG && has("UTF-8"), "a value that is not UTF-8 is refused: %s", mgt_last_error());
    check(mgt_config_set(&cfg, "checkpoint.dir=\xed\xa0\x80") == MGT_ERROR_CONFIG && has("UTF-8"), "a UTF-16 surrogate is refused: %s", mgt_last_error());
    snprintf(set, sizeof set, "checkpoint.dir=%0*d", 255, 0);
    check(mgt_config_set(&cfg, set) == MGT_OK && strlen(cfg.checkpoint.dir) == 255, "a value of 255 bytes is taken");
    snprintf(set, sizeof set, "checkpoint.dir=%0*d", 256, 0);
    check(mgt_config_set(&cfg, set) == MGT_ERROR_CONFIG && has("255"), "a value of 256 bytes is refused: %s", mgt_last_error());
    r = mgt_config_set(&cfg, "train.lr=4.9406564584124654e-324");
    check(r == MGT_OK && cfg.train.lr == DBL_TRUE_MIN, "a subnormal float is taken: %s", said(r));

    mgt_config_init(&cfg);
    cfg.train.lr = NAN;
    check(mgt_config_validate(&cfg) == MGT_ERROR_CONFIG && has("lr"), "validate: lr = NaN set in code: %s", mgt_last_error());
    mgt_config_init(&cfg);
    cfg.model.n_layer = 0;
    check(mgt_config_validate(&cfg) == MGT_ERROR_CONFIG && has("n_layer") && has("out of range"), "validate: n_layer = 0: %s", mgt_last_error());
    mgt_config_init(&cfg);
    cfg.train.schedule = -1;
    check(mgt_config_validate(&cfg) == MGT_ERROR_CONFIG && has("schedule"), "validate: schedule = -1: %s", mgt_last_error());
    mgt_config_init(&cfg);
    memset(cfg.data.val, 'v', MGT_STR_MAX);
    check(mgt_config_validate(&cfg) == MGT_ERROR_CONFIG && has("val") && has("NUL"), "validate: an unterminated string: %s", mgt_last_error());
    { /* tp against n_kv_head: it divides it (a split), or is a multiple (replicas), else refused naming both and the valid tp */
        static const char *tp[] = {"parallel.tp=2", "parallel.tp=4", "parallel.tp=12", "parallel.tp=6"};
        int i;
        for (i = 0; i < 4; i++) {
            mgt_config_init(&cfg);
            mgt_config_set(&cfg, "model.n_head=12");
            mgt_config_set(&cfg, "model.d_model=96");
            mgt_config_set(&cfg, "model.n_kv_head=4");
            mgt_config_set(&cfg, "model.d_ff=384");
            mgt_config_set(&cfg, "parallel.threads=12");
            mgt_config_set(&cfg, tp[i]);
            r = mgt_config_validate(&cfg);
            if (i < 3) check(r == MGT_OK, "validate: n_kv_head 4 with %s: %s", tp[i], said(r));
            else check(r == MGT_ERROR_CONFIG && has("[parallel] tp = 6 with n_kv_head = 4") && has("valid tp for n_head = 12: 1, 2, 4, 12"),
                       "validate: n_kv_head 4 with tp 6 is refused: %s", said(r));
        }
    }
    { /* sequence parallelism: tp > 1, and the micro-batch's rows split evenly over tp; else refused naming the key and the fix */
        mgt_config_init(&cfg);
        mgt_config_set(&cfg, "parallel.sp=1");
        r = mgt_config_validate(&cfg);
        check(r == MGT_ERROR_CONFIG && has("[parallel] sp = 1 with tp = 1") && has("set parallel.tp to 2 or more, or parallel.sp = 0"),
              "validate: sp 1 with tp 1 is refused: %s", said(r));
        mgt_config_set(&cfg, "parallel.tp=4");
        mgt_config_set(&cfg, "train.micro_batch=1");
        mgt_config_set(&cfg, "train.global_batch=1");
        mgt_config_set(&cfg, "model.seq_len=30");
        r = mgt_config_validate(&cfg);
        check(r == MGT_ERROR_CONFIG && has("[parallel] sp = 1 with tp = 4") && has("1 x 30 = 30 rows") && has("multiple of 4"),
              "validate: sp 1 with tp 4 on 30 rows is refused: %s", said(r));
        mgt_config_set(&cfg, "model.seq_len=32");
        r = mgt_config_validate(&cfg);
        check(r == MGT_OK, "validate: sp 1 with tp 4 on 32 rows: %s", said(r));
    }
    { /* zero-bubble (pp_schedule = zb): refused with interleaving, full recompute and ZeRO 2/3, naming the key and the fix */
        static const char *with[3] = {"parallel.pp_virtual=2", "train.recompute=full", "parallel.zero=2"};
        static const char *said_[3][2] = {{"pp_schedule = zb with pp_virtual = 2", "set pp_virtual = 1, or pp_schedule = 1f1b"},
                                          {"pp_schedule = zb with [train] recompute = full", "set recompute = selective or none, or pp_schedule = 1f1b"},
                                          {"pp_schedule = zb with zero = 2", "set zero = 0 or 1, or pp_schedule = 1f1b"}};
        int k;
        for (k = 0; k < 4; k++) {
            mgt_config_init(&cfg);
            mgt_config_set(&cfg, "model.n_layer=4");
            mgt_config_set(&cfg, "parallel.pp=2");
            mgt_config_set(&cfg, "parallel.dp=2");
            mgt_config_set(&cfg, "train.global_batch=8");
            mgt_config_set(&cfg, "train.micro_batch=1");
            mgt_config_set(&cfg, "parallel.pp_schedule=zb");
            if (k < 3) mgt_config_set(&cfg, with[k]);
            else mgt_config_set(&cfg, "train.recompute=selective"); /* and ZeRO 1 */
            if (k == 3) mgt_config_set(&cfg, "parallel.zero=1");
            r = mgt_config_validate(&cfg);
            if (k < 3) check(r == MGT_ERROR_CONFIG && has(said_[k][0]) && has(said_[k][1]), "validate: zb with %s is refused: %s", with[k], said(r));
            else check(r == MGT_OK, "validate: zb with selective recompute and ZeRO 1: %s", said(r));
        }
    }
    { /* context parallelism: seq_len in 2 cp chunks of equal size; the layout search does not choose it */
        mgt_config_init(&cfg);
        mgt_config_set(&cfg, "model.seq_len=96");
        mgt_config_set(&cfg, "parallel.cp=5");
        r = mgt_config_validate(&cfg);
        check(r == MGT_ERROR_CONFIG && has("[parallel] cp = 5 with seq_len = 96") && has("multiple of 10"), "validate: cp 5 on 96 tokens is refused: %s", said(r));
        mgt_config_set(&cfg, "parallel.cp=3");
        r = mgt_config_validate(&cfg);
        check(r == MGT_OK, "validate: cp 3 on 96 tokens (6 chunks of 16): %s", said(r));
        mgt_config_set(&cfg, "parallel.layout=auto");
        r = mgt_config_validate(&cfg);
        check(r == MGT_ERROR_CONFIG && has("cp = 3 with layout = auto") && has("set layout = manual"), "validate: cp 3 with layout auto is refused: %s", said(r));
    }
    mgt_config_init(&cfg);
    r = mgt_config_validate(&cfg);
    check(r == MGT_OK, "validate: the defaults: %s", said(r));
}

/* a random valid value of every key, each through mgt_config_set as --set would give it */
static void random_config(mgt_config *cfg) {
    static const char *pieces[] = {";", "#", "=", "\"", "\\", " ", "  ", "a", "Z", "0", "/", ".", "[x]", ":", "{", "}", "'", ",", "\xc3\xa9",
                                   "\xe6\x97\xa5", "\xf0\x9f\x98\x80", "\xc2\xa0", "\\u0041", "\\n", "nan", "1e-300"};
    int n, i, k;
    const mgt_key_info *keys = mgt_config_keys(&n);
    mgt_config_init(cfg);
    for (i = 0; i < n; i++) {
        const mgt_key_info *ki = &keys[i];
        char value[MGT_STR_MAX + 32] = "", set[MGT_STR_MAX + 96];
        if (!strcmp(ki->type, "INT")) {
            double lo = ki->min, hi = ki->max, c[5];
            c[0] = lo; c[1] = hi; c[2] = lo + 1 <= hi ? lo + 1 : lo; c[3] = hi - 1 >= lo ? hi - 1 : hi;
            c[4] = lo + floor((double)(next() >> 11) / 9007199254740992.0 * (hi - lo + 1));
            snprintf(value, sizeof value, "%.0f", c[below(5)]);
        } else if (!strcmp(ki->type, "FLOAT")) {
            double lo = ki->min, hi = ki->max, u = (double)(next() >> 11) / 9007199254740992.0, v, c[14];
            c[0] = lo; c[1] = hi; c[2] = 0.1; c[3] = 1e-300; c[4] = 1.0 / 3; c[5] = 2.0 / 3; c[6] = DBL_TRUE_MIN; c[7] = DBL_MIN;
            c[8] = nextafter(hi, lo); c[9] = nextafter(lo, hi); c[10] = 1e-8; c[11] = lo + u * (hi - lo); c[12] = pow(10, -300 * u); c[13] = 0.3;
            do v = c[below(14)]; while (v < lo || v > hi);
            snprintf(value, sizeof value, "%.17g", v);
        } else if (!strcmp(ki->type, "ENUM")) {
            char choices[128], *save = NULL, *tok;
            int count = 1, pick;
            const char *p;
            for (p = ki->choices; *p; p++) count += *p == '|';
            pick = below(count);
            snprintf(choices, sizeof choices, "%s", ki->choices);
            for (tok = strtok_r(choices, "|", &save); pick-- > 0; tok = strtok_r(NULL, "|", &save)) {}
            snprintf(value, sizeof value, "%s", tok);
        } else {
            int len = 0, shape = below(5);
            if (shape == 0) { len = 255; memset(value, "a;# =\"\\"[below(7)], 255); value[255] = 0; } /* the longest */
            else {
                for (k = below(40); k > 0; k--) {
                    const char *piece = pieces[below((int)(sizeof pieces / sizeof pieces[0]))];
                    if (len + (int)strlen(piece) > 255) break;
                    strcat(value, piece);
                    len += (int)strlen(piece);
                }
                if (shape == 1 && len < 250) { memmove(value + 2, value, (size_t)len + 1); value[0] = value[1] = ' '; strcat(value, "  "); }
            }
        }
        snprintf(set, sizeof set, "%s.%s=%s", ki->section, ki->name, value);
        if (mgt_config_set(cfg, set) != MGT_OK) { printf("FAIL random value %s: %s\n", set, mgt_last_error()); exit(1); }
    }
}

/* every key's text and every field's bytes */
static int same_config(const mgt_config *a, const mgt_config *b, char *why, size_t cap) {
    int i;
    for (i = 0; i < MGT_CONFIG_NKEYS; i++) {
        char ta[MGT_STR_MAX + 64], tb[MGT_STR_MAX + 64];
        const mgt__key *k = &mgt__keys[i];
        size_t size = k->type == MGT__T_STR ? MGT_STR_MAX : k->type == MGT__T_FLOAT ? sizeof(double) : sizeof(int);
        mgt_config_value_string(a, i, ta, sizeof ta);
        mgt_config_value_string(b, i, tb, sizeof tb);
        if (strcmp(ta, tb) || memcmp((const char *)a + k->offset, (const char *)b + k->offset, size)) {
            snprintf(why, cap, "%s.%s: '%s' came back as '%s'", k->info.section, k->info.name, ta, tb);
            return 0;
        }
    }
    return 1;
}

static void test_store_restore(void) {
    static char text[1 << 16];
    int i, good = 0, ascii_ok = 1;
    char why[1100] = "";
    for (i = 0; i < 2000; i++) {
        mgt_config a, b;
        int n;
        const unsigned char *p;
        random_config(&a);
        n = mgt__config_store(&a, text, sizeof text);
        for (p = (const unsigned char *)text; n > 0 && *p; p++) ascii_ok &= *p >= 0x20 && *p != 0x7f;
        mgt_config_init(&b);
        if (n < 0 || mgt__config_restore(&b, text, "stored") != MGT_OK) { snprintf(why, sizeof why, "%s", mgt_last_error()); break; }
        if (!same_config(&a, &b, why, sizeof why)) break;
        good++;
    }
    check(good == 2000, "2000 random valid configs stored and restored exactly%s%s", why[0] ? ": " : "", why);
    check(ascii_ok, "the stored preset has no control characters (JSON in the safetensors header)");
    {
        mgt_config b;
        mgt_config_init(&b);
        check(mgt__config_restore(&b, "{\"model.n_layer\":\"0\"}", "x") == MGT_ERROR_CHECKPOINT && has("n_layer") && has("out of range"),
              "a stored value out of range is refused: %s", mgt_last_error());
        check(mgt__config_restore(&b, "{\"model.n_layers\":\"2\"}", "x") == MGT_ERROR_CHECKPOINT && has("n_layers"), "an unknown stored key is refused: %s",
              mgt_last_error());
        check(mgt__config_restore(&b, "{\"model.n_layer\":\"2\",\"model.n_layer\":\"3\"}", "x") == MGT_ERROR_CHECKPOINT && has("twice"),
              "a stored key twice is refused: %s", mgt_last_error());
        check(mgt__config_restore(&b, "{\"model.n_layer\":\"2\"", "x") == MGT_ERROR_CHECKPOINT, "a cut stored preset is refused: %s", mgt_last_error());
    }
}

/* random configs of a one-step tiny model trained, saved and read back from the checkpoint */
static void test_checkpoints(void) {
    int round;
    for (round = 0; round < 4; round++) {
        mgt_config a, b;
        mgt_run *run;
        char set[800], path[1200], name[300] = "ck ", why[1100] = "";
        const char *pieces[] = {";", " ;", "#", "=", "\"", "\\", " ", "\xc3\xa9", "\xf0\x9f\x98\x80", "[", "x"};
        int k;
        mgt_result r;
        random_config(&a);
        while ((int)strlen(name) < (round == 0 ? 190 : 30)) strcat(name, pieces[below((int)(sizeof pieces / sizeof pieces[0]))]);
        strcat(name, round == 1 ? " " : "");
        snprintf(set, sizeof set, "checkpoint.dir=%s/%s", dir, name);
        mgt_config_set(&a, set);
        snprintf(set, sizeof set, "data.train=%s/corpus.bin", dir);
        mgt_config_set(&a, set);
        {
            static const char *fixed[] = {"model.n_layer=1", "model.n_head=1", "model.d_model=8", "model.seq_len=8", "model.vocab_size=256",
                                          "model.n_kv_head=0", "model.d_ff=0", "model.init=",
                                          "data.val=", "data.tokenizer=byte", "train.steps=1", "train.global_batch=1", "train.micro_batch=1",
                                          "train.eval_every=0", "parallel.device=cpu", "parallel.dp=1", "parallel.tp=1", "parallel.sp=0", "parallel.pp=1", "parallel.cp=1",
                                          "parallel.pp_virtual=1", "parallel.zero=0", "parallel.threads=1", "parallel.layout=manual", "precision.dtype=fp32",
                                          "precision.loss_scale=65536",
                                          "checkpoint.every=0", "log.metrics=none", "log.tensorboard="};
            for (k = 0; k < (int)(sizeof fixed / sizeof fixed[0]); k++) mgt_config_set(&a, fixed[k]);
            if (a.train.min_lr > a.train.lr) a.train.min_lr = a.train.lr;
            if (a.model.norm == MGT_NORM_LAYERNORM) a.model.norm_eps = 1e-5; /* LayerNorm's is fixed */
        }
        r = mgt_run_create(&run, &a);
        if (r == MGT_OK) {
            r = mgt_run_step(run);
            if (r == MGT_OK) r = mgt_run_save(run, path, sizeof path);
            mgt_run_destroy(run);
        }
        if (r == MGT_OK) r = mgt_checkpoint_config(path, &b);
        check(r == MGT_OK && same_config(&a, &b, why, sizeof why), "checkpoint round trip %d (dir of %zu bytes '%s'): %s", round + 1,
              strlen(a.checkpoint.dir), name, r ? mgt_last_error() : why[0] ? why : "every key exact");
    }
    { /* the preset must be the JSON object: INI text (mgt 0.1.0's, whose format-1 files are refused anyway) is not read */
        const char *meta[4] = {"format", MGT__CHECKPOINT_FORMAT, "preset", "[model]\nn_layer       = 3                            ; transformer blocks\n"};
        mgt_config b;
        char path[600];
        snprintf(path, sizeof path, "%s/old.safetensors", dir);
        mgt_result r = mgt__st_write(path, NULL, 0, meta, 2);
        if (r == MGT_OK) r = mgt_checkpoint_config(path, &b);
        check(r == MGT_ERROR_CHECKPOINT && strstr(mgt_last_error(), "has no preset (a JSON object)"), "a preset as INI text is refused: %s", said(r));
    }
}

/* a preset file's paths are relative to its folder (every STR key; data lists item by item; a
   leading ../ takes back a folder); --set and load_string values are the working directory's */
static void test_relative_paths(void) {
    mgt_config cfg;
    char path[700], want[700], sub[650];
    mgt_result r;
    snprintf(sub, sizeof sub, "%s/sub", dir);
    mkdir(sub, 0777);
    snprintf(path, sizeof path, "%s/p.ini", sub);
    {
        const char *text = "[data]\ntrain = a.bin, ../shards/b_*.bin\nval = /abs/v.bin\nbpe_dir = ../../gpt2\n[checkpoint]\ndir = ./runs/x\n"
                           "[log]\nmetrics = auto\ntensorboard = tb\n";
        write_file(path, text, strlen(text));
    }
    mgt_config_init(&cfg);
    r = mgt_config_load(&cfg, path);
    snprintf(want, sizeof want, "%s/sub/a.bin,%s/shards/b_*.bin", dir, dir);
    check(r == MGT_OK && !strcmp(cfg.data.train, want), "data.train relative to the preset's folder, item by item: '%s' (want '%s')", cfg.data.train, want);
    check(!strcmp(cfg.data.val, "/abs/v.bin"), "an absolute path stays: %s", cfg.data.val);
    snprintf(want, sizeof want, "%.*s/gpt2", (int)(strrchr(dir, '/') - dir), dir); /* ../../ from dir/sub/: dir's own folder */
    check(!strcmp(cfg.data.bpe_dir, want), "bpe_dir: '%s' (want '%s')", cfg.data.bpe_dir, want);
    snprintf(want, sizeof want, "%s/sub/runs/x", dir);
    check(!strcmp(cfg.checkpoint.dir, want), "./ is the preset's folder: %s", cfg.checkpoint.dir);
    check(!strcmp(cfg.log.metrics, "auto"), "metrics = auto stays a word: %s", cfg.log.metrics);
    snprintf(want, sizeof want, "%s/sub/tb", dir);
    check(!strcmp(cfg.log.tensorboard, want), "tensorboard: %s", cfg.log.tensorboard);
    check(mgt_config_set(&cfg, "data.train=c.bin") == MGT_OK && !strcmp(cfg.data.train, "c.bin"), "--set is the working directory's: %s", cfg.data.train);
    check(mgt_config_load_string(&cfg, "[data]\nval = d.bin\n", "text") == MGT_OK && !strcmp(cfg.data.val, "d.bin"), "a preset from a string: %s", cfg.data.val);
    {
        char out[64];
        check(mgt__join_path("presets/", "../data/x.bin", out, sizeof out) && !strcmp(out, "data/x.bin"), "presets/ + ../data/x.bin: %s", out);
        check(mgt__join_path("a/b/", "../../../x", out, sizeof out) && !strcmp(out, "../x"), "a/b/ + ../../../x: %s", out);
        check(mgt__join_path("../p/", "../../x", out, sizeof out) && !strcmp(out, "../../x"), "../p/ + ../../x: %s", out);
        check(mgt__join_path("", "x", out, sizeof out) && !strcmp(out, "x"), "no folder: %s", out);
        check(!mgt__join_path("a/", "0123456789012345678901234567890123456789012345678901234567890123", out, sizeof out), "too long is refused");
    }
    unlink(path);
    rmdir(sub);
}

int main(void) {
    signal(SIGALRM, on_alarm);
    alarm(300);
    make_workdir(dir, sizeof dir, "config", 20000, 1);
    test_files();
    test_relative_paths();
    test_long_lines();
    test_duplicates();
    test_values();
    test_store_restore();
    test_checkpoints();
    return finish(dir, "test_config");
}
