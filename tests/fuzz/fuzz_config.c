/* libFuzzer target: the preset reader and `--set`.
   Input: INI text, then up to four `section.key=value` assignments, the parts separated by NUL bytes
   ("[model]\nn_layer = 2\n\0train.steps=5\0data.val="). It runs what `mgt train PRESET --set ...`
   runs: mgt_config_load_string, mgt_config_set for each assignment, mgt_config_validate, and on a
   valid preset mgt_config_format, mgt_config_value_string, mgt_plan_make and mgt_plan_rank for the first and the
   last rank. Sanitizers catch memory errors and undefined behaviour; the target checks:
   - an error leaves a message in mgt_last_error();
   - the stored-preset round trip: a preset that loaded and validated, stored the way a checkpoint
     stores it (store_preset below) and read back (restore_preset), equals the original key by
     key and still validates. A checkpoint stores the preset as a JSON object of "section.key":
     "value" strings (mgt__config_store) and mgt_checkpoint_config reads it back
     (mgt__config_restore).
   A round-trip difference aborts with both values and the stored line; with MGT_FUZZ_ROUNDTRIP=report
   it is printed (once per key) and the run goes on.
   Build: `ninja build/fuzz/config`; run: see README (Tests, fuzzing). */
#define MGT_IMPLEMENTATION
#include "mgt.h"
#include "tests/fuzz/fuzz_util.h"

static int report_only; /* MGT_FUZZ_ROUNDTRIP=report: print round-trip differences, do not abort */

/* ---- the checkpoint's preset, stored and restored: the two functions to switch ------------------ */

/* the preset as the checkpoint's metadata holds it: mgt__config_store's JSON object, as mgt_run_save
   writes it; returns 0, or -1 when it does not fit (a run's save would fail the same way) */
static int store_preset(const mgt_config *cfg, mgt__buf *stored) {
    static char text[1 << 16]; /* mgt_run_save's buffer */
    memset(stored, 0, sizeof *stored);
    if (mgt__config_store(cfg, text, sizeof text) < 0) return -1;
    mgt__buf_str(stored, text);
    return stored->oom ? -1 : 0;
}

/* the preset read back from the metadata as mgt_checkpoint_config reads it (mgt__config_restore
   over the defaults); the text read is left in *text */
static mgt_result restore_preset(const mgt__buf *stored, mgt_config *cfg, mgt__buf *text) {
    memset(text, 0, sizeof *text);
    mgt__buf_str(text, stored->p);
    mgt_config_init(cfg);
    return mgt__config_restore(cfg, stored->p, "checkpoint");
}

/* ----------------------------------------------------------------------------------------------- */

static void roundtrip_fail(int key, const char *what, const mgt_config *a, const mgt_config *b, const char *text) {
    static char reported[MGT_CONFIG_NKEYS + 1];
    char va[MGT_STR_MAX + 8] = "", vb[MGT_STR_MAX + 8] = "";
    int slot = key < 0 ? MGT_CONFIG_NKEYS : key;
    if (report_only && reported[slot]) return;
    reported[slot] = 1;
    if (key >= 0) {
        mgt_config_value_string(a, key, va, sizeof va);
        mgt_config_value_string(b, key, vb, sizeof vb);
        fprintf(stderr, "round trip: [%s] %s: %s: stored '%s', restored '%s'\n", mgt__keys[key].info.section, mgt__keys[key].info.name, what, va,
                vb);
    } else {
        fprintf(stderr, "round trip: %s: %s\n", what, mgt_last_error());
    }
    if (text) fprintf(stderr, "--- stored text ---\n%s--- end ---\n", text);
    if (!report_only) abort();
}

/* the property: store, restore, compare every key */
static void check_roundtrip(const mgt_config *cfg) {
    mgt_config back;
    mgt__buf stored, text;
    mgt_result r;
    int i;
    if (store_preset(cfg, &stored) < 0) { free(stored.p); return; }
    r = restore_preset(&stored, &back, &text);
    if (r != MGT_OK) roundtrip_fail(-1, "the stored preset does not load", cfg, &back, text.p);
    else {
        for (i = 0; i < MGT_CONFIG_NKEYS; i++) {
            const mgt__key *k = &mgt__keys[i];
            const char *x = (const char *)cfg + k->offset, *y = (const char *)&back + k->offset;
            int same = k->type == MGT__T_STR ? !strcmp(x, y) : k->type == MGT__T_FLOAT ? !memcmp(x, y, sizeof(double)) : !memcmp(x, y, sizeof(int));
            if (!same) roundtrip_fail(i, "differs", cfg, &back, text.p);
        }
        if (mgt_config_validate(&back) != MGT_OK) roundtrip_fail(-1, "the restored preset does not validate", cfg, &back, text.p);
    }
    free(stored.p);
    free(text.p);
}

static void check_error(mgt_result r) {
    const char *e = mgt_last_error();
    if (r != MGT_OK && (!e[0] || strlen(e) >= 1024)) { fprintf(stderr, "error %d without a message\n", (int)r); abort(); }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    const char *mode = getenv("MGT_FUZZ_ROUNDTRIP");
    (void)argc; (void)argv;
    report_only = mode && !strcmp(mode, "report");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char store[(1 << 16) + 8];
    static char out[1 << 16];
    char *parts[5];
    int n, i;
    mgt_config cfg;
    mgt_rank_plan plan;
    mgt_plan whole;
    mgt_result r;
    if (size > 1 << 16) return -1;
    n = fuzz_split(data, size, store, parts, 5, NULL);
    mgt_config_init(&cfg);
    mgt__error_text[0] = 0;
    r = mgt_config_load_string(&cfg, parts[0], "fuzz.ini");
    check_error(r);
    for (i = 1; i < n; i++) {
        mgt__error_text[0] = 0;
        check_error(mgt_config_set(&cfg, parts[i]));
    }
    if (r != MGT_OK) return 0; /* mgt train stops at a preset error */
    mgt__error_text[0] = 0;
    r = mgt_config_validate(&cfg);
    check_error(r);
    /* formatting into a buffer that is too small fails cleanly, whatever the values */
    (void)mgt_config_format(&cfg, out, 1 + size % 512);
    for (i = 0; i < MGT_CONFIG_NKEYS; i++) (void)mgt_config_value_string(&cfg, i, out, 1 + (size + (size_t)i) % 16);
    if (r != MGT_OK) return 0;
    if (mgt_config_format(&cfg, out, sizeof out) < 0) { fprintf(stderr, "a valid preset does not format into 64 KiB\n"); abort(); }
    for (i = 0; i < MGT_CONFIG_NKEYS; i++) (void)mgt_config_value_string(&cfg, i, out, sizeof out);
    r = mgt_plan_make(&cfg, &whole);
    check_error(r);
    if (r == MGT_OK) {
        check_error(mgt_plan_rank(&whole, 0, &plan));
        check_error(mgt_plan_rank(&whole, whole.world - 1, &plan));
    }
    check_roundtrip(&cfg);
    return 0;
}
