/* Presets as input:
   - a preset or a token shard must be a regular file: a folder, /dev/null, a FIFO (never waited
     on) is refused saying what it is; a NUL byte in a preset is refused at its line;
   - lines longer than inih's buffer are read whole (a long comment stays a comment, a long value
     is the whole value, cut where inih cuts a short line's) and line numbers stay right;
   - a key set twice is refused naming both lines, an indented line (INI's continuation of a value)
     is refused, a repeated [section] is a warning naming both lines. */
#define MGT_IMPLEMENTATION
#include "mgt.h"
#include "train_util.h"
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
    check(r == MGT_OK && !strcmp(cfg.checkpoint.dir, want) && cfg.model.n_layer == 3, "a value of 230 characters is read whole (%zu read)",
          strlen(cfg.checkpoint.dir));
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
    check(r == MGT_OK && !strcmp(cfg.data.train, "a.bin"), "an indented first key of a section is a key: %s", said(r));
    r = load_text(&cfg, "one.ini", "[model]\nn_layer = 2\n");
    if (r == MGT_OK) r = mgt_config_load(&cfg, cfg.path); /* the same file over the same config: each load on its own */
    check(r == MGT_OK, "a second load over a config is not a duplicate: %s", said(r));
}

int main(void) {
    signal(SIGALRM, on_alarm);
    alarm(300);
    make_workdir(dir, sizeof dir, "config", 20000, 1);
    test_files();
    test_long_lines();
    test_duplicates();
    return finish(dir, "test_config");
}
