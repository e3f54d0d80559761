/* Presets as input:
   - a preset or a token shard must be a regular file: a folder, /dev/null, a FIFO (never waited
     on) is refused saying what it is. */
#define MGT_IMPLEMENTATION
#include "mgt.h"
#include "train_util.h"
#include <signal.h> /* defines: signal, SIGALRM */

static char dir[256];

static void on_alarm(int sig) {
    static const char msg[] = "FAIL timed out: a call blocked (a FIFO opened without O_NONBLOCK?)\n";
    (void)sig;
    if (write(1, msg, sizeof msg - 1) < 0) _exit(1);
    _exit(1);
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

static void test_files(void) {
    mgt_config cfg;
    char path[600], fifo[600];
    mgt_result r;
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
    r = load_text(&cfg, "empty.ini", "");
    check(r == MGT_OK && cfg.model.n_layer == 4, "an empty regular file is a preset of defaults");
}

int main(void) {
    signal(SIGALRM, on_alarm);
    alarm(300);
    make_workdir(dir, sizeof dir, "config", 20000, 1);
    test_files();
    return finish(dir, "test_config");
}
