/* mgt.c - the driver: mgt train | sample | check | keys | prepare | bench | plan | export | doctor

   Exit codes: 0 success, 1 failure at run time, 2 bad input (nothing was run), 130 interrupted
   (a checkpoint was written). Only this file turns library errors into exit codes. */
#define _GNU_SOURCE /* dladdr (mgt doctor: where a library opened at run time came from) */
#define MGT_IMPLEMENTATION
#include "mgt.h"
#define MGT_TOKENIZER_IMPLEMENTATION
#define MGT_TOK_HF /* data.tokenizer = hf: Hugging Face tokenizer.json (links libpcre2-8 and jansson) */
#include "data/tokenizer.h" /* defines: mgt_tok_open, mgt_tok_encode, mgt_tok_decode */
#define MGT_PREPARE_IMPLEMENTATION
#include "data/prepare.h"   /* defines: mgt_prepare, mgt_prepare_options */

#include <ctype.h>  /* defines: toupper, isspace */
#include <dlfcn.h>  /* defines: dladdr (where a library opened at run time came from) */
#include <signal.h> /* defines: sigaction, SIGINT, SIGTERM */
#include <fcntl.h>  /* defines: fcntl, O_NONBLOCK (a check's output, read within its time limit) */
#include <math.h>   /* defines: fabs, fmax, INFINITY */
#include <stdarg.h> /* defines: va_list */
#include <sys/wait.h> /* defines: waitpid (mgt doctor --gpu runs each check in a child) */
#include <pthread.h> /* defines: pthread_create, pthread_join (the training thread under the dashboard) */
#define MGT_TUI_IMPLEMENTATION
#include "tui/tui.h" /* defines: mgt_tui_open, mgt_tui_frame, mgt_tui_close, mgt_tui_summary */

#ifndef MGT_NO_MAIN

#ifndef MGT_BUILD_FLAGS /* build.ninja passes the flags mgt was compiled with, for mgt doctor */
#define MGT_BUILD_FLAGS "not recorded (built without build.ninja)"
#endif

static volatile sig_atomic_t mgt_stop_requested;
static void on_signal(int sig) { (void)sig; mgt_stop_requested = 1; }

static int exit_code(mgt_result r) {
    switch (r) {
    case MGT_OK: return 0;
    case MGT_ERROR_ARGUMENT: case MGT_ERROR_CONFIG: case MGT_ERROR_UNSUPPORTED: case MGT_ERROR_DATA: case MGT_ERROR_CHECKPOINT: return 2;
    default: return 1;
    }
}

static int fail(mgt_result r) {
    fprintf(stderr, "mgt: %s\n", mgt_last_error());
    return exit_code(r);
}

/* The headless log. While a step runs, its information lines (a validation, a checkpoint) wait
   in held_lines, so they follow that step's own line; warnings go to stderr at once. */
static char held_lines[4096];
static int holding;
static void print_log(void *user, int level, const char *message) {
    static int quiet = -1; /* under a launcher the processes but the first stay quiet, so that the job says each
                              warning and notice once (errors are not logged: each process says its own) */
    (void)user;
    if (quiet < 0) quiet = mgt_mpi_launcher_rank() > 0;
    if (quiet) return;
    if (level == MGT_LOG_WARN) fprintf(stderr, "mgt: warning: %s\n", message);
    else if (holding && strlen(held_lines) + strlen(message) + 4 < sizeof held_lines)
        snprintf(held_lines + strlen(held_lines), sizeof held_lines - strlen(held_lines), "  %s\n", message);
    else printf("  %s\n", message);
    fflush(stdout);
}
static void print_held(void) {
    fputs(held_lines, stdout);
    held_lines[0] = 0;
    fflush(stdout);
}

static void format_hms(double seconds, char *out, size_t cap) {
    int s = seconds > 0 && seconds < 3.6e8 ? (int)(seconds + 0.5) : 0; /* under 100000 hours */
    snprintf(out, cap, "%d:%02d:%02d", s / 3600 % 100000, s / 60 % 60, s % 60);
}

/* every command: its usage line, what it does, and its options (`mgt CMD --help`) */
static const struct command_help {
    const char *name, *usage, *text;
} commands[] = {
    {"train", "mgt train PRESET [--set section.key=value]... [--auto-layout] [--resume DIR|FILE|latest] [--overwrite] [--no-tui] [--tui-frames N]",
     "Trains the model of PRESET, under the dashboard in a terminal, else printing a line every log.every steps.\n"
     "  --set section.key=value   override a preset key (repeatable; `mgt keys` lists them)\n"
     "  --auto-layout             parallel.layout = auto: train with the fastest layout (dp, tp, pp, zero, pp_schedule,\n"
     "                            micro_batch, recompute) that fits this machine's GPUs, or its cores, as PREDICTED by the\n"
     "                            step simulator in seconds; the preset's layout keys give way, those given by --set are kept;\n"
     "                            prints the choice, its predicted step, the runner-up and the search's time\n"
     "  --resume DIR|FILE|latest  continue from a checkpoint (latest: the newest in checkpoint.dir)\n"
     "  --overwrite               delete the checkpoints another run left in checkpoint.dir and start afresh\n"
     "  --no-tui                  the log, not the dashboard, even in a terminal\n"
     "  --tui-frames N            close the dashboard after N frames (and stop with a checkpoint)\n"
     "Ctrl-C or SIGTERM finishes the step, writes a checkpoint and exits 130. Exit 2: bad input, nothing run; 1: failed."},
    {"sample", "mgt sample CHECKPOINT [--prompt TEXT] [--tokens N] [--temperature T] [--top-k K] [--seed S] [--bpe-dir DIR] [--tokenizer-json FILE]",
     "Continues a prompt with a checkpoint's model (a file, or a folder's newest); the preset stored in it says the rest.\n"
     "A token the tokenizer has no text for (a model whose vocabulary is larger) prints as <|id|>.\n"
     "  --prompt TEXT        the text to continue (default: the start of a document)\n"
     "  --tokens N           tokens to write, 0..1000000 (200)\n"
     "  --temperature T      0 is greedy (1)\n"
     "  --top-k K            sample among the K most likely; 0 is all (0)\n"
     "  --seed S             the sampling seed, 0..2147483647 (1)\n"
     "  --bpe-dir DIR        GPT-2's encoder.json and vocab.bpe, where the checkpoint's data.bpe_dir is not\n"
     "  --tokenizer-json FILE  the tokenizer.json (hf), where the checkpoint's data.tokenizer_json is not"},
    {"check", "mgt check PRESET [--set section.key=value]... [--auto-layout]",
     "Validates PRESET and its data, and prints the resolved preset (every key) and the layout: ranks, micro-batches,\n"
     "parameters, memory by category, tensors. With parallel.layout = auto (or --auto-layout), the layout mgt train\n"
     "would choose here first, as mgt train prints it."},
    {"keys", "mgt keys [--markdown]", "Every preset key with its type, default, valid values and meaning (--markdown: README's table)."},
    {"prepare", "mgt prepare --tokenizer byte|gpt2|hf [--bpe-dir DIR] [--tokenizer-json FILE] [--val-fraction F] INPUT... -o PREFIX",
     "Tokenizes text files into PREFIX_train.bin and PREFIX_val.bin (llm.c's shard format); `mgt prepare --help` has more."},
    {"bench", "mgt bench PRESET [--steps N] [--record] [--set section.key=value]...",
     "Trains PRESET's shape on synthetic tokens and prints tokens/s, GFLOP/s and MFU (against this machine's sgemm, or a\n"
     "GPU's dense peak), memory, and the speedup over one rank. One rank's figure is kept as the baseline of `mgt train`'s\n"
     "speedup, with the share of their cores its threads had; on a busy machine (under 60%) it says so and keeps none.\n"
     "  --steps N            timed steps after 2 warm-up steps, 1..1000000 (5)\n"
     "  --record             keep one rank's figure as the baseline even when the machine looks busy"},
    {"plan", "mgt plan PRESET [--gpus N] [--gpu a100|h100|h200|b200|cpu] [--gpus-per-node N] [--trace FILE] [--search] [--calibrate FILE]\n"
             "         [--set section.key=value]...",
     "Memory and traffic of every rank of PRESET's layout, in closed form, without running anything.\n"
     "  --gpus N             plan for N ranks: dp becomes N / (tp x pp)\n"
     "  --gpu NAME           also PREDICT one step on NAME (the step simulator: the runtime with modelled costs):\n"
     "                       time per op family, exposed communication, bubble, step time, tokens/s, MFU, memory\n"
     "  --gpus-per-node N    GPUs that share a node's links (8); collectives beyond them cross the network\n"
     "  --trace FILE         with --gpu: the simulated step as Chrome trace JSON (open it in Perfetto)\n"
     "  --search             with --gpu: every layout of the GPUs (dp, tp, pp, zero, micro_batch, recompute, schedule)\n"
     "                       that fits their memory, simulated; prints the fastest ten\n"
     "  --calibrate FILE     with --gpu: price each op family from times measured on a real GPU (FILE: docs/simulator.md,\n"
     "                       \"Calibration\"): the family's prices scaled by measured / predicted for the shape measured"},
    {"export", "mgt export CHECKPOINT -o DIR [--overwrite]",
     "Writes DIR for Hugging Face's from_pretrained from a checkpoint (a file, or a run folder's newest): config.json\n"
     "(GPT2LMHeadModel or LlamaForCausalLM, from the model keys), model.safetensors (float32, Hugging Face's names) and\n"
     "the run's tokenizer files (gpt2: vocab.json and merges.txt; hf: tokenizer.json; byte: none). Exit 2: a model\n"
     "Hugging Face has no class for (the message names the key), or DIR holds a model already.\n"
     "  --overwrite          replace the files of a model DIR holds"},
    {"doctor", "mgt doctor [PRESET] [--json] [--set section.key=value]...\n"
               "         mgt doctor --gpu [--quick] [--out DIR] [--only CHECK,...]",
     "What this machine has and what mgt will do on it, in a few seconds: mgt's build, the CPU, its memory and BLAS, the\n"
     "CUDA library and every GPU, MPI, what [parallel] device = auto chooses now and why; with PRESET, whether it fits\n"
     "and its predicted step on this GPU. Attach it to a bug report.\n"
     "  --json               the same as one JSON object (sections of values; the GPUs an array)\n"
     "--gpu: the acceptance run of the CUDA path (builds the CUDA library with this machine's nvcc when it is missing):\n"
     "small-fp32, small-bf16, llama-fp32, llama-bf16 (GPU against CPU, step by step), resume (bit-identical on the GPU),\n"
     "bench (GPT-2 124M bf16 16 x 1024, measured beside the prediction, and the time per op family in DIR/calibration.ini\n"
     "for mgt plan --calibrate), and with 2 GPUs dp2, tp2, pp2, dp2-zero3 and allreduce (a bus-bandwidth sweep). Each\n"
     "check runs in a child; a failed one runs again with MGT_CUDA_SYNC=1 to name the op. A PASS/FAIL/SKIP line each,\n"
     "in DIR/doctor-gpu.txt too, the figures in DIR/doctor-gpu.json; exit 1 when one failed.\n"
     "  --quick              small shapes and a few steps (what the suite runs on the checking fakes)\n"
     "  --out DIR            where the summary, the JSON and each check's log go (doctor-gpu)\n"
     "  --only LIST          the checks named (comma-separated)"},
    {"version", "mgt version", "Prints the version."},
};

static void usage(FILE *f) {
    size_t i;
    fprintf(f, "mgt " MGT_VERSION_STRING ": train GPT-style transformers from an INI preset\n\nusage:\n");
    for (i = 0; i < sizeof commands / sizeof commands[0]; i++) fprintf(f, "  %s\n", commands[i].usage);
    fprintf(f, "\n`mgt COMMAND --help` says more about each.\n");
}

/* `mgt CMD --help` or `-h` anywhere among CMD's arguments: its help on stdout, exit 0 */
static int command_help(int argc, char **argv) {
    size_t i;
    int a;
    for (a = 2; a < argc; a++)
        if (!strcmp(argv[a], "--help") || !strcmp(argv[a], "-h")) break;
    if (a >= argc || !strcmp(argv[1], "prepare")) return -1; /* prepare prints its own */
    for (i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) {
            printf("usage: %s\n\n%s\n", commands[i].usage, commands[i].text);
            return 0;
        }
    return -1;
}

/* The value of a numeric option, as strictly as a preset's: the whole text, a finite number in
   lo..hi, an integer where `integer` is set. Otherwise prints the option, the value and what is
   valid, for example "mgt sample: --tokens 'abc' is not an integer (valid: 0..1000000)", and
   returns 0 (the caller exits 2). */
static int option_number(const char *cmd, const char *opt, const char *text, int integer, double lo, double hi, double *out) {
    char *end, range[96];
    double v;
    errno = 0;
    if (integer) v = (double)strtoll(text, &end, 10);
    else v = strtod(text, &end);
    if (!integer && errno == ERANGE && isfinite(v)) errno = 0; /* a subnormal number: the nearest double */
    if (integer) snprintf(range, sizeof range, "%.0f..%.0f", lo, hi);
    else snprintf(range, sizeof range, "%g..%g", lo, hi);
    if (end == text || *end || isspace((unsigned char)text[0]) || v != v || (!integer && isinf(v) && errno != ERANGE)) {
        fprintf(stderr, "mgt %s: %s '%s' is not %s (valid: %s)\n", cmd, opt, text, integer ? "an integer" : "a finite number", range);
        return 0;
    }
    if (errno == ERANGE || v < lo || v > hi) {
        fprintf(stderr, "mgt %s: %s %s is out of range (valid: %s)\n", cmd, opt, text, range);
        return 0;
    }
    *out = v;
    return 1;
}

/* PRESET plus --set overrides; other options are left to the caller through `extra` */
typedef struct options {
    const char *preset, *resume, *prompt;
    int no_tui, tokens, top_k, steps, markdown, overwrite, record, auto_layout;
    double temperature;
    unsigned long long seed;
} options;

static int parse_common(int argc, char **argv, mgt_config *cfg, options *o, int need_preset) {
    int i;
    mgt_result r;
    double v;
    int train = !strcmp(argv[1], "train");
    mgt_config_init(cfg);
    mgt_set_logger(print_log, NULL); /* warnings about the preset (a repeated [section]) */
    for (i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!train && (!strcmp(a, "--resume") || !strcmp(a, "--no-tui") || !strcmp(a, "--overwrite"))) { /* options of mgt train only */
            fprintf(stderr, "mgt %s: %s is an option of mgt train (see mgt %s --help)\n", argv[1], a, argv[1]);
            return 2;
        }
        if (!strcmp(a, "--set") || !strcmp(a, "--resume") || !strcmp(a, "--steps")) {
            if (i + 1 >= argc) { fprintf(stderr, "mgt: %s needs a value\n", a); return 2; }
            i++;
            if (!strcmp(a, "--resume")) o->resume = argv[i];
            else if (!strcmp(a, "--steps")) {
                if (strcmp(argv[1], "bench")) { fprintf(stderr, "mgt %s: --steps is an option of mgt bench; the steps of training are --set train.steps=N\n", argv[1]); return 2; }
                if (!option_number("bench", "--steps", argv[i], 1, 1, 1000000, &v)) return 2;
                o->steps = (int)v;
            }
            continue; /* --set is applied after the preset is loaded */
        }
        if (!strcmp(a, "--record") && !strcmp(argv[1], "bench")) { o->record = 1; continue; }
        if (!strcmp(a, "--no-tui")) { o->no_tui = 1; continue; }
        if (!strcmp(a, "--overwrite")) { o->overwrite = 1; continue; }
        if (!strcmp(a, "--auto-layout")) { o->auto_layout = 1; continue; }
        if (a[0] == '-') { fprintf(stderr, "mgt %s: unknown option %s (see mgt %s --help)\n", argv[1], a, argv[1]); return 2; }
        if (o->preset) { fprintf(stderr, "mgt: one preset at a time (got %s and %s)\n", o->preset, a); return 2; }
        o->preset = a;
    }
    if (need_preset && !o->preset) { fprintf(stderr, "mgt: %s needs a preset file, for example presets/quickstart.ini\n\n", argv[1]); usage(stderr); return 2; }
    if (o->preset && (r = mgt_config_load(cfg, o->preset)) != MGT_OK) return fail(r);
    for (i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--set") && (r = mgt_config_set(cfg, argv[++i])) != MGT_OK) return fail(r);
    /* after the preset and --set: the preset's layout keys give way, those of --set pin the search */
    if (o->auto_layout && (r = mgt_config_set_from(cfg, "parallel.layout=auto", "--auto-layout")) != MGT_OK) return fail(r);
    if ((r = mgt_config_resolve_init(cfg)) != MGT_OK || (r = mgt_config_validate(cfg)) != MGT_OK) return fail(r);
    return 0;
}

/* the pipeline schedule's name: gpipe, 1f1b, zb, or "1f1b interleaved x V" (parallel.pp_virtual) */
static const char *schedule_name(const mgt_config *cfg) {
    static char name[48];
    if (cfg->parallel.pp_schedule == 2) return "zb";
    if (cfg->parallel.pp_schedule) return "gpipe";
    if (cfg->parallel.pp_virtual <= 1) return "1f1b";
    snprintf(name, sizeof name, "1f1b interleaved x%d", cfg->parallel.pp_virtual);
    return name;
}

/* a stage's blocks: "0-3", or its chunks' ("0-0,2-2") under interleaved 1F1B (chunk g of pp x V on stage g mod pp) */
static const char *stage_blocks(const mgt_plan *plan, int stage, char *buf, size_t cap) {
    int V = plan->pp > 1 ? plan->cfg.parallel.pp_virtual : 1, per = plan->cfg.model.n_layer / (plan->pp * V), c;
    size_t used = 0;
    buf[0] = 0;
    if (V == 1) snprintf(buf, cap, "%3d-%-3d", plan->stage_first[stage], plan->stage_first[stage + 1] - 1); /* aligned as it always was */
    else
        for (c = 0; c < V && used < cap; c++) {
            int n = snprintf(buf + used, cap - used, "%s%d-%d", c ? "," : "", (c * plan->pp + stage) * per, (c * plan->pp + stage + 1) * per - 1);
            used += n > 0 ? (size_t)n : 0;
        }
    return buf;
}

/* the rank tables' cp column (after dp), there only where there is context parallelism */
static const char *cp_column(int cp, int value, char *out, size_t cap) {
    if (cp > 1 && value < 0) snprintf(out, cap, " cp");
    else if (cp > 1) snprintf(out, cap, " %2d", value);
    else out[0] = 0;
    return out;
}

/* a layout as the preset keys say it: "dp 2 x tp 1 x pp 2 (1f1b), zero 1, micro_batch 4, recompute none" */
static void layout_text(const mgt_layout_choice *c, char *out, size_t cap) {
    snprintf(out, cap, "dp %d x tp %d x pp %d%s, zero %d, micro_batch %d, recompute %s", c->dp, c->tp, c->pp,
             c->pp > 1 ? (c->pp_schedule == 2 ? " (zb)" : c->pp_schedule ? " (gpipe)" : " (1f1b)") : "", c->zero, c->micro_batch, mgt_recompute_name(c->recompute));
}

/* parallel.layout = auto: the layout chosen now (mgt_config_resolve_layout), printed with its predicted
   step, the runner-up and what the search took; 0, or the exit code of a failure */
static int choose_layout(mgt_config *cfg) {
    mgt_layout_auto a;
    mgt_result r;
    char text[160], ranks[96];
    if (cfg->parallel.layout != MGT_LAYOUT_AUTO) return 0;
    printf("parallel.layout = auto: simulating a step of each layout that fits this machine...\n");
    fflush(stdout);
    if ((r = mgt_config_resolve_layout(cfg, &a)) != MGT_OK) return fail(r);
    if (!a.searched) return 0;
    if (a.on_gpus) snprintf(ranks, sizeof ranks, "%d x %s", a.devices, a.title);
    else snprintf(ranks, sizeof ranks, "%d CPU thread%s of this machine", a.devices, a.devices == 1 ? "" : "s");
    layout_text(&a.chosen, text, sizeof text);
    printf("layout chosen automatically: %s\n", text);
    printf("  PREDICTED by the step simulator: step %.2f ms, %.0f tokens/s, %.*f %s on the fullest %s\n", a.chosen.step_s * 1e3, a.chosen.tokens_per_s,
           a.chosen.mem_gib < 1 ? 1 : 2, a.chosen.mem_gib < 1 ? a.chosen.mem_gib * 1024 : a.chosen.mem_gib, a.chosen.mem_gib < 1 ? "MiB" : "GiB",
           a.on_gpus ? "GPU" : "rank");
    if (a.has_runner_up) {
        layout_text(&a.runner_up, text, sizeof text);
        printf("  runner-up: %s: PREDICTED step %.2f ms, %.0f tokens/s\n", text, a.runner_up.step_s * 1e3, a.runner_up.tokens_per_s);
    } else printf("  runner-up: none (one layout fits)\n");
    printf("  search: %d layout%s that fit %s simulated", a.simulated, a.simulated == 1 ? "" : "s", ranks);
    if (a.pinned) printf(", %d of them with %s", a.eligible, a.pins);
    printf(", in %.2f s (measured)\n", a.search_s);
    fflush(stdout);
    return 0;
}

static void format_bytes(double b, char *out, size_t cap) {
    if (b >= 1073741824.0) snprintf(out, cap, "%.2f GiB", b / 1073741824.0);
    else if (b >= 1048576.0) snprintf(out, cap, "%.1f MiB", b / 1048576.0);
    else snprintf(out, cap, "%.0f KiB", b / 1024.0);
}

/* ---- the single-rank baseline: what `mgt bench` measured for one rank, so that a run of the same
   model on more ranks can show its speedup. A line per measurement, "key<TAB>tokens/s<TAB>date", in
   $MGT_BASELINES, else $XDG_CACHE_HOME/mgt/baselines.tsv, else ~/.cache/mgt/baselines.tsv. The key is
   what makes it the same training on the same machine: the machine, the model's shape, the global
   batch, recompute, precision and the threads in all, so another model or shape never uses it. Not
   the micro-batch: more ranks often need a smaller one (dp 2 halves the batch each rank sees), and
   the speedup is over training this batch on one rank as that rank was measured. ---- */

static int baseline_path(char *out, size_t cap) {
    const char *env = getenv("MGT_BASELINES"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (env && env[0]) snprintf(out, cap, "%s", env);
    else if (xdg && xdg[0]) snprintf(out, cap, "%s/mgt/baselines.tsv", xdg);
    else if (home && home[0]) snprintf(out, cap, "%s/.cache/mgt/baselines.tsv", home);
    else return 0;
    return 1;
}

static void baseline_key(const mgt_config *c, const char *device, int threads, char *out, size_t cap) {
    char host[256] = "?";
    static const char *dtypes[] = {"fp32", "bf16", "fp16"};
    gethostname(host, sizeof host - 1);
    snprintf(out, cap, "host=%s device=%s threads=%d L=%d NH=%d C=%d T=%d V=%d batch=%d recompute=%d dtype=%s", host, device, threads,
             c->model.n_layer, c->model.n_head, c->model.d_model, c->model.seq_len, c->model.vocab_size, c->train.global_batch,
             c->train.recompute, dtypes[c->precision.dtype >= 0 && c->precision.dtype < 3 ? c->precision.dtype : 0]);
}

/* the newest measurement with this key (the largest, when largest is set: a machine's peak is what
   it reaches when nothing else runs): its value (0 when there is none) and date */
static double baseline_find(const char *key, char *date, size_t cap, int largest) {
    char path[1024], line[1024];
    double found = 0;
    size_t n = strlen(key);
    FILE *f;
    if (!baseline_path(path, sizeof path) || !(f = fopen(path, "r"))) return 0;
    while (fgets(line, sizeof line, f)) {
        char when[64];
        double v;
        char *cond;
        if (strncmp(line, key, n) || line[n] != '\t' || sscanf(line + n + 1, "%lf\t%63s", &v, when) != 2 || !(v > 0)) continue;
        if (largest && v < found) continue;
        found = v;
        line[strcspn(line, "\n")] = 0;
        cond = strchr(strchr(line + n + 1, '\t') + 1, '\t'); /* a fourth column: the conditions it was measured in */
        {
            size_t k;
            snprintf(date, cap, "%s", when);
            k = strlen(date);
            if (cond && k + 2 < cap) snprintf(date + k, cap - k, ", %s", cond + 1);
        }
    }
    fclose(f);
    return found;
}

/* conditions: how the machine was when measured (a fourth column), or NULL */
static void baseline_record(const char *key, double tok_s, const char *what, const char *conditions) {
    char path[1024], dir[1024], when[64], *slash;
    time_t now = time(NULL);
    FILE *f;
    if (!baseline_path(path, sizeof path)) return;
    snprintf(dir, sizeof dir, "%s", path);
    if ((slash = strrchr(dir, '/')) && slash != dir) { *slash = 0; if (mgt_mkdirs(dir) != MGT_OK) { fprintf(stderr, "mgt: warning: %s\n", mgt_last_error()); return; } }
    if (!(f = fopen(path, "a"))) { fprintf(stderr, "mgt: warning: %s: cannot record %s: %s\n", path, what, strerror(errno)); return; }
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    fprintf(f, "%s\t%.1f\t%s%s%s\n", key, tok_s, when, conditions ? "\t" : "", conditions ? conditions : "");
    if (fclose(f)) fprintf(stderr, "mgt: warning: %s: cannot record %s: %s\n", path, what, strerror(errno));
    else if (!strcmp(what, "the single-rank baseline"))
        printf("recorded as the single-rank baseline of this model in %s: a run on more ranks shows its speedup against it\n", path);
}

/* The CPU's peak for MFU: the whole machine's rate of the GEMMs a run multiplies with (sgemm, or
   bf16 through oneDNN for a bf16 run that has it: mgt_cpu_bf16_gemm), every core, n = 1024, the
   median over about 2 s, measured by `mgt bench` or, the first time `mgt train` needs it, over
   0.3 s; kept in the baselines file under "host=... sgemm threads=N" (or "bf16gemm"), of which
   mgt train takes the largest (a measurement on a busy machine is low, never high). */
static int bf16_gemms(const mgt_config *cfg) { return cfg->precision.dtype == MGT_BF16 && mgt_cpu_bf16_gemm(NULL, 0); }
static const char *gemm_name(int bf16) { return bf16 ? "bf16 GEMM (oneDNN)" : "sgemm"; }
static void gemm_key(int bf16, char *out, size_t cap) {
    char host[256] = "?";
    gethostname(host, sizeof host - 1);
    snprintf(out, cap, "host=%s %s threads=%d", host, bf16 ? "bf16gemm" : "sgemm", mgt_cpu_count());
}
static double machine_gemm(int bf16, double seconds, int remeasure, char *date, size_t cap) {
    char key[320];
    double g;
    gemm_key(bf16, key, sizeof key);
    if (!remeasure && (g = baseline_find(key, date, cap, 1)) > 0) return g;
    g = bf16 ? mgt_cpu_bf16_gemm_gflops(0, seconds) : mgt_cpu_sgemm_gflops(0, seconds);
    if (g > 0) {
        time_t now = time(NULL);
        strftime(date, cap, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
        baseline_record(key, g, bf16 ? "the machine's bf16 GEMM rate (oneDNN)" : "the machine's sgemm rate", NULL);
    }
    return g;
}

/* After a failed step: the error, what it means for the run, and the newest checkpoint. A periodic
   checkpoint that cannot be written (the folder removed, replaced, full, read-only) stops the run
   with status 1: hours of training on without checkpoints is worse than a loud stop. step_before
   is the step count before the failed call: past it, the step itself was done and what failed came
   after it (validation, metrics, the checkpoint). */
static void report_train_failure(mgt_run *run, const char *message, int step_before) {
    const mgt_config *cfg = mgt_run_config(run);
    mgt_stats st;
    char path[1200], name[64], error[1024];
    snprintf(error, sizeof error, "%s", message); /* a copy: message may be mgt_last_error(), which the calls below reuse */
    mgt_run_stats(run, &st);
    fprintf(stderr, "mgt: %s\n", error);
    snprintf(name, sizeof name, "step_%08d.safetensors", st.step);
    if (st.step > step_before && cfg->checkpoint.every > 0 && st.step % cfg->checkpoint.every == 0 && strstr(error, name))
        fprintf(stderr, "mgt: the checkpoint of step %d could not be written (checkpoint.dir = %s, checkpoint.every = %d): training stopped at step %d "
                        "rather than go on without checkpoints\n", st.step, mgt_run_dir(run), cfg->checkpoint.every, st.step);
    if (mgt_checkpoint_latest(mgt_run_dir(run), path, sizeof path) == MGT_OK) fprintf(stderr, "mgt: the newest checkpoint is %s\n", path);
    else fprintf(stderr, "mgt: no checkpoint to resume from in %s\n", mgt_run_dir(run));
}

/* ---- mgt train under the dashboard: training on a thread of its own, the view on the main one ---- */

typedef struct train_ctl {
    mgt_run *run;
    int stop, pause, save, done; /* requests from the main thread, and the thread's end (atomics) */
    mgt_result result;
    int step_before;             /* the step count before the call that failed */
    char error[1024];
} train_ctl;

static void *train_thread(void *arg) {
    train_ctl *c = (train_ctl *)arg;
    mgt_stats st;
    mgt_result r = MGT_OK;
    struct timespec nap = {0, 20 * 1000 * 1000};
    mgt_run_stats(c->run, &st);
    while (st.step < st.steps && !__atomic_load_n(&c->stop, __ATOMIC_SEQ_CST)) {
        if (__atomic_exchange_n(&c->save, 0, __ATOMIC_SEQ_CST)) {
            char path[1200];
            if ((r = mgt_run_save(c->run, path, sizeof path)) != MGT_OK) break;
        }
        if (__atomic_load_n(&c->pause, __ATOMIC_SEQ_CST)) {
            if (mgt_run_state(c->run) != MGT_STATE_PAUSED) mgt_run_set_state(c->run, MGT_STATE_PAUSED);
            nanosleep(&nap, NULL);
            continue;
        }
        if (mgt_run_state(c->run) == MGT_STATE_PAUSED) mgt_run_set_state(c->run, MGT_STATE_RUNNING);
        c->step_before = st.step;
        if ((r = mgt_run_step(c->run)) != MGT_OK) break;
        mgt_run_stats(c->run, &st);
    }
    if (r != MGT_OK) snprintf(c->error, sizeof c->error, "%s", mgt_last_error()); /* the message is per thread */
    c->result = r;
    mgt_run_set_state(c->run, r != MGT_OK ? MGT_STATE_FAILED : st.step >= st.steps ? MGT_STATE_FINISHED : MGT_STATE_RUNNING);
    __atomic_store_n(&c->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

/* warnings that arrive while the dashboard holds the terminal are printed after it closes (the
   events pane shows them meanwhile); information goes to the events pane only */
static pthread_mutex_t tui_log_mu = PTHREAD_MUTEX_INITIALIZER;
static char tui_log_text[4096];
static void tui_log(void *user, int level, const char *message) {
    size_t n;
    (void)user;
    if (level != MGT_LOG_WARN) return;
    pthread_mutex_lock(&tui_log_mu);
    n = strlen(tui_log_text);
    if (n + strlen(message) + 20 < sizeof tui_log_text) snprintf(tui_log_text + n, sizeof tui_log_text - n, "mgt: warning: %s\n", message);
    pthread_mutex_unlock(&tui_log_mu);
}

/* crash signals give the terminal back, then take their default course (a core, the exit status) */
static const int crash_signals[] = {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL};
static void on_crash(int sig) {
    mgt_tui_restore_terminal();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Runs training to the end (or until q, Ctrl-C, SIGTERM, the frame limit) with the dashboard.
   Returns 0 (*interrupted set when it stopped early), 1 on a training error (message printed),
   or -1 when no dashboard could be opened (nothing was run). */
static int train_dashboard(mgt_run *run, const char *preset, int max_frames, double base_tok_s, int *interrupted) {
    train_ctl c;
    pthread_t th;
    mgt_tui *t;
    mgt_tui_options opt;
    struct sigaction sa, old[sizeof crash_signals / sizeof crash_signals[0]];
    char summary[1024];
    int paused = 0, stopping = 0, i;
    mgt_stats st;
    memset(&c, 0, sizeof c);
    memset(&opt, 0, sizeof opt);
    c.run = run;
    opt.preset = preset;
    opt.max_frames = max_frames;
    opt.base_tokens_per_s = base_tok_s;
    if (mgt_tui_open(&t, run, &opt) != 0) return -1;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_crash;
    sa.sa_flags = (int)SA_RESETHAND;
    for (i = 0; i < (int)(sizeof crash_signals / sizeof crash_signals[0]); i++) sigaction(crash_signals[i], &sa, &old[i]);
    atexit(mgt_tui_restore_terminal);
    mgt_set_logger(tui_log, NULL);
    if (pthread_create(&th, NULL, train_thread, &c) != 0) {
        mgt_tui_close(t);
        mgt_set_logger(print_log, NULL);
        fprintf(stderr, "mgt: cannot start the training thread\n");
        return 1;
    }
    while (!__atomic_load_n(&c.done, __ATOMIC_SEQ_CST)) {
        int flags = mgt_tui_frame(t);
        if (mgt_stop_requested || (flags & (MGT_TUI_STOP | MGT_TUI_CLOSED))) {
            if (!stopping) {
                mgt_tui_message(t, "stopping after this step; a checkpoint follows");
                mgt_tui_stopping(t);
            }
            stopping = 1;
            __atomic_store_n(&c.stop, 1, __ATOMIC_SEQ_CST);
        }
        if ((flags & MGT_TUI_PAUSE) && !stopping) {
            paused = !paused;
            __atomic_store_n(&c.pause, paused, __ATOMIC_SEQ_CST);
            mgt_tui_message(t, paused ? "paused after this step: p resumes" : "resumed");
        }
        if (flags & MGT_TUI_SAVE) {
            __atomic_store_n(&c.save, 1, __ATOMIC_SEQ_CST);
            mgt_tui_message(t, "checkpoint requested: written before the next step");
        }
    }
    pthread_join(th, NULL);
    mgt_run_stats(run, &st);
    if (st.step < st.steps) mgt_tui_stopping(t); /* ended early, whichever way (q, a signal, the frame limit): the summary says stopped */
    mgt_tui_refresh(t);
    mgt_tui_summary(t, summary, sizeof summary);
    mgt_tui_close(t);
    for (i = 0; i < (int)(sizeof crash_signals / sizeof crash_signals[0]); i++) sigaction(crash_signals[i], &old[i], NULL);
    mgt_set_logger(print_log, NULL);
    fputs(summary, stdout);
    fputs(tui_log_text, stderr);
    fflush(stdout);
    if (c.result != MGT_OK) {
        report_train_failure(run, c.error, c.step_before);
        return 1;
    }
    mgt_run_stats(run, &st);
    *interrupted = st.step < st.steps;
    return 0;
}

static int plan_world(const mgt_config *c) { return mgt_config_ranks(c); }

/* the dense peak of one of this machine's GPUs for dtype, GFLOP/s, from the simulator's table of its
   kind (bf16 and fp16 on tensor cores; fp32 on CUDA cores, as mgt's fp32 GEMMs use no TF32), its
   source said in source; 0 when no GPU or one the table lacks */
static const char *sim_gpu_kind(const char *name);
static double gpu_peak_gflops(int dtype, char *source, size_t cap) {
    const mgt_cuda_api *api = mgt_cuda_load(NULL, 0);
    mgt_gpu_info info;
    mgt_sim_device dev;
    const char *kind;
    if (!api || api->info(0, &info) != 0 || !(kind = sim_gpu_kind(info.name)) || mgt_sim_device_find(kind, 0, &dev) != MGT_OK) return 0;
    snprintf(source, cap, "%s's dense %s peak, mgt plan --gpu %s", info.name, dtype == MGT_F32 ? "fp32 (CUDA cores: no TF32)" : dtype == MGT_BF16 ? "bf16" : "fp16", kind);
    return (dtype == MGT_F32 ? dev.vector_tflops : dev.tensor_tflops[dtype]) * 1e3;
}

/* mgt train's first lines: what runs where, MFU's peak, the speedup's baseline (*base_tok_s, 0:
   none measured, and its date) */
static void train_banner(mgt_run *run, const mgt_config *cfg, const char *preset, double *base_tok_s, char *base_date, size_t date_cap) {
    static const char *dtypes[] = {"fp32", "bf16", "fp16"};
    const mgt_plan *plan = mgt_run_plan(run);
    char mem[32], where[48], grid[64];
    mgt_stats st;
    mgt_run_stats(run, &st); /* after set_peak: the banner names the peak */
    format_bytes((double)(st.mem_current[MGT_MEM_PARAMS] + st.mem_current[MGT_MEM_GRADS] + st.mem_current[MGT_MEM_OPTIMIZER] +
                          st.mem_current[MGT_MEM_ACTIVATIONS] + st.mem_current[MGT_MEM_WORKSPACE]), mem, sizeof mem);
    if (!strcmp(mgt_run_device(run), "cuda")) snprintf(where, sizeof where, "cuda, %d GPU%s", plan->world, plan->world == 1 ? "" : "s");
    else snprintf(where, sizeof where, "cpu, %d thread%s", st.threads, st.threads == 1 ? "" : "s");
    printf("mgt %s | preset %s | %.2fM parameters | %d rank%s: %s, zero %d%s%s%s | %d micro-batch%s of %d sequence%s | %s | %s | "
           "%d x %d tokens per step | memory %s | checkpoints %s\n", MGT_VERSION_STRING, preset, (double)st.params / 1e6, plan->world,
           plan->world == 1 ? "" : "s", mgt_grid_text(plan->dp, plan->cp, plan->tp, plan->pp, grid, sizeof grid), plan->zero, plan->pp > 1 ? ", " : "",
           plan->pp > 1 ? schedule_name(cfg) : "", cfg->parallel.sp ? ", sequence parallel" : "", plan->micro_steps, plan->micro_steps == 1 ? "" : "es",
           cfg->train.micro_batch, cfg->train.micro_batch == 1 ? "" : "s", where, dtypes[cfg->precision.dtype >= 0 && cfg->precision.dtype < 3 ? cfg->precision.dtype : 0],
           cfg->train.global_batch, cfg->model.seq_len, mem, mgt_run_dir(run));
    if (st.peak_gflops > 0)
        printf("MFU against %.1f GFLOP/s (%s)\n", st.peak_gflops, strcmp(st.peak_source, "preset") ? st.peak_source : "[parallel] peak_gflops x ranks");
    if (strcmp(mgt_run_device(run), "cuda") && cfg->precision.dtype == MGT_BF16) { /* which of the CPU's two bf16 paths multiplies */
        char how[900];
        mgt_cpu_bf16_gemm(how, sizeof how);
        printf("bf16 GEMMs: %s\n", how);
    }
    *base_tok_s = 0;
    if (plan->world > 1) { /* the speedup is shown only against a measured single rank of the same model */
        char key[512];
        baseline_key(cfg, mgt_run_device(run), st.threads, key, sizeof key);
        if ((*base_tok_s = baseline_find(key, base_date, date_cap, 0)) > 0)
            printf("speedup against one rank of this model: %.0f tokens/s, measured by mgt bench at %s\n", *base_tok_s, base_date);
    }
}

/* Under a launcher, how to stop with a checkpoint. Ctrl-C reaches Open MPI's mpirun, which ends the
   job at once (exit 1, no checkpoint: measured with Open MPI 4.1); SIGUSR1 it forwards to every
   process, which then stop after the same step (a checkpoint, exit 130). The launcher is this
   process's parent when the job runs on this machine. */
static void stop_hint(void) {
    char path[64], comm[64] = "";
    FILE *f;
    pid_t parent = getppid();
    snprintf(path, sizeof path, "/proc/%d/comm", (int)parent);
    if ((f = fopen(path, "r"))) {
        if (!fgets(comm, sizeof comm, f)) comm[0] = 0;
        fclose(f);
    }
    comm[strcspn(comm, "\n")] = 0;
    if (!strcmp(comm, "mpirun") || !strcmp(comm, "mpiexec") || !strcmp(comm, "orterun") || !strcmp(comm, "prterun"))
        printf("to stop with a checkpoint: kill -USR1 %d (%s forwards it to every process; Ctrl-C makes it end the job at once, without a checkpoint)\n",
               (int)parent, comm);
    else printf("to stop with a checkpoint: send SIGUSR1 to every process (scancel --signal=USR1 under Slurm); a launcher's Ctrl-C may end the job at once\n");
}

/* a finished run resumed: no step to take, no loss to show (its checkpoint is saved in the run's
   folder too when it came from another); exit status */
static int train_nothing_left(mgt_run *run, const mgt_config *cfg, int start_step) {
    char here[1200], name[64];
    mgt_result r;
    snprintf(name, sizeof name, "/step_%08d.safetensors", start_step);
    if ((mgt_checkpoint_latest(mgt_run_dir(run), here, sizeof here) != MGT_OK || !strstr(here, name)) &&
        (r = mgt_run_save(run, here, sizeof here)) != MGT_OK)
        return fail(r);
    printf("nothing to train: the checkpoint is at step %d and [train] steps = %d; to train on, raise it: --set train.steps=%d --resume latest "
           "(checkpoint %s)\n", start_step, cfg->train.steps, start_step + cfg->train.steps, here);
    return 0;
}

/* the steps without the dashboard, a line every log.every: the loss and its smoothed curve (an
   exponential average, debiased as TensorBoard's), MFU, memory, the wall time since training began
   and the time left at the mean pace of this process's steps. 0, or 1 when a step failed (said) */
static int train_log_loop(mgt_run *run, const mgt_config *cfg, int processes, int start_step, int *interrupted) {
    double ema = 0, ema_weight = 0, t_start = mgt_now();
    mgt_stats st, past[64];
    mgt_snapshot s;
    int i;
    memset(&s, 0, sizeof s);
    s.history = past;
    s.history_max = 64;
    do { /* resumed in its folder: the smoothed loss goes on from its metrics */
        mgt_run_snapshot(run, &s);
        for (i = 0; i < s.history_n; i++)
            if (isfinite(past[i].loss)) ema = 0.9 * ema + 0.1 * past[i].loss, ema_weight = 0.9 * ema_weight + 0.1;
        s.history_from = s.history_first + s.history_n;
    } while (s.history_n == s.history_max);
    mgt_run_stats(run, &st);
    while (st.step < cfg->train.steps) {
        mgt_result r;
        if (mgt_stop_requested && processes > 1) mgt_run_request_stop(run); /* every process stops after the same step */
        else if (mgt_stop_requested) { *interrupted = 1; break; }
        holding = 1;
        r = mgt_run_step(run);
        holding = 0;
        if (r != MGT_OK) {
            print_held();
            report_train_failure(run, mgt_last_error(), st.step);
            if (processes > 1) mgt_mpi_abort(1); /* the other processes may wait on this one's ranks */
            return 1;
        }
        mgt_run_stats(run, &st);
        if (processes > 1 && mgt_run_stop_agreed(run)) *interrupted = 1; /* after this step's line */
        if (isfinite(st.loss)) { ema = 0.9 * ema + 0.1 * st.loss; ema_weight = 0.9 * ema_weight + 0.1; }
        if (st.step % cfg->log.every == 0 || st.step == cfg->train.steps || st.step == start_step + 1) {
            char mfu[16] = "n/a", memory[32], elapsed[16], eta[16];
            double wall = mgt_now() - t_start;
            size_t bytes = 0;
            int c;
            for (c = 0; c < MGT_MEM_COUNT; c++) bytes += st.mem_current[c];
            format_bytes((double)bytes, memory, sizeof memory);
            if (st.has_mfu) snprintf(mfu, sizeof mfu, "%.1f%%", 100 * st.mfu);
            format_hms(wall, elapsed, sizeof elapsed);
            format_hms(wall / (st.step - start_step) * (cfg->train.steps - st.step), eta, sizeof eta);
            printf("step %d/%d | loss %.4f (smoothed %.4f) | lr %.2e | norm %.2f | %.0f tok/s | %.1f ms | mfu %s | mem %s | %s elapsed, eta %s\n",
                   st.step, st.steps, st.loss, ema_weight > 0 ? ema / ema_weight : st.loss, st.lr, st.grad_norm, st.tokens_per_s, st.step_ms, mfu,
                   memory, elapsed, eta);
        }
        print_held();
        if (*interrupted) break;
    }
    return 0;
}

/* after an interrupted run: the command as it was typed (./mgt in the tree, mgt when installed on
   the PATH), under its launcher, with --resume latest */
static void print_resume_hint(int argc, char **argv, int processes, int step, const char *path) {
    char launcher[64];
    int i;
    printf("interrupted at step %d: checkpoint %s\nresume with: ", step, path);
    if (processes > 1) { /* started by a launcher: resume the same way (any process count resumes) */
        mgt_mpi_launcher(launcher, sizeof launcher);
        if (!strcmp(launcher, "SLURM_NTASKS")) printf("srun --ntasks=%d ", processes);
        else /* Open MPI refuses root without the option (or OMPI_ALLOW_RUN_AS_ROOT, which the job's environment would show) */
            printf(geteuid() == 0 && !strcmp(launcher, "OMPI_COMM_WORLD_SIZE") && !getenv("OMPI_ALLOW_RUN_AS_ROOT") ? "mpirun --allow-run-as-root -np %d "
                                                                                                                     : "mpirun -np %d ", processes);
    }
    printf("%s train", argv[0]);
    for (i = 2; i < argc; i++) { /* the same command, with --resume latest */
        if (!strcmp(argv[i], "--resume")) { i++; continue; }
        if (!strcmp(argv[i], "--overwrite")) continue; /* it would delete what resuming needs */
        printf(strpbrk(argv[i], " \t'\"$") ? " '%s'" : " %s", argv[i]);
    }
    printf(" --resume latest\n");
}

/* a finished run's last lines: loss, time, checkpoint; a new peak for MFU; the speedup */
static void train_done_report(mgt_run *run, const mgt_config *cfg, int processes, int start_step, double start_elapsed, double base_tok_s,
                              const char *base_date, const char *path) {
    char mem[32];
    mgt_stats st;
    mgt_run_stats(run, &st);
    format_bytes((double)(st.mem_peak[MGT_MEM_ACTIVATIONS]), mem, sizeof mem);
    printf("done: %d step%s, final loss %.4f, %.1f s in steps, activations %s; checkpoint %s\n", st.step, st.step == 1 ? "" : "s", st.loss,
           st.elapsed_s, mem, path);
    if (st.has_val_loss) printf("val loss %.4f at step %d\n", st.val_loss, st.val_step);
    if (!strncmp(st.peak_source, "the fastest step", 16) && !strcmp(mgt_run_device(run), "cpu") && cfg->parallel.peak_gflops <= 0 && processes == 1) {
        char key[320]; /* a step beat the measured GEMM: the machine's peak for MFU is at least that step's rate */
        gemm_key(bf16_gemms(cfg), key, sizeof key);
        baseline_record(key, st.peak_gflops, "the machine's peak", NULL);
        printf("MFU's peak: %s ran at %.1f GFLOP/s, above this machine's measured %s; recorded as its peak for later runs\n", st.peak_source,
               st.peak_gflops, gemm_name(bf16_gemms(cfg)));
    }
    if (base_tok_s > 0 && st.step > start_step && st.elapsed_s > start_elapsed) {
        double tok_s = (double)(st.step - start_step) * cfg->train.global_batch * cfg->model.seq_len / (st.elapsed_s - start_elapsed);
        printf("speedup %.2fx over one rank: %.0f tokens/s in steps here, %.0f measured by mgt bench at %s\n", tok_s / base_tok_s, tok_s, base_tok_s,
               base_date);
    }
}

static int cmd_train(int argc, char **argv) {
    mgt_config cfg;
    options o;
    mgt_run *run;
    mgt_result r;
    mgt_stats st;
    char path[1200], base_date[192] = "";
    double base_tok_s = 0, start_elapsed;
    struct sigaction sa;
    int rc, interrupted = 0, start_step, tui_frames = 0, i, nargs = 0, processes = 1;
    double v;
    for (i = 0; i < argc; i++) { /* --tui-frames N is the driver's, not a preset option: taken out of argv in place */
        if (i >= 2 && !strcmp(argv[i], "--tui-frames") && i + 1 < argc) {
            if (!option_number("train", "--tui-frames", argv[++i], 1, 1, 1000000000, &v)) return 2;
            tui_frames = (int)v;
            continue;
        }
        argv[nargs++] = argv[i];
    }
    argv[nargs] = NULL;
    argc = nargs;
    memset(&o, 0, sizeof o);
    if ((rc = parse_common(argc, argv, &cfg, &o, 1))) return rc;
    if (!cfg.log.metrics[0]) strcpy(cfg.log.metrics, "auto"); /* mgt train keeps metrics unless told not to */
    mgt_set_logger(print_log, NULL);
    if ((rc = choose_layout(&cfg))) return rc;
    if ((r = mgt_run_create(&run, &cfg)) != MGT_OK) return fail(r);
    /* a refusal is every process's (the library agrees on it): process 0 alone says why */
    if ((o.resume && (r = mgt_run_resume(run, o.resume)) != MGT_OK) || (r = mgt_run_claim(run, o.overwrite)) != MGT_OK) {
        int quiet = mgt_run_process(run, NULL) > 0;
        mgt_run_destroy(run);
        return quiet ? exit_code(r) : fail(r);
    }
    if (mgt_run_process(run, &processes) > 0) { /* process 0 shows the whole world; the others train quietly */
        o.no_tui = 1;
        if (!freopen("/dev/null", "w", stdout)) { mgt_run_destroy(run); return fail(MGT_ERROR_IO); }
    }
    if (!strcmp(mgt_run_device(run), "cpu") && cfg.parallel.peak_gflops <= 0) { /* MFU against this machine's measured GEMM rate */
        char measured[64], source[128];
        double machine = machine_gemm(bf16_gemms(&cfg), 0.3, 0, measured, sizeof measured);
        snprintf(source, sizeof source, "this machine's %s, measured %s", gemm_name(bf16_gemms(&cfg)), measured);
        if (machine > 0) mgt_run_set_peak(run, machine / plan_world(&cfg), source);
    } else if (cfg.parallel.peak_gflops <= 0) { /* MFU against the GPU's published peak */
        char source[256];
        double gpu = gpu_peak_gflops(cfg.precision.dtype, source, sizeof source);
        if (gpu > 0) mgt_run_set_peak(run, gpu, source);
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if (processes > 1) sigaction(SIGUSR1, &sa, NULL); /* Open MPI's mpirun forwards it (Ctrl-C kills the job) */
    train_banner(run, &cfg, o.preset, &base_tok_s, base_date, sizeof base_date);
    if (processes > 1) stop_hint();
    mgt_run_stats(run, &st);
    start_step = st.step;
    start_elapsed = st.elapsed_s;
    if (start_step >= cfg.train.steps) {
        rc = train_nothing_left(run, &cfg, start_step);
        mgt_run_destroy(run);
        return rc;
    }
    if (start_step > 0) printf("resuming at step %d of %d\n", start_step, cfg.train.steps);
    fflush(stdout);
    rc = -1;
    /* the dashboard when both ends are a terminal, unless --no-tui; the log otherwise */
    if (!o.no_tui && isatty(0) && isatty(1) && getenv("TERM") && strcmp(getenv("TERM"), "dumb")) {
        rc = train_dashboard(run, o.preset, tui_frames, base_tok_s, &interrupted);
    }
    if (rc < 0) rc = train_log_loop(run, &cfg, processes, start_step, &interrupted); /* no dashboard, or it could not start */
    if (rc > 0) { mgt_run_destroy(run); return 1; }
    if ((r = mgt_run_save(run, path, sizeof path)) != MGT_OK) { mgt_run_destroy(run); return fail(r); }
    mgt_run_stats(run, &st);
    if (interrupted) {
        print_resume_hint(argc, argv, processes, st.step, path);
        mgt_run_destroy(run);
        return 130;
    }
    train_done_report(run, &cfg, processes, start_step, start_elapsed, base_tok_s, base_date, path);
    mgt_run_destroy(run);
    return 0;
}

static int cmd_sample(int argc, char **argv) {
    const char *checkpoint = NULL, *prompt = "", *bpe_dir = NULL, *tokenizer_json = NULL, *kind, *files, *key;
    int tokens = 200, top_k = 0, i, n, rc = 0;
    double temperature = 1.0, v;
    unsigned long long seed = 1;
    mgt_run *run;
    mgt_result r;
    mgt_tokenizer *tok;
    char err[512];
    const mgt_config *cfg;
    uint32_t *ids = NULL;
    size_t n_ids = 0, cap = 0;
    int *prompt_ids, *out;
    for (i = 2; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (!strcmp(a, "--prompt") && has) prompt = argv[++i];
        else if (!strcmp(a, "--bpe-dir") && has) bpe_dir = argv[++i];
        else if (!strcmp(a, "--tokenizer-json") && has) tokenizer_json = argv[++i];
        else if (!strcmp(a, "--tokens") && has) { if (!option_number("sample", a, argv[++i], 1, 0, 1000000, &v)) return 2; tokens = (int)v; }
        else if (!strcmp(a, "--temperature") && has) { if (!option_number("sample", a, argv[++i], 0, 0, 1000, &temperature)) return 2; }
        else if (!strcmp(a, "--top-k") && has) { if (!option_number("sample", a, argv[++i], 1, 0, 65536, &v)) return 2; top_k = (int)v; }
        else if (!strcmp(a, "--seed") && has) { if (!option_number("sample", a, argv[++i], 1, 0, 2147483647, &v)) return 2; seed = (unsigned long long)v; }
        else if (a[0] == '-') { fprintf(stderr, "mgt sample: unknown option or missing value: %s\n\n", a); usage(stderr); return 2; }
        else if (checkpoint) { fprintf(stderr, "mgt sample: one checkpoint at a time (got %s and %s)\n", checkpoint, a); return 2; }
        else checkpoint = a;
    }
    if (!checkpoint) { fprintf(stderr, "mgt sample: needs a checkpoint file or folder, for example runs/quickstart\n"); return 2; }
    if ((r = mgt_run_open(&run, checkpoint, 0)) != MGT_OK) {
        int rc = fail(r);
        if (r == MGT_ERROR_CHECKPOINT) fprintf(stderr, "mgt sample takes a checkpoint (step_N.safetensors) or a run's folder, for example runs/quickstart\n");
        return rc;
    }
    cfg = mgt_run_config(run);
    if (cfg->data.tokenizer == MGT_TOKENIZER_HF) {
        kind = "hf", files = tokenizer_json ? tokenizer_json : cfg->data.tokenizer_json;
        key = tokenizer_json ? "" : " (the checkpoint's data.tokenizer_json; --tokenizer-json FILE names another file)";
    } else {
        kind = cfg->data.tokenizer == MGT_TOKENIZER_GPT2 ? "gpt2" : "byte", files = bpe_dir ? bpe_dir : cfg->data.bpe_dir;
        key = bpe_dir ? "" : " (the checkpoint's data.bpe_dir; --bpe-dir DIR names another folder)";
    }
    if (mgt_tok_open(&tok, kind, files, err, sizeof err)) {
        fprintf(stderr, "mgt sample: %s%s\n", err, key);
        mgt_run_destroy(run);
        return 2;
    }
    if (mgt_tok_vocab_size(tok) > cfg->model.vocab_size) {
        fprintf(stderr, "mgt sample: %s: %d tokens, more than the model's vocab_size = %d: not the tokenizer the model was trained with\n", files,
                mgt_tok_vocab_size(tok), cfg->model.vocab_size);
        mgt_tok_close(tok);
        mgt_run_destroy(run);
        return 2;
    }
    if (mgt_tok_encode(tok, prompt, strlen(prompt), &ids, &n_ids, &cap)) { fprintf(stderr, "mgt sample: out of memory\n"); return 1; }
    prompt_ids = (int *)malloc(sizeof(int) * (n_ids + 1));
    out = (int *)malloc(sizeof(int) * (size_t)(tokens + 1));
    for (i = 0; i < (int)n_ids; i++) prompt_ids[i] = (int)ids[i];
    if (n_ids == 0) prompt_ids[n_ids++] = mgt_tok_eot(tok) >= 0 ? mgt_tok_eot(tok) : '\n'; /* start of a document */
    n = mgt_run_generate(run, prompt_ids, (int)n_ids, out, tokens, temperature, top_k, seed);
    if (n < 0) rc = fail(MGT_ERROR_ARGUMENT);
    fputs(prompt, stdout);
    for (i = 0; i < n; i++) {
        const char *bytes;
        int len = mgt_tok_decode(tok, out[i], &bytes);
        if (len > 0) fwrite(bytes, 1, (size_t)len, stdout);
        else if (len < 0) printf("<|%d|>", out[i]); /* an id the tokenizer has no text for (a model's vocabulary beyond it): shown, not dropped */
    }
    fputc('\n', stdout);
    free(ids);
    free(prompt_ids);
    free(out);
    mgt_tok_close(tok);
    mgt_run_destroy(run);
    return rc;
}

static int cmd_export(int argc, char **argv) {
    const char *checkpoint = NULL, *dir = NULL;
    static const char *const written[] = {"config.json", "model.safetensors"}; /* what every export writes */
    char note[1024], path[1200];
    mgt_result r;
    int i, overwrite = 0;
    for (i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc) dir = argv[++i];
        else if (!strcmp(argv[i], "--overwrite")) overwrite = 1;
        else if (argv[i][0] == '-') {
            fprintf(stderr, "mgt export: unknown option or missing value: %s (usage: mgt export CHECKPOINT -o DIR [--overwrite])\n", argv[i]);
            return 2;
        }
        else if (checkpoint) { fprintf(stderr, "mgt export: one checkpoint at a time (got %s and %s)\n", checkpoint, argv[i]); return 2; }
        else checkpoint = argv[i];
    }
    if (!checkpoint || !dir) { fprintf(stderr, "mgt export: needs a checkpoint (file or run folder) and -o DIR, for example mgt export runs/finetune -o gpt2-tuned\n"); return 2; }
    for (i = 0; i < (int)(sizeof written / sizeof written[0]) && !overwrite; i++) { /* a model exported before is not replaced unasked */
        snprintf(path, sizeof path, "%s/%s", dir, written[i]);
        if (!access(path, F_OK)) {
            fprintf(stderr, "mgt export: %s already holds %s: export into another folder, or add --overwrite to replace what is there\n", dir, written[i]);
            return 2;
        }
    }
    if ((r = mgt_export(checkpoint, dir, note, sizeof note)) != MGT_OK) return fail(r);
    printf("wrote %s\n", note);
    return 0;
}

static int cmd_check(int argc, char **argv) {
    mgt_config cfg;
    options o;
    mgt_plan plan;
    mgt_result r;
    int rc, i, threads;
    char text[16384], grid[64];
    memset(&o, 0, sizeof o);
    if ((rc = parse_common(argc, argv, &cfg, &o, 1)) || (rc = choose_layout(&cfg))) return rc;
    int n_files[2] = {0, 0};
    size_t n_tokens[2] = {0, 0};
    for (i = 0; i < 2; i++) { /* the shards as a run reads them: every file of the globs, each long enough */
        const char *spec = i ? cfg.data.val : cfg.data.train;
        char where[300], name[400];
        mgt_config_where(&cfg, "data", i ? "val" : "train", where, sizeof where);
        snprintf(name, sizeof name, "%s%s[data] %s", where, where[0] ? ": " : "", i ? "val" : "train");
        if (spec[0] && (r = mgt_data_check(spec, name, cfg.model.vocab_size, cfg.model.seq_len, &n_files[i], &n_tokens[i])) != MGT_OK)
            return fail(r);
    }
    mgt_config_format(&cfg, text, sizeof text);
    printf("; %s, resolved\n%s\n", o.preset, text);
    for (i = 0; i < 2; i++)
        if (n_files[i]) printf("; data.%s: %d shard%s, %zu tokens\n", i ? "val" : "train", n_files[i], n_files[i] == 1 ? "" : "s", n_tokens[i]);
    if ((r = mgt_plan_make(&cfg, &plan)) != MGT_OK) return fail(r);
    threads = cfg.parallel.threads ? cfg.parallel.threads : mgt_cpu_count();
    printf("; layout\n");
    printf("ranks          %d = %s (TP fastest, then CP, DP, PP), zero %d, schedule %s, sp %d, device cpu\n", plan.world,
           mgt_grid_text(plan.dp, plan.cp, plan.tp, plan.pp, grid, sizeof grid), plan.zero, schedule_name(&cfg), cfg.parallel.sp);
    printf("threads        %d per rank (%d in all)\n", threads / plan.world > 0 ? threads / plan.world : 1, threads);
    printf("batch          %d sequences of %d tokens = %d micro-batches of %d per DP rank (gradient accumulation %s)\n", cfg.train.global_batch,
           cfg.model.seq_len, plan.micro_steps, cfg.train.micro_batch, plan.micro_steps > 1 ? "on" : "off");
    printf("parameters     %zu (%.2fM); vocabulary padded to %d rows, %d per TP rank\n", plan.params, (double)plan.params / 1e6, plan.Vp, plan.Vp / plan.tp);
    printf("stages        ");
    for (i = 0; i < plan.pp; i++) {
        char blocks[256];
        if (plan.pp == 1 || cfg.parallel.pp_virtual == 1) printf(" %d: blocks %d-%d", i, plan.stage_first[i], plan.stage_first[i + 1] - 1);
        else printf(" %d: blocks %s", i, stage_blocks(&plan, i, blocks, sizeof blocks));
        printf("%s%s;", i == 0 ? " +embedding" : "", i == plan.pp - 1 ? " +head" : "");
    }
    printf("\n\n rank  dp%s tp pp  blocks   local params  shard (1/%s)  tensors\n", cp_column(plan.cp, -1, grid, sizeof grid), plan.cp > 1 ? "dp cp" : "dp");
    for (i = 0; i < plan.world; i++) {
        mgt_rank_plan rp;
        if ((r = mgt_plan_rank(&plan, i, &rp)) != MGT_OK) return fail(r);
        char blocks[256];
        printf("%5d %3d%s %2d %2d  %-7s  %12zu  %12zu  %d%s%s\n", i, rp.dp, cp_column(plan.cp, rp.cp, grid, sizeof grid), rp.tp, rp.pp,
               stage_blocks(&plan, rp.pp, blocks, sizeof blocks), rp.params,
               plan.zero ? rp.shard : rp.params, rp.tensors, rp.pp == 0 ? " +embedding" : "", rp.pp == plan.pp - 1 ? " +head" : "");
    }
    printf("\nmemory by category (planned: what each rank allocates, as `mgt plan` shows)\n rank");
    for (i = 0; i < MGT_MEM_COUNT; i++) printf(" %11s", mgt_mem_category_name(i));
    printf("       total\n");
    for (i = 0; i < plan.world; i++) {
        mgt_rank_plan rp;
        char b[32];
        double total = 0;
        int c;
        if ((r = mgt_plan_rank(&plan, i, &rp)) != MGT_OK) return fail(r);
        if (plan.world > 16 && i >= 8 && i < plan.world - 8) { if (i == 8) printf("  ...\n"); continue; }
        printf("%5d", i);
        for (c = 0; c < MGT_MEM_COUNT; c++) {
            format_bytes((double)rp.mem[c], b, sizeof b);
            printf(" %11s", b);
            total += (double)rp.mem[c];
        }
        format_bytes(total, b, sizeof b);
        printf(" %11s\n", b);
    }
    { /* whether it fits this machine: the same check mgt train makes before it allocates */
        mgt_fit fit;
        r = mgt_plan_fit(&cfg, &fit);
        fflush(stdout);
        if (r != MGT_OK) return fail(r);
        printf("\n%s%s\n", fit.fits ? "" : "warning: ", fit.text);
    }
    return 0;
}

/* mgt plan --gpu NAME: one step of the layout simulated on NAME (mgt.h section 3d), printed as
   predicted: per rank, then for the step */
/* the calibration's scales on o (mgt_sim_calibrate), 0 or 2 with the reason on stderr */
static int calibrate(mgt_sim_calibration *cal, mgt_sim_options *o) {
    if (!cal) return 0;
    if (mgt_sim_calibrate(cal, o) != MGT_OK) {
        fprintf(stderr, "mgt plan: --calibrate: %s\n", mgt_last_error());
        return 2;
    }
    return 0;
}
static void print_calibration(const mgt_sim_calibration *cal) {
    int c;
    if (!cal) return;
    printf("calibrated from %s (measured on GPU %s, families", cal->path, cal->gpu);
    for (c = 0; c < MGT_SIM_FAMILIES; c++)
        if (cal->scale[c] > 0) printf(" %s x%.3f", mgt_sim_family_name(c), cal->scale[c]);
    printf("; the others as modelled)\n");
}

static int print_predicted(const mgt_config *cfg, const char *gpu, int per_node, const char *trace, mgt_sim_calibration *cal) {
    mgt_sim_options o;
    mgt_sim_result res;
    mgt_result r;
    char cpc[16];
    double fam[MGT_SIM_FAMILIES] = {0}, comm[MGT_COLL_COUNT] = {0}, exposed[MGT_COLL_COUNT] = {0}, bubble = 0, host = 0, compute = 0, scratch = 0;
    int i, c, world, slowest = 0, threads, fits;
    world = mgt_config_ranks(cfg);
    mgt_sim_options_init(&o);
    threads = cfg->parallel.threads > 0 ? cfg->parallel.threads : mgt_cpu_count();
    if ((r = mgt_sim_device_find(gpu, threads, &o.device)) != MGT_OK) {
        fprintf(stderr, "mgt plan: --gpu: %s\n", mgt_last_error());
        return 2;
    }
    if (o.device.host_sync) { /* the CPU: its cores are divided between the ranks, as mgt train divides them */
        char date[64];
        double peak = threads == mgt_cpu_count() ? machine_gemm(bf16_gemms(cfg), 0.3, 0, date, sizeof date) : 0;
        if (peak > 0) { /* the machine's peak as MFU takes it (the largest measured): MFU alike in plan and train */
            o.device.vector_tflops *= peak * 1e-3 / o.device.tensor_tflops[0];
            for (c = 0; c < 3; c++) o.device.tensor_tflops[c] = peak * 1e-3;
        }
        for (c = 0; c < 3; c++) o.device.tensor_tflops[c] /= world;
        o.device.vector_tflops /= world;
        o.device.transc_gps /= world;
    }
    o.gpus_per_node = per_node;
    o.trace = trace;
    if (calibrate(cal, &o)) return 2;
    if (o.device.host_sync) {
        fprintf(stderr, "mgt plan: running each op of a step once on this machine to price it (a few times one step's ops)...\n");
        fflush(stderr);
    }
    if ((r = mgt_sim_run(cfg, &o, &res)) != MGT_OK) return fail(r);
    fits = o.device.host_sync || res.mem_peak_gib <= o.device.mem_gib;
    if (o.device.host_sync)
        printf("\nPREDICTED one optimizer step on %d CPU rank%s of this machine (%d threads in all, %d a rank), by mgt's step simulator: the\n"
               "runtime with each op priced by running the CPU backend's op of its shape once (%d shapes; %lld ops by the model), collectives\n"
               "at the copy rate (%.1f GB/s); simulated in %.2f s\n\n", world, world > 1 ? "s" : "", threads, threads / world > 0 ? threads / world : 1,
               res.shapes_measured, res.ops_modelled, o.device.intra_gbps, res.wall_s);
    else
        printf("\nPREDICTED one optimizer step on %d x %s (%d per node), by mgt's step simulator: the runtime with modelled costs\n"
               "(a roofline per op, alpha-beta per collective; the assumptions are in README, \"Predicted speed\"); simulated in %.2f s\n%s",
               world, o.device.title, per_node, res.wall_s, cal ? "" : "\n");
    if (cal) {
        print_calibration(cal);
        printf("\n");
    }
    if (!o.device.host_sync) /* the CUDA backend's attention scratch of a micro-batch (a float per row and head), as the summary counts it */
        scratch = (double)cfg->train.micro_batch * (cfg->model.n_head / cfg->parallel.tp) * (double)(cfg->model.seq_len / cfg->parallel.cp) * sizeof(float) / 1073741824.0;
    printf(" rank  dp%s tp pp   step ms  compute    gemm  attention  other   exposed comm  bubble  host-bound  memory\n", cp_column(cfg->parallel.cp, -1, cpc, sizeof cpc));
    for (i = 0; i < res.world; i++) {
        const mgt_sim_rank *k = &res.ranks[i];
        double ex = 0, other = k->compute_s - k->busy_s[MGT_SIM_GEMM] - k->busy_s[MGT_SIM_ATTENTION], mem = 0;
        for (c = 0; c < MGT_COLL_COUNT; c++) ex += k->exposed_s[c];
        for (c = 0; c < MGT_MEM_COUNT; c++) mem += (double)k->mem_peak[c];
        if (k->step_s - k->compute_s < res.ranks[slowest].step_s - res.ranks[slowest].compute_s) slowest = i; /* the busiest rank */
        if (res.world > 16 && i >= 8 && i < res.world - 8) { if (i == 8) printf("  ...\n"); continue; }
        printf("%5d %3d%s %2d %2d %9.2f %8.2f %7.2f %10.2f %6.2f %14.2f %7.2f %11.2f %6.1f GiB\n", i, k->dp,
               cp_column(cfg->parallel.cp, i / cfg->parallel.tp % cfg->parallel.cp, cpc, sizeof cpc), k->tp, k->pp, k->step_s * 1e3, k->compute_s * 1e3,
               k->busy_s[MGT_SIM_GEMM] * 1e3, k->busy_s[MGT_SIM_ATTENTION] * 1e3, other * 1e3, ex * 1e3, k->bubble_s * 1e3, k->host_s * 1e3,
               mem / 1073741824.0 + o.device.reserve_gib + scratch);
    }
    {
        const mgt_sim_rank *k = &res.ranks[slowest];
        for (c = 0; c < MGT_SIM_FAMILIES; c++) fam[c] = k->busy_s[c];
        for (c = 0; c < MGT_COLL_COUNT; c++) { comm[c] = k->comm_s[c]; exposed[c] = k->exposed_s[c]; }
        bubble = k->bubble_s;
        host = k->host_s;
        compute = k->compute_s;
    }
    printf("\nthe step, as its busiest rank (%d) spends it (PREDICTED):\n", slowest);
    printf("  compute        %9.2f ms:", compute * 1e3);
    for (c = 0; c < MGT_SIM_FAMILIES; c++) if (fam[c] > 0) printf(" %s %.2f", mgt_sim_family_name(c), fam[c] * 1e3);
    if (res.world == 1) printf("\n  communication  none (one rank)\n");
    else {
        printf("\n  communication  (time on the communication stream, and what the compute waited for it)\n");
        for (c = 0; c < MGT_COLL_COUNT; c++)
            if (comm[c] > 0) printf("    %-15s %9.2f ms, exposed %.2f ms\n", mgt_coll_name(c), comm[c] * 1e3, exposed[c] * 1e3);
    }
    printf("  bubble         %9.2f ms (waiting for pipeline peers)\n", bubble * 1e3);
    if (host > 0) printf("  host-bound     %9.2f ms (the device waiting for kernel launches)\n", host * 1e3);
    printf("  step           %9.2f ms\n", res.step_s * 1e3);
    if (!fits) /* a speed the layout cannot have: it would not start */
        printf("  tokens/s             n/a: the layout does not fit (%.2f GiB on the fullest GPU of %.0f)\n  MFU                  n/a\n", res.mem_peak_gib,
               o.device.mem_gib);
    else printf("  tokens/s       %9.0f (%.0f per %s)\n", res.tokens_per_s, res.tokens_per_s / res.world, o.device.host_sync ? "rank" : "GPU");
    if (fits && o.device.host_sync)
        printf("  MFU            %9.1f %% (%.3g GFLOP/token against the machine's sgemm, %.1f GFLOP/s)\n", 100 * res.mfu, res.flops_per_token * 1e-9,
               o.device.tensor_tflops[cfg->precision.dtype] * 1e3 * world);
    else if (fits)
        printf("  MFU            %9.1f %% (%.3g GFLOP/token against %.1f TFLOP/s dense per GPU)\n", 100 * res.mfu, res.flops_per_token * 1e-9,
               o.device.tensor_tflops[cfg->precision.dtype]);
    if (o.device.host_sync) printf("  memory         %9.2f GiB on the fullest rank (what the runtime allocates)\n", res.mem_peak_gib);
    else
        printf("  memory         %9.2f GiB on the fullest GPU (of %.0f GiB), with %.1f GiB for the CUDA context, cuBLAS and NCCL\n"
               "                 and the attention scratch of a micro-batch%s\n",
               res.mem_peak_gib, o.device.mem_gib, o.device.reserve_gib, res.mem_peak_gib > o.device.mem_gib ? ": DOES NOT FIT" : "");
    if (trace) printf("  trace          %s (Chrome trace JSON: chrome://tracing or ui.perfetto.dev)\n", trace);
    mgt_sim_result_free(&res);
    if (!fits) fprintf(stderr, "mgt plan: the layout does not fit %s's %.0f GiB (exit 1): `mgt plan PRESET --gpu %s --gpus N --search` lists the layouts that do\n",
                       o.device.title, o.device.mem_gib, gpu);
    return fits ? 0 : 1;
}

/* the fullest rank's activations and total memory under each train.recompute, side by side */
static void print_recompute_choices(const mgt_config *cfg) {
    static const int modes[3] = {MGT_RECOMPUTE_NONE, MGT_RECOMPUTE_SELECTIVE, MGT_RECOMPUTE_FULL};
    int m, i, k;
    printf("\nthe fullest rank by train.recompute (activations / total):");
    for (m = 0; m < 3; m++) {
        mgt_config c = *cfg;
        mgt_plan plan;
        size_t act = 0, total = 0;
        char a[16], t[16];
        c.train.recompute = modes[m];
        if (mgt_plan_make(&c, &plan) != MGT_OK) continue;
        for (i = 0; i < plan.world; i++) {
            mgt_rank_plan p;
            size_t sum = 0;
            if (mgt_plan_rank(&plan, i, &p) != MGT_OK) break;
            for (k = 0; k < MGT_MEM_COUNT; k++) sum += p.mem[k];
            if (p.mem[MGT_MEM_ACTIVATIONS] > act) act = p.mem[MGT_MEM_ACTIVATIONS];
            if (sum > total) total = sum;
        }
        format_bytes((double)act, a, sizeof a);
        format_bytes((double)total, t, sizeof t);
        printf("%s %s %s / %s%s", m ? "," : "", mgt_recompute_name(modes[m]), a, t, modes[m] == cfg->train.recompute ? " (this preset)" : "");
    }
    printf("\n");
}

/* mgt plan --search: the fastest ten layouts of `world` GPUs that fit (mgt_plan_search), PREDICTED */
static int search_layouts(const mgt_config *base, const char *gpu, int world, int per_node, mgt_sim_calibration *cal) {
    mgt_sim_options o;
    mgt_layout_search found;
    int i;
    mgt_sim_options_init(&o);
    if (mgt_sim_device_find(gpu, 0, &o.device) != MGT_OK || o.device.host_sync) {
        fprintf(stderr, "mgt plan: --search is for GPUs (a100, h100, h200, b200)\n");
        return 2;
    }
    o.gpus_per_node = per_node;
    if (calibrate(cal, &o)) return 2;
    if (mgt_plan_search(base, &o, world, &found) != MGT_OK) return fail(MGT_ERROR_MEMORY);
    if (found.failed) fprintf(stderr, "mgt plan: --search: %d layout%s the simulator refused, the last: %s\n", found.failed, found.failed == 1 ? "" : "s", mgt_last_error());
    if (!found.count) {
        printf("\nPREDICTED: no layout of %d x %s fits its %.0f GiB (with global batch %d)\n", world, o.device.title, o.device.mem_gib, base->train.global_batch);
        mgt_layout_search_free(&found);
        return 1;
    }
    printf("\nPREDICTED fastest layouts of %d x %s (%d per node), global batch %d: %d layouts fit and were simulated in %.1f s\n\n", world,
           o.device.title, per_node, base->train.global_batch, found.count, found.wall_s);
    if (cal) {
        print_calibration(cal);
        printf("\n");
    }
    printf("   dp  tp  pp zero micro recompute schedule   step ms   tokens/s    MFU  memory GiB  bubble ms  exposed comm ms (rank 0)\n");
    for (i = 0; i < found.count && i < 10; i++) {
        const mgt_layout_choice *c = &found.layouts[i];
        printf("%5d %3d %3d %4d %5d %9s %8s %9.2f %10.0f %5.1f%% %11.1f %10.2f %10.2f\n", c->dp, c->tp, c->pp, c->zero, c->micro_batch,
               mgt_recompute_name(c->recompute), c->pp > 1 ? (c->pp_schedule == 2 ? "zb" : c->pp_schedule ? "gpipe" : "1f1b") : "-", c->step_s * 1e3, c->tokens_per_s,
               100 * c->mfu, c->mem_gib, c->bubble_s * 1e3, c->exposed_s * 1e3);
    }
    mgt_layout_search_free(&found);
    return 0;
}

/* mgt plan PRESET [--gpus N]: what each rank holds and moves per step, from the closed-form plan */
static int cmd_plan(int argc, char **argv) {
    mgt_config cfg;
    options o;
    int rc, i, c, gpus = 0, world;
    double total[MGT_COLL_COUNT] = {0}, v;
    char mem[MGT_MEM_COUNT][16], set[64], cpc[16];
    mgt_plan plan;
    const char *gpu = NULL, *trace = NULL, *calibrate_path = NULL;
    mgt_sim_calibration *cal = NULL;
    int per_node = 8, search = 0;
    { /* plan's own options, taken out of argv (kept in order) before parse_common reads the rest */
        int kept = 2;
        for (i = 2; i < argc; i++) {
            int has = i + 1 < argc;
            if (!strcmp(argv[i], "--search")) search = 1;
            else if (!strcmp(argv[i], "--gpus") && has) {
                if (!option_number("plan", "--gpus", argv[++i], 1, 1, 4096, &v)) return 2;
                gpus = (int)v;
            } else if (!strcmp(argv[i], "--gpus-per-node") && has) {
                if (!option_number("plan", "--gpus-per-node", argv[++i], 1, 1, 4096, &v)) return 2;
                per_node = (int)v;
            } else if (!strcmp(argv[i], "--gpu") && has) gpu = argv[++i];
            else if (!strcmp(argv[i], "--trace") && has) trace = argv[++i];
            else if (!strcmp(argv[i], "--calibrate") && has) calibrate_path = argv[++i];
            else argv[kept++] = argv[i];
        }
        argv[kept] = NULL;
        argc = kept;
    }
    if (calibrate_path && !gpu) { fprintf(stderr, "mgt plan: --calibrate needs --gpu NAME (the GPU whose model it calibrates)\n"); return 2; }
    if (calibrate_path) { /* read before anything is printed: a bad file names its line and exits 2 */
        static mgt_sim_calibration cal_file;
        if (mgt_sim_calibration_read(calibrate_path, &cal_file) != MGT_OK) {
            fprintf(stderr, "mgt plan: --calibrate: %s\n", mgt_last_error());
            return 2;
        }
        cal = &cal_file;
    }
    if ((trace || search) && !gpu) { fprintf(stderr, "mgt plan: %s needs --gpu NAME (the device whose step it simulates)\n", trace ? "--trace" : "--search"); return 2; }
    if (gpu) { /* a known name, before anything is printed */
        const mgt_sim_device *table;
        char lower[32] = "";
        int n = mgt_sim_devices(&table), k;
        for (k = 0; gpu[k] && k < 31; k++) lower[k] = (char)(gpu[k] >= 'A' && gpu[k] <= 'Z' ? gpu[k] + 32 : gpu[k]);
        lower[k] = 0;
        for (k = 0; k < n && strcmp(lower, table[k].name); k++) {}
        if (k == n) { fprintf(stderr, "mgt plan: --gpu %s: unknown device (a100, h100, h200, b200 or cpu)\n", gpu); return 2; }
        if (calibrate_path && table[k].host_sync) { fprintf(stderr, "mgt plan: --calibrate rescales a GPU's model; the cpu device measures its ops itself\n"); return 2; }
    }
    memset(&o, 0, sizeof o);
    if ((rc = parse_common(argc, argv, &cfg, &o, 1))) return rc;
    if (cfg.parallel.layout == MGT_LAYOUT_AUTO && gpu && !search) { /* auto chooses for the machine that trains, not for a simulated one */
        fprintf(stderr, "mgt plan: [parallel] layout = auto chooses the layout on the machine that trains; `mgt plan PRESET --gpu %s --gpus N --search` "
                        "lists the layouts it would choose from there\n", gpu);
        return 2;
    }
    if (!search && (rc = choose_layout(&cfg))) return rc;
    world = mgt_config_ranks(&cfg);
    if (gpus > 0 && gpus != world) { /* fill the machine with data parallelism */
        int other = cfg.parallel.cp * cfg.parallel.tp * cfg.parallel.pp;
        if (gpus % other) {
            fprintf(stderr, "mgt plan: --gpus %d does not divide by cp x tp x pp = %d\n", gpus, other);
            return 2;
        }
        char option[32];
        snprintf(set, sizeof set, "parallel.dp=%d", gpus / other);
        snprintf(option, sizeof option, "--gpus %d", gpus);
        if (mgt_config_set_from(&cfg, set, option) != MGT_OK || mgt_config_validate(&cfg) != MGT_OK) return fail(MGT_ERROR_CONFIG);
        world = gpus;
    }
    if (search) return search_layouts(&cfg, gpu, world, per_node, cal);
    if (mgt_plan_make(&cfg, &plan) != MGT_OK) return fail(MGT_ERROR_CONFIG);
    {
        static const char *dtypes[] = {"fp32", "bf16", "fp16"};
        char grid[64];
        printf("plan of %s: %d rank%s = %s, zero %d%s%s%s, %s, micro_batch %d, recompute %s\n\n", o.preset, world, world == 1 ? "" : "s",
               mgt_grid_text(cfg.parallel.dp, cfg.parallel.cp, cfg.parallel.tp, cfg.parallel.pp, grid, sizeof grid),
               cfg.parallel.dp * cfg.parallel.cp > 1 ? cfg.parallel.zero : 0, cfg.parallel.pp > 1 ? ", " : "",
               cfg.parallel.pp > 1 ? schedule_name(&cfg) : "",
               cfg.parallel.sp ? ", sequence parallel" : "",
               dtypes[cfg.precision.dtype >= 0 && cfg.precision.dtype < 3 ? cfg.precision.dtype : 0], cfg.train.micro_batch, mgt_recompute_name(cfg.train.recompute));
    }
    printf(" rank  dp%s tp pp  blocks      params      grads  optimizer  activations    buffers      total\n", cp_column(plan.cp, -1, cpc, sizeof cpc));
    for (i = 0; i < world; i++) {
        mgt_rank_plan p;
        size_t sum = 0;
        if (mgt_plan_rank(&plan, i, &p) != MGT_OK) return fail(MGT_ERROR_CONFIG);
        for (c = 0; c < MGT_MEM_COUNT; c++) { format_bytes((double)p.mem[c], mem[c], sizeof mem[c]); sum += p.mem[c]; }
        for (c = 0; c < MGT_COLL_COUNT; c++) total[c] += p.bytes[c];
        if (world > 16 && i >= 8 && i < world - 8) { if (i == 8) printf("  ...\n"); continue; }
        format_bytes((double)sum, set, sizeof set);
        char blocks[256];
        printf("%5d %3d%s %2d %2d  %-7s %11s %10s %10s %12s %10s %10s\n", i, p.dp, cp_column(plan.cp, p.cp, cpc, sizeof cpc), p.tp, p.pp,
               stage_blocks(&plan, p.pp, blocks, sizeof blocks), mem[MGT_MEM_PARAMS],
               mem[MGT_MEM_GRADS], mem[MGT_MEM_OPTIMIZER], mem[MGT_MEM_ACTIVATIONS], mem[MGT_MEM_BUFFERS], set);
    }
    print_recompute_choices(&cfg);
    if (cfg.parallel.device == MGT_DEVICE_CUDA) { /* the CUDA backend's own memory (issue 13): the busiest rank's */
        mgt_rank_plan p, most;
        char s[4][16];
        memset(&most, 0, sizeof most);
        for (i = 0; i < world && mgt_plan_rank(&plan, i, &p) == MGT_OK; i++)
            if (p.cuda_scratch + p.cuda_nccl_estimate >= most.cuda_scratch + most.cuda_nccl_estimate) most = p;
        format_bytes((double)most.cuda_scratch, s[0], sizeof s[0]);
        format_bytes((double)most.cuda_attention, s[1], sizeof s[1]);
        format_bytes((double)most.cuda_cublas, s[2], sizeof s[2]);
        format_bytes((double)most.cuda_nccl_estimate, s[3], sizeof s[3]);
        format_bytes((double)most.cuda_context_estimate, set, sizeof set);
        printf("\nper GPU, the CUDA backend's own: scratch %s (attention %s) and cuBLAS workspace %s, in the totals; not in them,\n"
               "estimates: NCCL's buffers about %s (%d communicator%s) and the CUDA context about %s\n", s[0], s[1], s[2], s[3],
               most.cuda_communicators, most.cuda_communicators == 1 ? "" : "s", set);
    }
    if (world == 1) printf("\nbytes moved per step: none (one rank)\n");
    else {
        printf("\nbytes moved per step, all ranks (each rank counts what it sends or receives):\n");
        for (c = 0; c < MGT_COLL_COUNT; c++) {
            format_bytes(total[c], set, sizeof set);
            if (total[c] > 0) printf("  %-15s %s\n", mgt_coll_name(c), set);
        }
    }
    return gpu ? print_predicted(&cfg, gpu, per_node, trace, cal) : 0;
}

static int cmd_keys(int argc, char **argv) {
    int n, i, markdown = argc > 2 && !strcmp(argv[2], "--markdown");
    if (argc > 2 + markdown) { fprintf(stderr, "mgt keys: unknown option %s (usage: mgt keys [--markdown])\n", argv[2 + markdown]); return 2; }
    const mgt_key_info *k = mgt_config_keys(&n);
    if (markdown) printf("| key | type | default | valid | meaning |\n|---|---|---|---|---|\n");
    for (i = 0; i < n; i++) {
        char valid[64];
        if (k[i].choices[0]) snprintf(valid, sizeof valid, "%s", k[i].choices);
        else if (!strcmp(k[i].type, "STR")) snprintf(valid, sizeof valid, "path");
        else if (!strcmp(k[i].type, "INT")) snprintf(valid, sizeof valid, "%.0f..%.0f", k[i].min, k[i].max); /* 16777216, not 1.67772e+07 */
        else snprintf(valid, sizeof valid, "%g..%g", k[i].min, k[i].max);
        char name[80];
        snprintf(name, sizeof name, "%s.%s", k[i].section, k[i].name);
        if (markdown) { /* a '|' inside a cell would end it: the choices' separators escaped */
            char cell[128];
            size_t at = 0, j;
            for (j = 0; valid[j] && at + 3 < sizeof cell; j++) {
                if (valid[j] == '|') cell[at++] = '\\';
                cell[at++] = valid[j];
            }
            cell[at] = 0;
            printf("| `%s` | %s | `%s` | %s | %s |\n", name, k[i].type, k[i].def, cell, k[i].help);
        }
        else printf("%-22s %-5s %-26s %-22s %s\n", name, k[i].type, k[i].def[0] ? k[i].def : "\"\"", valid, k[i].help);
    }
    return 0;
}

/* ---- mgt prepare: the command line of data/prepare.h's mgt_prepare ---- */

static void prepare_usage(FILE *f, int full) {
    fprintf(f, "usage: mgt prepare [--tokenizer byte|gpt2|hf] [--bpe-dir DIR] [--tokenizer-json FILE] "
            "[--val-fraction F] INPUT... -o PREFIX\n");
    if (!full) return;
    fprintf(f,
        "  Tokenizes the text files INPUT... into PREFIX_train.bin and PREFIX_val.bin.\n"
        "  --tokenizer byte|gpt2|hf  byte: one token per byte (vocabulary 256, default);\n"
        "                          gpt2: GPT-2 BPE (vocabulary 50257, end-of-text before each input)\n"
        "                          hf: a Hugging Face tokenizer.json of byte-level BPE (Llama 3, SmolLM)\n"
        "  --bpe-dir DIR           directory with encoder.json and vocab.bpe (default data/gpt2-bpe)\n"
        "  --tokenizer-json FILE   the tokenizer.json of --tokenizer hf\n"
        "  --val-fraction F        the last fraction F of the tokens goes to PREFIX_val.bin,\n"
        "                          0 <= F <= 0.5 (default 0.1)\n"
        "  -o, --output PREFIX     output prefix (required)\n");
}

/* argv[*i] as `name VALUE` (taking the next argument) or `name=VALUE`: the value; NULL when it is
   another option, or when the value is missing (*missing set) */
static const char *prepare_option(int argc, char **argv, int *i, const char *name, int *missing) {
    size_t k = strlen(name);
    const char *a = argv[*i];
    if (strncmp(a, name, k) != 0) return NULL;
    if (a[k] == '=') return a + k + 1;
    if (a[k] != 0) return NULL;
    if (*i + 1 >= argc) { *missing = 1; return NULL; }
    return argv[++*i];
}

/* The arguments in order into opt (inputs into `inputs`, opt->inputs' storage), the value of
   --val-fraction as typed into *val_fraction. Returns -1 to go on, else the exit code: 0 after
   --help, 2 for a wrong argument (said). */
static int prepare_parse(int argc, char **argv, mgt_prepare_options *opt, const char **inputs, const char **val_fraction) {
    int i, only_inputs = 0;
    for (i = 2; i < argc; i++) {
        const char *a = argv[i], *v;
        int missing = 0;
        if (only_inputs || a[0] != '-' || a[1] == 0) { inputs[opt->ninputs++] = a; continue; }
        if (strcmp(a, "--") == 0) { only_inputs = 1; continue; }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            prepare_usage(stdout, 1);
            return 0;
        }
        if ((v = prepare_option(argc, argv, &i, "--tokenizer", &missing)) != NULL) opt->tokenizer = v;
        else if ((v = prepare_option(argc, argv, &i, "--bpe-dir", &missing)) != NULL) opt->bpe_dir = v;
        else if ((v = prepare_option(argc, argv, &i, "--tokenizer-json", &missing)) != NULL) opt->tokenizer_json = v;
        else if ((v = prepare_option(argc, argv, &i, "--val-fraction", &missing)) != NULL) *val_fraction = v;
        else if ((v = prepare_option(argc, argv, &i, "--output", &missing)) != NULL) opt->prefix = v;
        else if ((v = prepare_option(argc, argv, &i, "-o", &missing)) != NULL) opt->prefix = v;
        if (missing) {
            fprintf(stderr, "mgt prepare: %s: missing value (see mgt prepare --help)\n", a);
            return 2;
        }
        if (!v) {
            fprintf(stderr, "mgt prepare: %s: unknown option\n", a);
            prepare_usage(stderr, 1);
            return 2;
        }
    }
    return -1;
}

/* The options as the command line gave them, said with its own names before the library sees
   them: -1 to go on, or 2 (said). */
static int prepare_check(mgt_prepare_options *opt, const char *val_fraction) {
    const char *kind = opt->tokenizer;
    if (strcmp(kind, "byte") != 0 && strcmp(kind, "gpt2") != 0 && strcmp(kind, "hf") != 0) {
        fprintf(stderr, "mgt prepare: --tokenizer: unknown tokenizer '%s' (use byte, gpt2 or hf)\n", kind);
        return 2;
    }
    if (!strcmp(kind, "hf") && (!opt->tokenizer_json || !*opt->tokenizer_json)) {
        fprintf(stderr, "mgt prepare: --tokenizer hf needs --tokenizer-json FILE, a Hugging Face tokenizer.json\n");
        return 2;
    }
    if (val_fraction) {
        char *end;
        errno = 0;
        opt->val_fraction = strtod(val_fraction, &end);
        if (end == val_fraction || *end != 0 || errno != 0 || opt->val_fraction != opt->val_fraction) {
            fprintf(stderr, "mgt prepare: --val-fraction: '%s' is not a number (valid: 0 to 0.5, e.g. --val-fraction 0.1)\n", val_fraction);
            return 2;
        }
        if (!(opt->val_fraction >= 0.0 && opt->val_fraction <= 0.5)) {
            fprintf(stderr, "mgt prepare: --val-fraction: %s is out of range (valid: 0 to 0.5, e.g. --val-fraction 0.1)\n", val_fraction);
            return 2;
        }
    }
    if (!opt->prefix || !*opt->prefix) {
        fprintf(stderr, "mgt prepare: missing -o PREFIX (the outputs are PREFIX_train.bin and PREFIX_val.bin)\n");
        prepare_usage(stderr, 0);
        return 2;
    }
    if (opt->ninputs == 0) {
        fprintf(stderr, "mgt prepare: no INPUT files (give one or more text files)\n");
        prepare_usage(stderr, 0);
        return 2;
    }
    return -1;
}

/* the progress line, rewritten in place on stderr every 0.25 s at most: on a terminal, and in a log
   for inputs over 4 MiB (a run long enough to want it) */
#define PREPARE_PROGRESS_BYTES (4u << 20)
typedef struct prepare_progress {
    int terminal;
    double last_s;
    size_t width; /* the widest line written: the next one covers it */
} prepare_progress;

static void prepare_progress_line(void *user, const mgt_prepare_progress *p) {
    prepare_progress *pg = (prepare_progress *)user;
    char line[160];
    int k;
    if (!(pg->terminal || p->bytes_total > PREPARE_PROGRESS_BYTES) || p->seconds - pg->last_s < 0.25) return;
    pg->last_s = p->seconds;
    if (p->bytes_total > 0)
        k = snprintf(line, sizeof line, "prepare: %.1f / %.1f MB (%.0f%%), %lu tokens, %.1f MB/s", p->bytes_done / 1e6, p->bytes_total / 1e6,
                     100.0 * (double)p->bytes_done / (double)p->bytes_total, (unsigned long)p->tokens, p->bytes_done / 1e6 / (p->seconds + 1e-9));
    else
        k = snprintf(line, sizeof line, "prepare: %.1f MB, %lu tokens", p->bytes_done / 1e6, (unsigned long)p->tokens);
    if (k > 0 && (size_t)k > pg->width) pg->width = (size_t)k;
    fprintf(stderr, "\r%-*s", (int)pg->width, line);
    fflush(stderr);
}

/* prepare's last lines: what it wrote over the progress line, and a warning for each shard that no
   preset could read */
static void prepare_report(const mgt_prepare_options *opt, const mgt_prepare_result *res, const prepare_progress *pg) {
    char line[256];
    size_t n_total = res->train_tokens + res->val_tokens, counts[2];
    const char *names[2] = {"train", "val"};
    int k = snprintf(line, sizeof line, "prepare: %lu bytes -> %lu tokens (train %lu, val %lu, %d-bit shards) in %.2f s", (unsigned long)res->bytes,
                     (unsigned long)n_total, (unsigned long)res->train_tokens, (unsigned long)res->val_tokens, 8 * res->width, res->seconds);
    fprintf(stderr, "%s%-*s\n", pg->width ? "\r" : "", k > (int)pg->width ? k : (int)pg->width, line);
    if (res->val_tokens == 0)
        fprintf(stderr, "mgt prepare: warning: %s_val.bin is empty (--val-fraction %g of %lu tokens is less than one token)\n", opt->prefix,
                opt->val_fraction, (unsigned long)n_total);
    /* mgt train refuses a shard shorter than one sequence (seq_len + 1 tokens): said now, against the quick start's seq_len 128 */
    counts[0] = res->train_tokens, counts[1] = res->val_tokens;
    for (k = 0; k < 2; k++)
        if (counts[k] > 0 && counts[k] < 129)
            fprintf(stderr, "mgt prepare: warning: %s_%s.bin holds %lu tokens: a preset reads it only with [model] "
                    "seq_len %lu or less (a sequence is seq_len + 1 tokens; the quick start's is 128): give more text%s\n",
                    opt->prefix, names[k], (unsigned long)counts[k], (unsigned long)(counts[k] - 1), k ? " or a larger --val-fraction" : "");
}

/* Exit 0, 2 for a wrong argument or input (nothing written), 1 when the shards could not be written. */
static int cmd_prepare(int argc, char **argv) {
    mgt_prepare_options opt;
    mgt_prepare_result res;
    prepare_progress pg;
    const char **inputs = (const char **)malloc((size_t)argc * sizeof *inputs), *val_fraction = NULL;
    char err[1024];
    int rc;
    if (!inputs) { fprintf(stderr, "mgt prepare: out of memory\n"); return 1; }
    mgt_prepare_options_init(&opt);
    opt.inputs = inputs;
    if ((rc = prepare_parse(argc, argv, &opt, inputs, &val_fraction)) >= 0 || (rc = prepare_check(&opt, val_fraction)) >= 0) {
        free(inputs);
        return rc;
    }
    memset(&pg, 0, sizeof pg);
    pg.terminal = isatty(2);
    opt.progress = prepare_progress_line;
    opt.user = &pg;
    rc = mgt_prepare(&opt, &res, err, sizeof err);
    if (rc != 0) {
        if (pg.width) fprintf(stderr, "\n");
        fprintf(stderr, "mgt prepare: %s%s\n", err, rc == MGT_PREP_ERROR_TOKENIZER && !strcmp(opt.tokenizer, "gpt2") ? " (`./setup.sh --gpt2` "
                "fetches GPT-2's encoder.json and vocab.bpe into data/gpt2-bpe; or pass --bpe-dir DIR, a directory that has them)" : "");
    } else prepare_report(&opt, &res, &pg);
    free(inputs);
    return rc == 0 ? 0 : rc == MGT_PREP_ERROR_OUTPUT ? 1 : 2;
}

/* How much of their cores `threads` threads get when they all compute: the mean over them of
   CPU time / wall time spinning for `seconds` (about 1 on a quiet machine; 0.5 where as much other
   work runs). A busy machine makes a benchmark low, and a baseline taken then would make every
   later speedup look high. */
typedef struct spin_arg { double seconds, share; } spin_arg;
static void *spin_main(void *p) {
    spin_arg *a = (spin_arg *)p;
    struct timespec c0, c1;
    volatile unsigned long x = 0;
    double w0 = mgt_now(), wall;
    int i;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    while ((wall = mgt_now() - w0) < a->seconds)
        for (i = 0; i < 100000; i++) x = x + 1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    a->share = ((double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) * 1e-9) / wall;
    return NULL;
}
static double cpu_share(int threads, double seconds) {
    pthread_t th[256];
    spin_arg a[256];
    double sum = 0;
    int i, n = threads < 1 ? 1 : threads > 256 ? 256 : threads, started = 0;
    for (i = 0; i < n; i++) {
        a[i].seconds = seconds, a[i].share = 0;
        if (pthread_create(&th[i], NULL, spin_main, &a[i]) != 0) break;
        started++;
    }
    for (i = 0; i < started; i++) pthread_join(th[i], NULL), sum += a[i].share;
    return started ? sum / started : 1;
}

/* GFLOP/s of an n x n x n sgemm on the calling thread alone (BLAS single-threaded, as a rank's
   pool calls it), the median of repetitions over about half a second */
static double bench_sgemm_1thread(int n) {
    float *a = (float *)calloc((size_t)n * (size_t)n, sizeof(float)), *b = (float *)calloc((size_t)n * (size_t)n, sizeof(float));
    float *c = (float *)calloc((size_t)n * (size_t)n, sizeof(float));
    double t = 0, rates[64], flops = 2.0 * n * n * (double)n;
    int reps = 0, i, j;
    for (i = 0; i < n * n; i++) { a[i] = (float)(i % 7) * 0.1f; b[i] = (float)(i % 5) * 0.1f; }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n); /* warms caches and BLAS buffers */
    while (reps < 64 && (reps < 3 || t < 0.5)) {
        double t0 = mgt_now(), dt;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        dt = mgt_now() - t0;
        t += dt;
        rates[reps++] = flops / dt * 1e-9;
    }
    for (i = 1; i < reps; i++) for (j = i; j > 0 && rates[j] < rates[j - 1]; j--) { double x = rates[j]; rates[j] = rates[j - 1]; rates[j - 1] = x; }
    free(a); free(b); free(c);
    return rates[reps / 2];
}

static int cmd_bench(int argc, char **argv) {
    mgt_config cfg;
    options o;
    mgt_run *run;
    mgt_result r;
    mgt_stats st;
    int rc, i, steps, warmup = 2, rows, vocab, gpus, ranks;
    uint32_t *tokens;
    double t0, elapsed, tok_s, gflops, sgemm1, machine = 0, peak = 0, share = 1, *bubble;
    mgt_rank_stats *rank_st;
    char measured[64], peak_source[256] = "";
    memset(&o, 0, sizeof o);
    if ((rc = parse_common(argc, argv, &cfg, &o, 1)) || (rc = choose_layout(&cfg))) return rc;
    steps = o.steps > 0 ? o.steps : 5;
    cfg.data.train[0] = cfg.data.val[0] = 0;  /* synthetic tokens: the benchmark needs no data */
    strcpy(cfg.log.metrics, "none"); /* a benchmark writes no record of a run and takes no folder */
    cfg.log.tensorboard[0] = 0;
    cfg.checkpoint.every = 0;
    cfg.train.steps = warmup + steps;
    if ((r = mgt_run_create(&run, &cfg)) != MGT_OK) return fail(r);
    if (mgt_run_process(run, NULL) > 0 && !freopen("/dev/null", "w", stdout)) { mgt_run_destroy(run); return fail(MGT_ERROR_IO); } /* process 0 reports */
    mgt_run_stats(run, &st);
    printf("bench %s: %.2fM parameters, L=%d NH=%d C=%d T=%d V=%d, batch %d (micro %d), recompute %s, %d threads\n", o.preset, (double)st.params / 1e6,
           cfg.model.n_layer, cfg.model.n_head, cfg.model.d_model, cfg.model.seq_len, cfg.model.vocab_size, cfg.train.global_batch,
           cfg.train.micro_batch, mgt_recompute_name(cfg.train.recompute), st.threads);
    fflush(stdout);
    ranks = plan_world(&cfg);
    gpus = !strcmp(mgt_run_device(run), "cuda");
    if (cfg.parallel.peak_gflops > 0) peak = cfg.parallel.peak_gflops * ranks, snprintf(peak_source, sizeof peak_source, "[parallel] peak_gflops x ranks");
    else if (gpus) peak = gpu_peak_gflops(cfg.precision.dtype, peak_source, sizeof peak_source) * ranks;
    if (!gpus) { /* the CPU's matrix rate: what a step on this machine's cores can reach */
        int bf16 = bf16_gemms(&cfg);
        sgemm1 = bench_sgemm_1thread(1024);
        machine = machine_gemm(0, 2.0, 1, measured, sizeof measured);
        printf("sgemm 1024^3:   %.1f GFLOP/s on 1 thread; %.1f GFLOP/s on the machine's %d threads together (the median over 2 s)%s\n",
               sgemm1, machine, mgt_cpu_count(), peak > 0 || bf16 ? "" : ": the peak of MFU");
        if (bf16) { /* a bf16 run multiplies through oneDNN: its rate is the peak */
            char how[300];
            mgt_cpu_bf16_gemm(how, sizeof how);
            machine = machine_gemm(1, 2.0, 1, measured, sizeof measured);
            printf("bf16 1024^3:    %.1f GFLOP/s on the machine's %d threads together (%s)%s\n", machine, mgt_cpu_count(), how,
                   peak > 0 ? "" : ": the peak of MFU");
        }
        if (peak <= 0) peak = machine, snprintf(peak_source, sizeof peak_source, "this machine's %s", gemm_name(bf16));
        fflush(stdout);
    }
    rows = cfg.train.global_batch * (cfg.model.seq_len + 1);
    vocab = cfg.data.tokenizer == MGT_TOKENIZER_GPT2 ? 50257 : cfg.data.tokenizer == MGT_TOKENIZER_HF ? cfg.model.vocab_size : 256;
    tokens = (uint32_t *)malloc(sizeof(uint32_t) * (size_t)rows);
    for (i = 0; i < rows; i++) tokens[i] = (uint32_t)(mgt_hash3(7, 11, (uint64_t)i) % (uint64_t)vocab);
    t0 = 0;
    if (!gpus) share = cpu_share(st.threads, 0.3);
    rank_st = (mgt_rank_stats *)calloc((size_t)ranks, sizeof *rank_st);
    bubble = (double *)calloc((size_t)ranks * 2, sizeof *bubble); /* each rank's bubble seconds, then its step seconds, over the timed steps */
    if (!rank_st || !bubble) { free(tokens); free(rank_st); free(bubble); mgt_run_destroy(run); return fail(MGT_ERROR_MEMORY); }
    for (i = 0; i < warmup + steps; i++) {
        if (i == warmup) t0 = mgt_now();
        if ((r = mgt_run_step_tokens(run, tokens)) != MGT_OK) { free(tokens); free(rank_st); free(bubble); mgt_run_destroy(run); return fail(r); }
        if (i >= warmup && cfg.parallel.pp > 1) { /* the ranks' own measure of the step: time waiting in send/recv is the bubble */
            mgt_snapshot snap;
            int k;
            memset(&snap, 0, sizeof snap);
            snap.ranks = rank_st;
            snap.ranks_max = ranks;
            mgt_run_snapshot(run, &snap);
            for (k = 0; k < snap.ranks_n && k < ranks; k++) { bubble[k] += rank_st[k].bubble_s; bubble[ranks + k] += rank_st[k].step_s; }
        }
    }
    elapsed = mgt_now() - t0;
    if (!gpus) share = fmin(share, cpu_share(st.threads, 0.3)); /* before and after: the lower */
    mgt_run_stats(run, &st);
    tok_s = (double)steps * cfg.train.global_batch * cfg.model.seq_len / elapsed;
    gflops = tok_s * st.flops_per_token * 1e-9;
    printf("train step:     %.1f ms, %.0f tokens/s, %.1f GFLOP/s (%.0f MFLOP per token), ", elapsed / steps * 1e3, tok_s, gflops, st.flops_per_token * 1e-6);
    if (peak > 0) printf("MFU %.1f%% against %.1f GFLOP/s (%s)", 100.0 * gflops / peak, peak, peak_source);
    else printf("MFU n/a: mgt has no peak for this GPU ([parallel] peak_gflops states one)");
    if (gpus) printf(" (%d rank%s on %d GPU%s)\n", ranks, ranks == 1 ? "" : "s", ranks, ranks == 1 ? "" : "s");
    else printf(" (%d rank%s, %d thread%s in all)\n", ranks, ranks == 1 ? "" : "s", st.threads, st.threads == 1 ? "" : "s");
    printf("memory peak:    params %.1f MiB, grads %.1f MiB, optimizer %.1f MiB, activations %.1f MiB\n",
           st.mem_peak[MGT_MEM_PARAMS] / 1048576.0, st.mem_peak[MGT_MEM_GRADS] / 1048576.0, st.mem_peak[MGT_MEM_OPTIMIZER] / 1048576.0,
           st.mem_peak[MGT_MEM_ACTIVATIONS] / 1048576.0);
    if (cfg.parallel.pp > 1) { /* measured: `mgt plan --gpu cpu` predicts the same figure */
        printf("pipeline:       %s, %d micro-batches; bubble (time waiting for other stages / step), measured:", schedule_name(&cfg),
               cfg.train.global_batch / (cfg.train.micro_batch * cfg.parallel.dp));
        for (i = 0; i < ranks && i < 8; i++) printf("%s rank %d %.1f%%", i ? "," : "", i, bubble[ranks + i] > 0 ? 100.0 * bubble[i] / bubble[ranks + i] : 0.0);
        printf("%s\n", ranks > 8 ? ", ..." : "");
    }
    free(rank_st);
    free(bubble);
    {
        char key[512], date[192];
        double base;
        baseline_key(&cfg, mgt_run_device(run), st.threads, key, sizeof key);
        char conditions[128];
        snprintf(conditions, sizeof conditions, "its %d thread%s had %.0f%% of their cores", st.threads, st.threads == 1 ? "" : "s", 100 * share);
        if (share < 0.6 && !o.record) /* the machine is busy: figures low, and no baseline from them */
            fprintf(stderr, "mgt bench: warning: the machine is busy: this benchmark's %d thread%s had only %.0f%% of their cores (other work is running), "
                            "so its figures are low%s; run it again on a quiet machine (or keep them anyway with --record)\n", st.threads,
                    st.threads == 1 ? "" : "s", 100 * share, ranks == 1 ? " and it records no single-rank baseline" : "");
        else if (ranks == 1) baseline_record(key, tok_s, "the single-rank baseline", gpus ? NULL : conditions);
        else if ((base = baseline_find(key, date, sizeof date, 0)) > 0)
            printf("speedup:        %.2fx over one rank (%.0f tokens/s measured by mgt bench at %s)\n", tok_s / base, base, date);
        else printf("speedup:        n/a: no single-rank measurement of this model; `mgt bench` with parallel.dp, tp and pp = 1 makes one\n");
    }
    free(tokens);
    mgt_run_destroy(run);
    return 0;
}

/* ---- mgt doctor: what this machine has and what mgt will do on it, in a few seconds, for a bug
   report or before a run (DeepSpeed's ds_report, PyTorch's collect_env). Text, or --json for
   machines: one object of sections, each a flat object of values (numbers as numbers), the GPUs an
   array. Nothing here trains or allocates a run. ---- */

typedef struct doc {
    int json;
    int items;     /* values printed in the open section or GPU */
    int sections;  /* sections printed */
    int in_array;  /* inside "gpus": [ */
    int elements;  /* GPUs printed */
} doc;

/* s as a JSON string, quotes included, into out (cut short, still closed, when cap is too small) */
static void json_quote(char *out, size_t cap, const char *s) {
    size_t n = 0;
    if (cap < 3) { if (cap) out[0] = 0; return; }
    out[n++] = '"';
    for (; *s && n + 8 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') n += (size_t)snprintf(out + n, cap - n, "\\%c", c);
        else if (c == '\n') n += (size_t)snprintf(out + n, cap - n, "\\n");
        else if (c == '\t') n += (size_t)snprintf(out + n, cap - n, "\\t");
        else if (c < 0x20) n += (size_t)snprintf(out + n, cap - n, "\\u%04x", c);
        else out[n++] = (char)c;
    }
    out[n++] = '"';
    out[n] = 0;
}
static void doc_json_string(const char *s) {
    char q[8192];
    json_quote(q, sizeof q, s);
    fputs(q, stdout);
}
static void doc_close(doc *d) { /* the open section or GPU */
    if (!d->json) return;
    if (d->sections && !d->in_array) printf("\n  }");
    if (d->in_array && d->elements) printf("\n    }");
}
/* a section; name "gpus" opens the array of GPUs, each begun by doc_element */
static void doc_section(doc *d, const char *name, const char *title) {
    doc_close(d);
    if (d->in_array && d->json) printf("\n  ]");
    d->in_array = !strcmp(name, "gpus");
    d->elements = 0;
    d->items = 0;
    if (d->json) {
        printf("%s\n  ", d->sections ? "," : "{");
        doc_json_string(name);
        printf(d->in_array ? ": [" : ": {");
    } else if (!d->in_array) printf("\n%s\n", title);
    d->sections++;
}
static void doc_element(doc *d, const char *title) {
    if (d->json) {
        if (d->elements) printf("\n    }");
        printf("%s\n    {", d->elements ? "," : "");
    } else printf("\n%s\n", title);
    d->elements++;
    d->items = 0;
}
static void doc_key(doc *d, const char *key, const char *label) {
    if (d->json) {
        printf("%s\n%s", d->items ? "," : "", d->in_array ? "      " : "    ");
        doc_json_string(key);
        printf(": ");
    } else printf("  %-20s", label);
    d->items++;
}
/* one value: JSON's number (num) or string (text), the text's line (text); a value with no label
   is for machines only (the text has it in another line) */
static void doc_emit(doc *d, const char *key, const char *label, const double *num, const char *text) {
    if (!d->json && !label[0]) return;
    doc_key(d, key, label);
    if (!d->json) printf("%s\n", text);
    else if (num) printf("%.17g", *num);
    else doc_json_string(text);
}
static void doc_str(doc *d, const char *key, const char *label, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void doc_str(doc *d, const char *key, const char *label, const char *fmt, ...) {
    char v[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v, sizeof v, fmt, ap);
    va_end(ap);
    doc_emit(d, key, label, NULL, v);
}
/* a number that is not known: null for machines, the text's reason for people */
static void doc_none(doc *d, const char *key, const char *label, const char *text) {
    doc_key(d, key, label);
    if (d->json) printf("null");
    else printf("%s\n", text);
}
/* a number: the text shows it as `fmt` says (which may say more), JSON as the number itself */
static void doc_num(doc *d, const char *key, const char *label, double v, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void doc_num(doc *d, const char *key, const char *label, double v, const char *fmt, ...) {
    char t[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t, sizeof t, fmt, ap);
    va_end(ap);
    doc_emit(d, key, label, &v, t);
}
static void doc_end(doc *d) {
    doc_close(d);
    if (d->json) printf("%s\n}\n", d->in_array ? "\n  ]" : "");
}

/* the first line of `file` that starts with `key` (its value after ':'), or "" */
static void proc_value(const char *file, const char *key, char *out, size_t cap) {
    char line[4096];
    size_t n = strlen(key);
    FILE *f = fopen(file, "r");
    out[0] = 0;
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':'), *v;
        if (strncmp(line, key, n) || !colon) continue;
        for (v = colon + 1; *v == ' ' || *v == '\t'; v++) {}
        v[strcspn(v, "\n")] = 0;
        snprintf(out, cap, "%s", v);
        break;
    }
    fclose(f);
}
/* whether the CPU's flags (/proc/cpuinfo) hold `flag` as a whole word */
static int cpu_flag(const char *flags, const char *flag) {
    size_t n = strlen(flag);
    const char *p = flags;
    while ((p = strstr(p, flag))) {
        if ((p == flags || p[-1] == ' ') && (p[n] == ' ' || p[n] == 0)) return 1;
        p += n;
    }
    return 0;
}
/* the first file named `name` in $PATH, or "" */
static void on_path(const char *name, char *out, size_t cap) {
    const char *path = getenv("PATH");
    char dir[1024];
    out[0] = 0;
    while (path && *path) {
        size_t n = strcspn(path, ":");
        snprintf(dir, sizeof dir, "%.*s/%s", (int)n, path, name);
        if (n && !access(dir, X_OK)) { snprintf(out, cap, "%s", dir); return; }
        path += n + (path[n] == ':');
    }
}
/* the simulator's name for a GPU's marketing name ("NVIDIA H100 80GB HBM3" -> h100), or NULL */
static const char *sim_gpu_kind(const char *name) {
    static const char *kinds[] = {"h200", "h100", "b200", "a100"};
    size_t i;
    for (i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        char upper[8];
        size_t j;
        for (j = 0; kinds[i][j] && j < sizeof upper - 1; j++) upper[j] = (char)toupper((unsigned char)kinds[i][j]);
        upper[j] = 0;
        if (strstr(name, upper)) return kinds[i];
    }
    return NULL;
}

/* the file a table of a library opened at run time came from */
static const char *library_of(const void *table) {
    Dl_info info;
    return dladdr(table, &info) && info.dli_fname ? info.dli_fname : "loaded";
}

static void doctor_build(doc *d) {
    char why[1024];
    const mgt_cuda_api *cuda = mgt_cuda_load(why, sizeof why);
    doc_section(d, "mgt", "mgt");
    doc_str(d, "version", "version", "%s", MGT_VERSION_STRING);
#if defined(__clang__)
    doc_str(d, "compiler", "compiler", "clang %s", __clang_version__);
#elif defined(__GNUC__)
    doc_str(d, "compiler", "compiler", "gcc %s", __VERSION__);
#endif
    doc_str(d, "flags", "flags", "%s", MGT_BUILD_FLAGS);
    doc_str(d, "cuda_library", "CUDA library", "%s", cuda ? library_of(cuda) : why);
    if (mgt_cuda_pip_folder()[0]) doc_str(d, "nvidia_pip", "NVIDIA pip wheels", "%s (opened for what the CUDA library needs)", mgt_cuda_pip_folder());
    {
        const mgt_mpi_api *mpi = mgt_mpi_load(why, sizeof why);
        doc_str(d, "mpi_library", "MPI library", "%s", mpi ? library_of(mpi) : why);
    }
    doc_str(d, "hf_tokenizer", "hf tokenizer", "built in (PCRE2 %d.%d, jansson %s, as compiled against)", PCRE2_MAJOR, PCRE2_MINOR, JANSSON_VERSION);
}

static void doctor_cpu(doc *d) {
    char model[256], flags[8192], v[256], date[64], sgemm_k[320];
    const char *isa[] = {"avx2", "fma", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16"};
    double total = 0, avail = 0, g;
    int cores = mgt_cpu_count(), threads = 0;
    size_t i;
    doc_section(d, "cpu", "CPU");
    proc_value("/proc/cpuinfo", "model name", model, sizeof model);
    doc_str(d, "model", "model", "%s", model[0] ? model : "n/a (no /proc/cpuinfo)");
    doc_num(d, "cores", "cores", cores, "%d (the threads a run may use: affinity and cgroup quota counted)", cores);
    proc_value("/proc/cpuinfo", "flags", flags, sizeof flags);
    v[0] = 0;
    for (i = 0; i < sizeof isa / sizeof isa[0]; i++)
        snprintf(v + strlen(v), sizeof v - strlen(v), "%s%s %s", i ? ", " : "", isa[i], cpu_flag(flags, isa[i]) ? "yes" : "no");
    doc_str(d, "isa", "ISA", "%s", flags[0] ? v : "n/a (no /proc/cpuinfo)");
    proc_value("/proc/meminfo", "MemTotal", v, sizeof v);
    total = atof(v) * 1024.0;
    proc_value("/proc/meminfo", "MemAvailable", v, sizeof v);
    avail = atof(v) * 1024.0;
    if (total > 0) doc_num(d, "memory_total_bytes", "memory", total, "%.1f GiB, %.1f GiB available", total / 1073741824.0, avail / 1073741824.0);
    else doc_none(d, "memory_total_bytes", "memory", "n/a (no /proc/meminfo)");
    if (avail > 0) doc_num(d, "memory_available_bytes", "", avail, "%s", "");
    mgt_blas_describe(v, sizeof v, &threads);
    doc_str(d, "blas", "BLAS", "%s", v);
    if (getenv("MGT_BLAS_CORE_WAS")) /* blas_settle asked for better kernels than OpenBLAS chose */
        doc_str(d, "blas_kernels", "BLAS kernels", "%s: OpenBLAS took this CPU for %s, mgt set OPENBLAS_CORETYPE=%s (set it yourself to choose)",
                getenv("OPENBLAS_CORETYPE"), getenv("MGT_BLAS_CORE_WAS"), getenv("OPENBLAS_CORETYPE"));
    if (threads > 0) doc_num(d, "blas_threads", "BLAS threads", threads, "%d (mgt calls it from its own threads, one call each)", threads);
    gemm_key(0, sgemm_k, sizeof sgemm_k);
    if ((g = baseline_find(sgemm_k, date, sizeof date, 1)) > 0)
        doc_num(d, "sgemm_gflops", "sgemm", g, "%.1f GFLOP/s on %d threads, measured %s (the baselines file; `mgt bench` measures it again)", g, cores, date);
    else doc_none(d, "sgemm_gflops", "sgemm", "not measured (`mgt bench PRESET` measures this machine's rate)");
    mgt_cpu_bf16_gemm(v, sizeof v);
    doc_str(d, "bf16_gemms", "bf16 GEMMs", "%s", v);
    gemm_key(1, sgemm_k, sizeof sgemm_k);
    if (mgt_cpu_bf16_gemm(NULL, 0) && (g = baseline_find(sgemm_k, date, sizeof date, 1)) > 0)
        doc_num(d, "bf16_gemm_gflops", "bf16 GEMM", g, "%.1f GFLOP/s on %d threads, measured %s (`mgt bench` with precision.dtype = bf16 measures it again)",
                g, cores, date);
}


static void doctor_cuda(doc *d) {
    char why[1024];
    const mgt_cuda_api *api = mgt_cuda_load(why, sizeof why);
    mgt_cuda_report rep;
    int n = 0, i;
    doc_section(d, "cuda", "CUDA");
    if (!api) {
        doc_str(d, "gpus", "GPUs", "none usable: %s", why);
        return;
    }
    if (api->probe(&n, why, sizeof why) != 0) {
        doc_str(d, "gpus", "GPUs", "none: %s (the CUDA runtime's reason)", why);
        return;
    }
    doc_num(d, "gpus", "GPUs", n, "%d", n);
    api->report(&rep);
    if (rep.driver_version > 0)
        doc_str(d, "driver", "driver", "CUDA %d.%d (the newest runtime the driver takes)", rep.driver_version / 1000, rep.driver_version % 1000 / 10);
    else doc_none(d, "driver", "driver", "n/a");
    if (rep.runtime_version > 0) doc_str(d, "runtime", "runtime", "CUDA %d.%d", rep.runtime_version / 1000, rep.runtime_version % 1000 / 10);
    for (i = 0; i < rep.libraries; i++) {
        char key[40], label[40];
        size_t k;
        snprintf(key, sizeof key, "%s", rep.library[i].name);
        for (k = 0; key[k]; k++) key[k] = (char)tolower((unsigned char)key[k]);
        snprintf(label, sizeof label, "%s", rep.library[i].name);
        doc_str(d, key, label, "%s%s%s", rep.library[i].version, rep.library[i].path[0] ? ", " : "", rep.library[i].path);
    }
    if (rep.nvml_why[0]) doc_str(d, "nvml", "NVML", "%s (power limit, PCIe and NVLink are n/a)", rep.nvml_why);
    if (n > 1) { /* which GPUs reach each other directly (peer access: NVLink or PCIe P2P) */
        char m[2048] = "";
        int j;
        for (i = 0; i < rep.gpus; i++) {
            snprintf(m + strlen(m), sizeof m - strlen(m), "%s%d:", i ? "; " : "", i);
            for (j = 0; j < rep.gpus; j++)
                if (j != i) snprintf(m + strlen(m), sizeof m - strlen(m), " %s", rep.peer[i][j] > 0 ? "P2P" : rep.peer[i][j] == 0 ? "no" : "?");
        }
        doc_str(d, "peer_access", "peer access", "%s (each GPU to the others in order)", m);
    }
    doc_section(d, "gpus", "GPUs");
    for (i = 0; i < n; i++) {
        mgt_gpu_info g;
        char title[160];
        if (api->info(i, &g) != 0) {
            snprintf(title, sizeof title, "GPU %d", i);
            doc_element(d, title);
            doc_num(d, "index", "", i, "%d", i);
            doc_str(d, "error", "error", "its properties could not be read");
            continue;
        }
        snprintf(title, sizeof title, "GPU %d: %s", i, g.name);
        doc_element(d, title);
        doc_num(d, "index", "", i, "%d", i);
        doc_str(d, "name", "", "%s", g.name);
        doc_str(d, "compute_capability", "compute capability", "%d.%d", g.cc_major, g.cc_minor);
        doc_num(d, "sms", "SMs", g.sm_count, "%d", g.sm_count);
        doc_num(d, "memory_total_bytes", "memory", (double)g.memory_total, "%.1f GiB, %.1f GiB free", g.memory_total / 1073741824.0,
                g.memory_free / 1073741824.0);
        doc_num(d, "memory_free_bytes", "", (double)g.memory_free, "%s", "");
        doc_str(d, "pci_bus_id", "PCI bus", "%s", g.pci_bus_id);
        if (i < rep.gpus) {
            const char *na = "n/a";
            if (rep.gpu[i].sm_clock_mhz > 0)
                doc_num(d, "sm_clock_mhz", "clocks", rep.gpu[i].sm_clock_mhz, "SM %d MHz, memory %d MHz (peak)", rep.gpu[i].sm_clock_mhz, rep.gpu[i].memory_clock_mhz);
            else doc_none(d, "sm_clock_mhz", "clocks", na);
            if (rep.gpu[i].memory_clock_mhz > 0) doc_num(d, "memory_clock_mhz", "", rep.gpu[i].memory_clock_mhz, "%s", "");
            if (rep.gpu[i].ecc >= 0) doc_str(d, "ecc", "ECC", "%s", rep.gpu[i].ecc ? "on" : "off");
            else doc_none(d, "ecc", "ECC", na);
            if (rep.gpu[i].power_limit_w > 0) doc_num(d, "power_limit_w", "power limit", rep.gpu[i].power_limit_w, "%d W", rep.gpu[i].power_limit_w);
            else doc_none(d, "power_limit_w", "power limit", na);
            if (rep.gpu[i].pcie_generation > 0)
                doc_str(d, "pcie", "PCIe", "gen %d x%d (now)", rep.gpu[i].pcie_generation, rep.gpu[i].pcie_width);
            else doc_none(d, "pcie", "PCIe", na);
            if (rep.gpu[i].nvlinks_active >= 0) doc_num(d, "nvlinks_active", "NVLink", rep.gpu[i].nvlinks_active, "%d links active", rep.gpu[i].nvlinks_active);
            else doc_none(d, "nvlinks_active", "NVLink", na);
        }
    }
}

static void doctor_mpi(doc *d) {
    char var[64] = "", path[1024];
    int processes = mgt_mpi_launcher(var, sizeof var);
    doc_section(d, "mpi", "MPI");
    if (processes > 1) doc_str(d, "launcher", "this process", "started by an MPI launcher of %d processes (%s)", processes, var);
    else doc_str(d, "launcher", "this process", "not started by an MPI launcher (mpirun -np N ./mgt ... runs N processes)");
    on_path("mpirun", path, sizeof path);
    doc_str(d, "mpirun", "mpirun", "%s", path[0] ? path : "not on PATH");
    on_path("srun", path, sizeof path);
    doc_str(d, "srun", "srun", "%s", path[0] ? path : "not on PATH");
}

/* what parallel.layout = auto chose for the preset mgt doctor reports on ("" when it is manual) */
static char doctor_layout[1200];
/* what [parallel] device = auto would choose now for cfg, whether it fits, and the predicted step */
static void doctor_preset(doc *d, const mgt_config *cfg, const char *preset) {
    char why[1024], title[1200];
    mgt_config c = *cfg;
    int world = mgt_config_ranks(cfg), gpus;
    mgt_fit fit;
    c.parallel.device = MGT_DEVICE_AUTO;
    gpus = mgt_device_for(&c, why, sizeof why);
    char grid[64];
    snprintf(title, sizeof title, "%s (%d rank%s: %s)", preset ? preset : "[parallel] device = auto, one rank", world, world == 1 ? "" : "s",
             mgt_grid_text(cfg->parallel.dp, cfg->parallel.cp, cfg->parallel.tp, cfg->parallel.pp, grid, sizeof grid));
    doc_section(d, "preset", title);
    if (preset) doc_str(d, "file", "", "%s", preset);
    doc_num(d, "ranks", "", world, "%d", world);
    if (gpus) doc_str(d, "device_auto", "device auto", "cuda: a GPU for each rank");
    else doc_str(d, "device_auto", "device auto", "cpu: %s", why);
    if (doctor_layout[0]) doc_str(d, "layout_auto", "layout auto", "%s", doctor_layout);
    if (!preset) return;
    fit.text[0] = 0;
    mgt_plan_fit(cfg, &fit);
    doc_str(d, "fit", "fits", "%s", fit.text[0] ? fit.text : mgt_last_error());
    if (gpus) { /* the predicted step on this GPU kind */
        const mgt_cuda_api *api = mgt_cuda_load(NULL, 0);
        mgt_gpu_info g;
        const char *kind = api && api->info(0, &g) == 0 ? sim_gpu_kind(g.name) : NULL;
        mgt_sim_options o;
        mgt_sim_result res;
        mgt_sim_options_init(&o);
        if (!kind) doc_str(d, "predicted_step", "predicted step", "n/a: the simulator has no model of this GPU (mgt plan --gpu lists those it has)");
        else if (mgt_sim_device_find(kind, 0, &o.device) != MGT_OK || mgt_sim_run(cfg, &o, &res) != MGT_OK)
            doc_str(d, "predicted_step", "predicted step", "n/a: %s", mgt_last_error());
        else {
            doc_num(d, "predicted_step_ms", "predicted step", res.step_s * 1e3, "%.2f ms an optimizer step, %.0f tokens/s, MFU %.1f%% on %s (PREDICTED by the step simulator; mgt plan --gpu %s says more)",
                    res.step_s * 1e3, res.tokens_per_s, 100 * res.mfu, kind, kind);
            doc_num(d, "predicted_tokens_per_s", "", res.tokens_per_s, "%s", "");
            doc_num(d, "predicted_mfu", "", res.mfu, "%s", "");
            doc_str(d, "predicted_on", "", "%s", kind);
            mgt_sim_result_free(&res);
        }
    } else
        doc_str(d, "predicted_step", "predicted step", "on the CPU: `mgt plan %s --gpu cpu` predicts it by running each op once", preset);
}

/* ---- mgt doctor --gpu: the acceptance run of the CUDA path. Each check runs in a child process of
   its own (`mgt doctor --gpu-check NAME`), so a crash or a hang (under a time limit) ends that check
   only; a check whose GPU run fails is run again with MGT_CUDA_SYNC=1, which waits for every op and so
   names the one that failed. The parent writes a line per check (PASS, FAIL or SKIP) to the terminal
   and to DIR/doctor-gpu.txt, every figure to DIR/doctor-gpu.json, and the op families' measured
   times to DIR/doctor-gpu-calibration.ini (`mgt plan --gpu NAME --calibrate FILE`). ---- */

#define GPU_MAX_STEPS 40
typedef struct gpu_trace { /* one run's steps */
    int steps;
    double loss[GPU_MAX_STEPS], norm[GPU_MAX_STEPS];
    char attention[200]; /* what the CUDA backend said of its attention, or "" */
} gpu_trace;

/* the small GPT of the acceptance run (head size 64, so cuDNN's fused attention serves bf16), or
   the Llama-style tiny model (RMSNorm, RoPE, SwiGLU, 4 query heads on 2 key/value heads) */
static const char gpu_small_ini[] =
    "[model]\nn_layer = 2\nn_head = 2\nd_model = 128\nseq_len = 128\nvocab_size = 256\n"
    "[train]\nsteps = 40\nglobal_batch = 8\nmicro_batch = 4\nlr = 1e-3\nmin_lr = 1e-4\nwarmup = 2\neval_every = 0\nseed = 1337\n"
    "[checkpoint]\nevery = 0\n[log]\nmetrics = none\n";
static const char gpu_llama_ini[] =
    "[model]\nn_layer = 2\nn_head = 4\nn_kv_head = 2\nd_model = 128\nseq_len = 128\nvocab_size = 256\nnorm = rmsnorm\npositions = rope\n"
    "mlp = swiglu\nd_ff = 344\nbias = 0\ntied_head = 0\n"
    "[train]\nsteps = 40\nglobal_batch = 8\nmicro_batch = 4\nlr = 2e-3\nmin_lr = 2e-4\nwarmup = 2\neval_every = 0\nseed = 1337\n"
    "[checkpoint]\nevery = 0\n[log]\nmetrics = none\n";

static char gpu_attention_note[200]; /* the backend's notice about its attention, caught by the logger */
static void gpu_log(void *user, int level, const char *message) {
    (void)user;
    if (strstr(message, "attention")) snprintf(gpu_attention_note, sizeof gpu_attention_note, "%s", message);
    if (level == MGT_LOG_WARN) fprintf(stderr, "mgt: warning: %s\n", message);
}

/* a model of the acceptance run: ini's keys, no data files (the steps take gpu_tokens), on `device`;
   quick (the checking fakes run every kernel on the CPU): 32 tokens of context, 4 sequences */
static int gpu_quick;
static mgt_result gpu_config(mgt_config *cfg, const char *ini, const char *name, int device) {
    mgt_result r;
    mgt_config_init(cfg);
    if ((r = mgt_config_load_string(cfg, ini, name)) != MGT_OK) return r;
    if (gpu_quick) cfg->model.seq_len = 32, cfg->train.global_batch = 4, cfg->train.micro_batch = 2;
    cfg->data.train[0] = cfg->data.val[0] = 0;
    cfg->parallel.device = device;
    return MGT_OK;
}

/* the tokens of step `step` (the same on every device and every run: a step depends on nothing else) */
static void gpu_tokens(uint32_t *rows, int n, int step, int vocab) {
    int i;
    for (i = 0; i < n; i++) rows[i] = (uint32_t)(mgt_hash3(7, (uint64_t)step, (uint64_t)i) % (uint64_t)vocab);
}

/* `steps` steps of cfg from `first` (a run made or resumed by the caller when run is given) */
static mgt_result gpu_train(const mgt_config *cfg, int first, int steps, gpu_trace *t, mgt_run *given, const char *save_at_path, int save_at) {
    mgt_run *run = given;
    mgt_result r = MGT_OK;
    int n = cfg->train.global_batch * (cfg->model.seq_len + 1), s;
    uint32_t *rows = (uint32_t *)malloc(sizeof(uint32_t) * (size_t)n);
    if (!rows) return MGT_ERROR_MEMORY;
    gpu_attention_note[0] = 0;
    if (!run && (r = mgt_run_create(&run, cfg)) != MGT_OK) { free(rows); return r; }
    for (s = first; s < first + steps && s < GPU_MAX_STEPS && r == MGT_OK; s++) {
        mgt_stats st;
        gpu_tokens(rows, n, s, cfg->model.vocab_size);
        if ((r = mgt_run_step_tokens(run, rows)) != MGT_OK) break;
        mgt_run_stats(run, &st);
        t->loss[s] = st.loss;
        t->norm[s] = st.grad_norm;
        t->steps = s + 1;
        if (save_at_path && s + 1 == save_at) {
            char path[1024];
            r = mgt_run_save(run, path, sizeof path);
        }
    }
    snprintf(t->attention, sizeof t->attention, "%s", gpu_attention_note);
    if (!given) mgt_run_destroy(run);
    free(rows);
    return r;
}

/* the worst relative difference of b from a over steps [from, to) of loss and of the norm; a NaN
   counts as infinite */
static void gpu_worst(const gpu_trace *a, const gpu_trace *b, int from, int to, double *loss, double *norm) {
    int s;
    *loss = *norm = 0;
    for (s = from; s < to; s++) {
        double l = fabs(b->loss[s] - a->loss[s]) / fmax(fabs(a->loss[s]), 1e-12), g = fabs(b->norm[s] - a->norm[s]) / fmax(fabs(a->norm[s]), 1e-12);
        *loss = l != l ? INFINITY : fmax(*loss, l);
        *norm = g != g ? INFINITY : fmax(*norm, g);
    }
}

/* prints the check's result: "RESULT <status> <name>: <details>" and its figures as JSON */
static int gpu_result(const char *name, const char *status, const char *json, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int gpu_result(const char *name, const char *status, const char *json, const char *fmt, ...) {
    char text[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    printf("RESULT %s %s: %s\nJSON {\"check\": \"%s\", \"status\": \"%s\"%s%s}\n", status, name, text, name, status, json[0] ? ", " : "", json);
    fflush(stdout);
    return strcmp(status, "FAIL") == 0;
}

/* GPU against CPU, step by step, for one model and dtype. The bounds (relative, worst over the steps):
   fp32, losses 1e-4 and gradient norms 1e-3: the fakes' GPU path matches the CPU within 1e-5
   (tests/test_layouts.c); a real GPU adds cuBLAS's and libm's other orders and roundings, which
   Adam amplifies over the steps. bf16, losses 1/64 (tests/test_layouts.c's bound: 4 unit roundoffs)
   and norms 1/16 (a sum of squares of every gradient, each rounded; cuDNN rounds P before P.V). */
static int gpu_check_parity(const char *name, const char *ini, int dtype, int steps) {
    mgt_config cfg;
    gpu_trace cpu, gpu;
    mgt_result r;
    double loss, norm, lb = dtype == MGT_F32 ? 1e-4 : 1.0 / 64, nb = dtype == MGT_F32 ? 1e-3 : 1.0 / 16;
    char json[1024];
    memset(&cpu, 0, sizeof cpu);
    memset(&gpu, 0, sizeof gpu);
    if ((r = gpu_config(&cfg, ini, name, MGT_DEVICE_CPU)) != MGT_OK) return gpu_result(name, "FAIL", "", "%s", mgt_last_error());
    cfg.precision.dtype = dtype;
    if ((r = gpu_train(&cfg, 0, steps, &cpu, NULL, NULL, 0)) != MGT_OK) return gpu_result(name, "FAIL", "", "the CPU run: %s", mgt_last_error());
    cfg.parallel.device = MGT_DEVICE_CUDA;
    if ((r = gpu_train(&cfg, 0, steps, &gpu, NULL, NULL, 0)) != MGT_OK) return gpu_result(name, "FAIL", "", "the GPU run: %s", mgt_last_error());
    gpu_worst(&cpu, &gpu, 0, steps, &loss, &norm);
    snprintf(json, sizeof json, "\"steps\": %d, \"loss_cpu_first\": %.9g, \"loss_gpu_first\": %.9g, \"loss_cpu_last\": %.9g, \"loss_gpu_last\": %.9g, "
             "\"worst_loss_rel\": %.3g, \"worst_norm_rel\": %.3g, \"loss_bound\": %.3g, \"norm_bound\": %.3g", steps, cpu.loss[0], gpu.loss[0],
             cpu.loss[steps - 1], gpu.loss[steps - 1], loss, norm, lb, nb);
    return gpu_result(name, loss <= lb && norm <= nb ? "PASS" : "FAIL", json,
                      "%d steps, loss %.4f -> %.4f on the GPU (CPU %.4f -> %.4f); worst difference: loss %.2e (bound %.0e), gradient norm %.2e (bound %.0e); "
                      "attention: %s", steps, gpu.loss[0], gpu.loss[steps - 1], cpu.loss[0], cpu.loss[steps - 1], loss, lb, norm, nb,
                      gpu.attention[0] ? gpu.attention : dtype == MGT_F32 ? "the own kernel (fp32)" : "cuDNN's fused attention");
}

/* a checkpoint at step 4 of 8 on the GPU (fp32, the own attention kernel, deterministic), resumed in
   a new run: steps 5..8 bit-identical */
static int gpu_check_resume(int steps) {
    const char *name = "resume";
    mgt_config cfg;
    gpu_trace full, resumed;
    mgt_run *run = NULL;
    mgt_result r;
    char dir[] = "/tmp/mgt_doctor_resume_XXXXXX", path[1100], json[256];
    int half = steps / 2, same;
    memset(&full, 0, sizeof full);
    memset(&resumed, 0, sizeof resumed);
    if (!mkdtemp(dir)) return gpu_result(name, "FAIL", "", "a folder for the checkpoint: %s", strerror(errno));
    if (gpu_config(&cfg, gpu_small_ini, name, MGT_DEVICE_CUDA) != MGT_OK) return gpu_result(name, "FAIL", "", "%s", mgt_last_error());
    memcpy(cfg.checkpoint.dir, dir, sizeof dir); /* a short literal template: it fits */
    if ((r = gpu_train(&cfg, 0, steps, &full, NULL, "save", half)) != MGT_OK) return gpu_result(name, "FAIL", "", "the first run: %s", mgt_last_error());
    if ((r = mgt_checkpoint_latest(dir, path, sizeof path)) != MGT_OK) return gpu_result(name, "FAIL", "", "%s", mgt_last_error());
    if ((r = mgt_run_create(&run, &cfg)) != MGT_OK || (r = mgt_run_resume(run, path)) != MGT_OK) {
        if (run) mgt_run_destroy(run);
        return gpu_result(name, "FAIL", "", "resuming %s: %s", path, mgt_last_error());
    }
    r = gpu_train(&cfg, half, steps - half, &resumed, run, NULL, 0);
    mgt_run_destroy(run);
    if (r != MGT_OK) return gpu_result(name, "FAIL", "", "the resumed run: %s", mgt_last_error());
    same = !memcmp(full.loss + half, resumed.loss + half, sizeof(double) * (size_t)(steps - half));
    snprintf(json, sizeof json, "\"saved_at\": %d, \"steps\": %d, \"bit_identical\": %s", half, steps, same ? "true" : "false");
    return gpu_result(name, same ? "PASS" : "FAIL", json, "checkpoint at step %d, resumed: steps %d..%d %s (last %.9f and %.9f)", half, half + 1, steps,
                      same ? "bit-identical" : "differ", full.loss[steps - 1], resumed.loss[steps - 1]);
}

/* GPT-2 124M (bf16, 16 x 1024: llm.c's shape on one GPU), or a small shape on the fakes (quick):
   measured after warm-up steps, beside the simulator's prediction for this GPU; then a few steps
   with the op-family profile (CUDA events), written to DIR/calibration.ini for
   `mgt plan --gpu KIND --calibrate` */
static int gpu_check_bench(int quick, const char *dir) {
    const char *name = "bench";
    mgt_config cfg;
    mgt_run *run;
    mgt_result r;
    mgt_stats st;
    mgt_gpu_info info;
    const mgt_cuda_api *api = mgt_cuda_load(NULL, 0);
    const char *kind;
    int i, warm = quick ? 1 : 3, timed = quick ? 2 : 10, profiled = quick ? 1 : 3, n, f, prof_steps = -1, have_info;
    uint32_t *rows;
    double t0, ms, tok_s, mfu = -1, predicted_ms = -1, family_s[MGT_SIM_FAMILIES], covered = 0;
    char json[4096], pred[256] = "n/a: the simulator has no model of this GPU", families[512] = "", cal[1100] = "", cal_json[1200] = "";
    char cal_quoted[2300];
    char preset[4200] = "presets/gpt2_124m_1gpu.ini";
    if (access(preset, R_OK)) { /* run elsewhere than the source tree: the presets beside the program (a bundle's ../presets) */
        char exe[4096];
        ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
        exe[k > 0 ? k : 0] = 0;
        if (strrchr(exe, '/')) *strrchr(exe, '/') = 0;
        snprintf(preset, sizeof preset, "%s/presets/gpt2_124m_1gpu.ini", exe);
        if (access(preset, R_OK)) snprintf(preset, sizeof preset, "%s/../presets/gpt2_124m_1gpu.ini", exe);
    }
    mgt_config_init(&cfg);
    if ((r = mgt_config_load(&cfg, preset)) != MGT_OK) return gpu_result(name, "FAIL", "", "%s", mgt_last_error());
    cfg.data.train[0] = cfg.data.val[0] = 0;
    strcpy(cfg.log.metrics, "none");
    cfg.checkpoint.every = 0;
    cfg.parallel.device = MGT_DEVICE_CUDA;
    cfg.precision.dtype = MGT_BF16;
    cfg.train.micro_batch = cfg.train.global_batch = quick ? 2 : 16;
    if (quick) /* the fakes run every kernel on the CPU: a model a thousand times smaller */
        cfg.model.n_layer = 1, cfg.model.seq_len = 64, cfg.model.vocab_size = 256, cfg.model.d_model = 64, cfg.model.n_head = 1, cfg.data.tokenizer = MGT_TOKENIZER_BYTE;
    cfg.train.steps = warm + timed + profiled;
    if ((r = mgt_run_create(&run, &cfg)) != MGT_OK) return gpu_result(name, "FAIL", "", "%s", mgt_last_error());
    n = cfg.train.global_batch * (cfg.model.seq_len + 1);
    rows = (uint32_t *)malloc(sizeof(uint32_t) * (size_t)n);
    t0 = ms = 0;
    for (i = 0; rows && i < warm + timed + profiled; i++) {
        if (i == warm) t0 = mgt_now();
        if (i == warm + timed) { /* the timed steps are done: the profiled ones after them */
            ms = (mgt_now() - t0) / timed * 1e3;
            if (mgt_run_profile(run, 1, NULL) < 0) { r = MGT_ERROR_DEVICE; break; }
        }
        gpu_tokens(rows, n, i, cfg.model.vocab_size);
        if ((r = mgt_run_step_tokens(run, rows)) != MGT_OK) break;
    }
    if (r == MGT_OK && rows) prof_steps = mgt_run_profile(run, 0, family_s);
    mgt_run_stats(run, &st);
    mgt_run_destroy(run);
    free(rows);
    if (r != MGT_OK || !rows) return gpu_result(name, "FAIL", "", "%s", rows ? mgt_last_error() : "out of memory");
    if (prof_steps < 1) return gpu_result(name, "FAIL", "", "the op-family profile measured no step (%s)", prof_steps < 0 ? mgt_last_error() : "no profile");
    tok_s = cfg.train.global_batch * cfg.model.seq_len / (ms * 1e-3);
    have_info = api && api->info(0, &info) == 0;
    kind = have_info ? sim_gpu_kind(info.name) : NULL;
    for (f = 0; f < MGT_SIM_FAMILIES; f++) {
        size_t k = strlen(families), kj = strlen(cal_json);
        covered += family_s[f];
        snprintf(families + k, sizeof families - k, "%s%s %.3f", f ? ", " : "", mgt_sim_family_name(f), family_s[f] * 1e3);
        snprintf(cal_json + kj, sizeof cal_json - kj, "%s\"%s\": %.6f", f ? ", " : "", mgt_sim_family_name(f), family_s[f] * 1e3);
        if (family_s[f] <= 0) family_s[f] = -1; /* not measured */
    }
    snprintf(cal, sizeof cal, "%s/calibration.ini", dir);
    json_quote(cal_quoted, sizeof cal_quoted, cal);
    if (mgt_sim_calibration_write(cal, have_info ? info.name : "unknown GPU", &cfg, family_s) != MGT_OK)
        return gpu_result(name, "FAIL", "", "writing %s: %s", cal, mgt_last_error());
    if (kind) {
        mgt_sim_options o;
        mgt_sim_result res;
        mgt_sim_options_init(&o);
        if (mgt_sim_device_find(kind, 0, &o.device) == MGT_OK && mgt_sim_run(&cfg, &o, &res) == MGT_OK) {
            predicted_ms = res.step_s * 1e3;
            mfu = st.flops_per_token * tok_s / (o.device.tensor_tflops[MGT_BF16] * 1e12);
            snprintf(pred, sizeof pred, "predicted %.2f ms on %s (measured / predicted %.2f)", predicted_ms, kind, ms / predicted_ms);
            mgt_sim_result_free(&res);
        }
    }
    snprintf(json, sizeof json, "\"shape\": \"%s\", \"measured_ms\": %.4f, \"tokens_per_s\": %.1f, \"mfu\": %.4f, \"predicted_ms\": %.4f, \"gpu_kind\": \"%s\", "
             "\"family_ms\": {%s}, \"profiled_steps\": %d, \"calibration\": %s",
             quick ? "a small bf16 model (quick)" : "GPT-2 124M bf16 16x1024", ms, tok_s, mfu, predicted_ms, kind ? kind : "", cal_json, prof_steps, cal_quoted);
    return gpu_result(name, "PASS", json, "%s: %.2f ms a step, %.0f tokens/s%s%.1f%%; %s (MEASURED after %d warm-up steps, %d timed%s); "
                      "per op family (ms a step, CUDA events, %d profiled step%s): %s, %.0f%% of the step; written to %s",
                      quick ? "small bf16 model (quick)" : "GPT-2 124M bf16, 16 x 1024", ms, tok_s, mfu >= 0 ? ", MFU " : "", mfu >= 0 ? 100 * mfu : 0.0,
                      pred, warm, timed, have_info && !strncmp(info.name, "mgt fake", 8) ? "; the checking fakes: the CPU's time, not a GPU's" : "",
                      prof_steps, prof_steps == 1 ? "" : "s", families, 100 * covered / (ms * 1e-3), cal);
}

/* dp 2, tp 2, pp 2 and dp 2 ZeRO-3 on the GPUs against one GPU (fp32, the small GPT): the layouts
   reduce in other orders, so the fp32 bound of the parity checks */
static int gpu_check_layout(const char *name, int steps) {
    mgt_config cfg;
    gpu_trace one, many;
    double loss, norm;
    char json[256];
    memset(&one, 0, sizeof one);
    memset(&many, 0, sizeof many);
    if (gpu_config(&cfg, gpu_small_ini, name, MGT_DEVICE_CUDA) != MGT_OK) return gpu_result(name, "FAIL", "", "%s", mgt_last_error());
    if (gpu_train(&cfg, 0, steps, &one, NULL, NULL, 0) != MGT_OK) return gpu_result(name, "FAIL", "", "one GPU: %s", mgt_last_error());
    if (!strcmp(name, "dp2")) cfg.parallel.dp = 2;
    else if (!strcmp(name, "tp2")) cfg.parallel.tp = 2;
    else if (!strcmp(name, "pp2")) cfg.parallel.pp = 2;
    else cfg.parallel.dp = 2, cfg.parallel.zero = 3;
    if (gpu_train(&cfg, 0, steps, &many, NULL, NULL, 0) != MGT_OK) return gpu_result(name, "FAIL", "", "%s: %s", name, mgt_last_error());
    gpu_worst(&one, &many, 0, steps, &loss, &norm);
    snprintf(json, sizeof json, "\"steps\": %d, \"worst_loss_rel\": %.3g, \"worst_norm_rel\": %.3g", steps, loss, norm);
    return gpu_result(name, loss <= 1e-4 && norm <= 1e-3 ? "PASS" : "FAIL", json, "%d steps against one GPU: worst loss difference %.2e (bound 1e-4), "
                      "gradient norm %.2e (bound 1e-3)", steps, loss, norm);
}

/* the all-reduce sweep: every GPU a rank (its own thread, backend and NCCL communicator, as a run
   makes them), fp32 sums in place from 1 MiB doubling to 256 MiB (quick: 4 KiB to 64 KiB), each
   size `iters` times after one untimed call; the time is the device's (CUDA events around each
   call on the communication stream, the mean over the calls and the ranks' worst). algbw = bytes /
   time; busbw = algbw x 2(n-1)/n, nccl-tests' figure for an all-reduce */
#define AR_SIZES 9
typedef struct ar_rank {
    const mgt_cuda_api *api;
    void *world;
    int rank, n, sizes, iters;
    size_t bytes[AR_SIZES];
    double seconds[AR_SIZES];
    mgt_result result;
    char error[1100];
} ar_rank;
static void *ar_main(void *arg) {
    ar_rank *a = (ar_rank *)arg;
    int ranks[MGT_CUDA_REPORT_GPUS], i, s;
    mgt_group g;
    const mgt_group *gp = &g;
    mgt_backend *be = NULL;
    mgt_comm *comm = NULL;
    void *buf = NULL;
    char why[512] = "";
    for (i = 0; i < a->n; i++) ranks[i] = i;
    g.id = 0, g.size = a->n, g.index = a->rank, g.ranks = ranks;
    a->result = MGT_OK;
    if (a->api->backend_create(a->world, a->rank, MGT_F32, &be, why, sizeof why) != 0) a->result = mgt_set_error(MGT_ERROR_DEVICE, why);
    else if (!(buf = be->alloc(be, a->bytes[a->sizes - 1], MGT_MEM_BUFFERS)))
        a->result = mgt_set_error(MGT_ERROR_DEVICE, be->error(be) ? be->error(be) : "out of memory for the sweep's buffer");
    else if ((a->result = a->api->comm_create(a->world, a->rank, a->api->backend_stream(be), &gp, 1, &comm)) == MGT_OK)
        a->result = comm->all_reduce(comm, &g, buf, 1, MGT_F32); /* connects */
    if (a->result == MGT_OK) a->result = a->api->comm_settle(comm);
    for (s = 0; s < a->sizes && a->result == MGT_OK; s++) {
        size_t count = a->bytes[s] / sizeof(float);
        if ((a->result = comm->all_reduce(comm, &g, buf, count, MGT_F32)) != MGT_OK || (a->result = a->api->comm_settle(comm)) != MGT_OK) break;
        memset(&comm->stats, 0, sizeof comm->stats);
        for (i = 0; i < a->iters && a->result == MGT_OK; i++) a->result = comm->all_reduce(comm, &g, buf, count, MGT_F32);
        if (a->result == MGT_OK) a->result = a->api->comm_settle(comm);
        a->seconds[s] = comm->stats.seconds[MGT_COLL_ALL_REDUCE] / a->iters;
    }
    if (a->result != MGT_OK) {
        snprintf(a->error, sizeof a->error, "%s", mgt_last_error());
        a->api->world_abort(a->world); /* the other ranks' calls end */
    }
    if (comm) a->api->comm_destroy(comm);
    if (buf) be->free(be, buf, a->bytes[a->sizes - 1], MGT_MEM_BUFFERS);
    if (be) a->api->backend_destroy(be);
    return NULL;
}
static int gpu_check_allreduce(int quick, int gpus) {
    const char *name = "allreduce";
    const mgt_cuda_api *api = mgt_cuda_load(NULL, 0);
    ar_rank ar[MGT_CUDA_REPORT_GPUS];
    pthread_t th[MGT_CUDA_REPORT_GPUS];
    int devices[MGT_CUDA_REPORT_GPUS], i, s, n = gpus < MGT_CUDA_REPORT_GPUS ? gpus : MGT_CUDA_REPORT_GPUS, failed = -1;
    void *world = NULL;
    char table[2048] = "", json[2048] = "", *t = table, *j = json;
    double best = 0;
    if (!api) return gpu_result(name, "FAIL", "", "no CUDA library");
    for (i = 0; i < n; i++) devices[i] = i;
    if (api->world_create(n, 0, n, devices, NULL, 60, mgt_set_error, &world) != MGT_OK) return gpu_result(name, "FAIL", "", "%s", mgt_last_error());
    for (i = 0; i < n; i++) {
        memset(&ar[i], 0, sizeof ar[i]);
        ar[i].api = api, ar[i].world = world, ar[i].rank = i, ar[i].n = n, ar[i].sizes = AR_SIZES, ar[i].iters = quick ? 2 : 20;
        for (s = 0; s < AR_SIZES; s++) ar[i].bytes[s] = (size_t)(quick ? 4096 : 1 << 20) << s;
        if (pthread_create(&th[i], NULL, ar_main, &ar[i]) != 0) { n = i; break; }
    }
    for (i = 0; i < n; i++) pthread_join(th[i], NULL);
    api->world_destroy(world);
    for (i = 0; i < n && failed < 0; i++)
        if (ar[i].result != MGT_OK && ar[i].result != MGT_ERROR_COMM) failed = i; /* a root cause rather than its echo */
    for (i = 0; i < n && failed < 0; i++)
        if (ar[i].result != MGT_OK) failed = i;
    if (failed >= 0 || n < 2) return gpu_result(name, "FAIL", "", "%s", n < 2 ? "could not start the ranks' threads" : ar[failed].error);
    t += snprintf(t, sizeof table, "%d GPUs, fp32 sum in place, %d calls a size (MEASURED, CUDA events):\n%12s %12s %10s %10s %10s", n,
                  ar[0].iters, "size (B)", "count", "time (us)", "algbw GB/s", "busbw GB/s");
    j += snprintf(j, sizeof json, "\"gpus\": %d, \"sweep\": [", n);
    for (s = 0; s < AR_SIZES; s++) {
        double sec = 0, alg, bus;
        for (i = 0; i < n; i++) sec = fmax(sec, ar[i].seconds[s]); /* the slowest rank's */
        alg = sec > 0 ? ar[0].bytes[s] / sec / 1e9 : 0;
        bus = alg * 2 * (n - 1) / n;
        best = fmax(best, bus);
        t += snprintf(t, sizeof table - (size_t)(t - table), "\n%12zu %12zu %10.1f %10.2f %10.2f", ar[0].bytes[s], ar[0].bytes[s] / sizeof(float), sec * 1e6, alg, bus);
        j += snprintf(j, sizeof json - (size_t)(j - json), "%s{\"bytes\": %zu, \"us\": %.3f, \"algbw_gbps\": %.3f, \"busbw_gbps\": %.3f}", s ? ", " : "",
                      ar[0].bytes[s], sec * 1e6, alg, bus);
    }
    snprintf(j, sizeof json - (size_t)(j - json), "], \"best_busbw_gbps\": %.3f", best);
    printf("%s\n", table);
    {
        mgt_gpu_info info;
        int fake = api->info(0, &info) == 0 && !strncmp(info.name, "mgt fake", 8);
        return gpu_result(name, best > 0 ? "PASS" : "FAIL", json, "%d GPUs: best bus bandwidth %.2f GB/s (%zu to %zu bytes, MEASURED%s; the table in the check's log)",
                          n, best, ar[0].bytes[0], ar[0].bytes[AR_SIZES - 1], fake ? "; the checking fakes: the CPU's time, not a GPU's" : "");
    }
}

/* one check, in this (child) process */
static int gpu_check_main(const char *check, int quick, const char *dir) {
    int steps = quick ? 4 : 20;
    gpu_quick = quick;
    mgt_set_logger(gpu_log, NULL);
    if (!strcmp(check, "small-fp32")) return gpu_check_parity(check, gpu_small_ini, MGT_F32, steps);
    if (!strcmp(check, "small-bf16")) return gpu_check_parity(check, gpu_small_ini, MGT_BF16, steps);
    if (!strcmp(check, "llama-fp32")) return gpu_check_parity(check, gpu_llama_ini, MGT_F32, steps);
    if (!strcmp(check, "llama-bf16")) return gpu_check_parity(check, gpu_llama_ini, MGT_BF16, steps);
    if (!strcmp(check, "resume")) return gpu_check_resume(quick ? 4 : 8);
    if (!strcmp(check, "bench")) return gpu_check_bench(quick, dir);
    if (!strcmp(check, "dp2") || !strcmp(check, "tp2") || !strcmp(check, "pp2") || !strcmp(check, "dp2-zero3")) return gpu_check_layout(check, steps);
    if (!strcmp(check, "allreduce")) {
        const mgt_cuda_api *api = mgt_cuda_load(NULL, 0);
        int gpus = 0;
        char why[256];
        if (!api || api->probe(&gpus, why, sizeof why) != 0) return gpu_result(check, "FAIL", "", "no GPUs");
        return gpu_check_allreduce(quick, gpus);
    }
    fprintf(stderr, "mgt doctor: no check named %s\n", check);
    return 2;
}

/* runs `mgt doctor --gpu-check NAME --out DIR` (this program) with its output into log and out (the
   RESULT and JSON lines), within timeout_s; sync: with MGT_CUDA_SYNC=1. The exit status, 124 on timeout */
static int gpu_run_child(const char *check, int quick, int sync, double timeout_s, const char *dir, const char *log, char *out, size_t cap) {
    char self[4096];
    int fd[2], status = 0, timed_out = 0;
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1), used = 0;
    double start = mgt_now();
    pid_t pid;
    FILE *lf = fopen(log, "a");
    out[0] = 0;
    if (n <= 0) snprintf(self, sizeof self, "./mgt");
    else self[n] = 0;
    if (pipe(fd) != 0) { if (lf) fclose(lf); return -1; }
    if (lf) fprintf(lf, "== %s%s%s\n", check, quick ? " --quick" : "", sync ? " (MGT_CUDA_SYNC=1)" : ""), fflush(lf);
    pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        dup2(fd[1], 2);
        close(fd[0]);
        close(fd[1]);
        if (sync) setenv("MGT_CUDA_SYNC", "1", 1);
        execl(self, self, "doctor", "--gpu-check", check, quick ? "--quick" : "--full", "--out", dir, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    fcntl(fd[0], F_SETFL, O_NONBLOCK);
    for (;;) {
        char buf[4096];
        ssize_t k = read(fd[0], buf, sizeof buf);
        if (k > 0) {
            if (lf) fwrite(buf, 1, (size_t)k, lf);
            if (used + k < (ssize_t)cap) memcpy(out + used, buf, (size_t)k), used += k, out[used] = 0;
            continue;
        }
        if (k == 0) break;
        if (mgt_now() - start > timeout_s && !timed_out) { kill(pid, SIGKILL); timed_out = 1; }
        { struct timespec ts = {0, 20000000L}; nanosleep(&ts, NULL); }
    }
    close(fd[0]);
    waitpid(pid, &status, 0);
    if (lf) fclose(lf);
    if (timed_out) return 124;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* the line of out that starts with `tag ` (its rest, up to the newline), or "" */
static void gpu_line(const char *out, const char *tag, char *line, size_t cap) {
    const char *p = out;
    size_t n = strlen(tag);
    line[0] = 0;
    for (; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (!strncmp(p, tag, n) && p[n] == ' ') {
            snprintf(line, cap, "%.*s", (int)strcspn(p + n + 1, "\n"), p + n + 1);
            return;
        }
}
/* the last line of out that says what failed (mgt's error lines), or its last line */
static void gpu_last_error(const char *out, char *line, size_t cap) {
    const char *p = out, *best = NULL, *last = NULL;
    for (; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (*p != '\n') last = p;
        if (!strncmp(p, "mgt", 3) || strstr(p, "FAIL")) best = p;
    }
    p = best ? best : last;
    snprintf(line, cap, "%.*s", p ? (int)strcspn(p, "\n") : 0, p ? p : "no output");
}

static int cmd_doctor_gpu(int quick, const char *dir, const char *only) {
    static const char *checks[] = {"small-fp32", "small-bf16", "llama-fp32", "llama-bf16", "resume", "bench", "dp2", "tp2", "pp2", "dp2-zero3", "allreduce"};
    char why[1024], path[1200], out[65536], line[2048], json_path[1200];
    const mgt_cuda_api *api;
    int gpus = 0, i, failed = 0, ran = 0;
    double t0 = mgt_now();
    FILE *txt, *js;
    if (mgt_mkdirs(dir) != MGT_OK) return fail(MGT_ERROR_IO);
    snprintf(path, sizeof path, "%s/doctor-gpu.txt", dir);
    snprintf(json_path, sizeof json_path, "%s/doctor-gpu.json", dir);
    txt = fopen(path, "w");
    js = fopen(json_path, "w");
    if (!txt || !js) {
        fprintf(stderr, "mgt doctor --gpu: cannot write %s: %s\n", !txt ? path : json_path, strerror(errno));
        if (txt) fclose(txt);
        if (js) fclose(js);
        return 1;
    }
#define GPU_SAY(...) do { printf(__VA_ARGS__); fprintf(txt, __VA_ARGS__); fflush(stdout); } while (0)
    GPU_SAY("mgt doctor --gpu: the CUDA path against the CPU, resume, speed%s; logs in %s\n", quick ? " (quick: small shapes, few steps)" : "", dir);
    fprintf(js, "{\n  \"mgt\": \"%s\",\n  \"quick\": %s,\n  \"checks\": [", MGT_VERSION_STRING, quick ? "true" : "false");
    /* the source tree: the library brought up to date with this machine's nvcc before it is first
       opened (a stale one, once opened, stays mapped: C++ libraries are not unloaded) */
    if (!getenv("MGT_CUDA_LIBRARY") && !access("kernels/build_cuda.sh", F_OK)) {
        char cmd[1400], nvcc[1024];
        on_path("nvcc", nvcc, sizeof nvcc);
        if (!nvcc[0] && !access("/usr/local/cuda/bin/nvcc", X_OK)) snprintf(nvcc, sizeof nvcc, "/usr/local/cuda/bin/nvcc");
        if (nvcc[0]) {
            double b0 = mgt_now();
            int rc;
            GPU_SAY("building the CUDA library with %s (ninja cuda; its log in %s/build.log)...\n", nvcc, dir);
            snprintf(cmd, sizeof cmd, "ninja cuda > '%s/build.log' 2>&1", dir);
            rc = system(cmd);
            GPU_SAY("%s build: ninja cuda %s in %.0f s\n", rc == 0 ? "PASS" : "FAIL", rc == 0 ? "succeeded" : "failed", mgt_now() - b0);
            if (rc != 0) failed++;
        }
    }
    api = mgt_cuda_load(why, sizeof why);
    if (!api || api->probe(&gpus, why, sizeof why) != 0 || gpus < 1) {
        GPU_SAY("FAIL gpus: %s\n", api ? why : why[0] ? why : "no CUDA library");
        fprintf(js, "\n    {\"check\": \"gpus\", \"status\": \"FAIL\"}\n  ],\n  \"failed\": 1\n}\n");
        fclose(js);
        fclose(txt);
        return 1;
    }
    {
        mgt_gpu_info info;
        api->info(0, &info);
        GPU_SAY("PASS gpus: %d, the first %s (compute capability %d.%d, %.1f GiB)\n", gpus, info.name, info.cc_major, info.cc_minor, info.memory_total / 1073741824.0);
    }
    for (i = 0; i < (int)(sizeof checks / sizeof checks[0]); i++) {
        const char *c = checks[i];
        char status[16] = "", result[2048], name[64];
        int rc, multi = i >= 6;
        if (only && !strstr(only, c)) continue;
        if (multi && gpus < 2) {
            GPU_SAY("SKIP %s: needs 2 GPUs, this machine has %d\n", c, gpus);
            continue;
        }
        snprintf(path, sizeof path, "%s/%s.log", dir, c);
        remove(path);
        rc = gpu_run_child(c, quick, 0, quick ? 300 : 240, dir, path, out, sizeof out);
        gpu_line(out, "RESULT", result, sizeof result);
        if (sscanf(result, "%15s %63[^:]", status, name) != 2) {
            gpu_last_error(out, line, sizeof line);
            snprintf(status, sizeof status, "FAIL");
            snprintf(result, sizeof result, "FAIL %s: %s (exit %d): %.1900s", c, rc == 124 ? "timed out" : "no result", rc, line);
        }
        if (!strcmp(status, "FAIL")) { /* once more, every op waited for, so the failing one is named */
            char again[2048];
            gpu_run_child(c, quick, 1, quick ? 300 : 240, dir, path, out, sizeof out);
            gpu_line(out, "RESULT", again, sizeof again);
            gpu_last_error(out, line, sizeof line);
            if (again[0] && !strcmp(again, result)) snprintf(result + strlen(result), sizeof result - strlen(result), " (the same with MGT_CUDA_SYNC=1)");
            else snprintf(result + strlen(result), sizeof result - strlen(result), "; with MGT_CUDA_SYNC=1: %.1000s", again[0] ? again : line);
            failed++;
        }
        ran++;
        GPU_SAY("%s\n", result);
        gpu_line(out, "JSON", line, sizeof line);
        fprintf(js, "%s\n    %s", ran > 1 ? "," : "", line[0] ? line : "{}");
    }
    GPU_SAY("%s: %d check%s, %d failed, in %.0f s\n", failed ? "FAIL" : "PASS", ran, ran == 1 ? "" : "s", failed, mgt_now() - t0);
    fprintf(js, "\n  ],\n  \"failed\": %d\n}\n", failed);
    fclose(js);
    fclose(txt);
#undef GPU_SAY
    return failed ? 1 : 0;
}

static int cmd_doctor(int argc, char **argv) {
    mgt_config cfg;
    options o;
    doc d;
    int i, rc, n = 0, gpu = 0, quick = 0;
    const char *out = "doctor-gpu", *only = NULL, *check = NULL;
    char **rest = (char **)calloc((size_t)argc + 1, sizeof(char *));
    memset(&o, 0, sizeof o);
    memset(&d, 0, sizeof d);
    if (!rest) return fail(MGT_ERROR_MEMORY);
    for (i = 0; i < argc; i++) { /* doctor's own options; parse_common takes the preset and --set */
        if (i >= 2 && !strcmp(argv[i], "--json")) d.json = 1;
        else if (i >= 2 && !strcmp(argv[i], "--gpu")) gpu = 1;
        else if (i >= 2 && !strcmp(argv[i], "--quick")) quick = 1;
        else if (i >= 2 && !strcmp(argv[i], "--full")) quick = 0;
        else if (i >= 2 && i + 1 < argc && (!strcmp(argv[i], "--out") || !strcmp(argv[i], "--only") || !strcmp(argv[i], "--gpu-check"))) {
            if (!strcmp(argv[i], "--out")) out = argv[i + 1];
            else if (!strcmp(argv[i], "--only")) only = argv[i + 1];
            else check = argv[i + 1];
            i++;
        } else rest[n++] = argv[i];
    }
    if (check) { free(rest); return gpu_check_main(check, quick, out); }
    rc = parse_common(n, rest, &cfg, &o, 0);
    free(rest);
    if (rc) return rc;
    if (gpu) return cmd_doctor_gpu(quick, out, only);
    mgt_set_logger(NULL, NULL); /* loading the libraries says nothing of its own here */
    if (!d.json) printf("mgt doctor: what this machine has and what mgt will do on it\n");
    doctor_build(&d);
    doctor_cpu(&d);
    doctor_cuda(&d);
    doctor_mpi(&d);
    if (o.preset && cfg.parallel.layout == MGT_LAYOUT_AUTO) { /* the layout auto chooses here, quietly (--json stays JSON) */
        mgt_layout_auto a;
        char text[160];
        if (mgt_config_resolve_layout(&cfg, &a) != MGT_OK) snprintf(doctor_layout, sizeof doctor_layout, "not chosen: %s", mgt_last_error());
        else {
            layout_text(&a.chosen, text, sizeof text);
            snprintf(doctor_layout, sizeof doctor_layout, "%s: PREDICTED %.2f ms a step, %.0f tokens/s (%d layouts searched in %.2f s)", text,
                     a.chosen.step_s * 1e3, a.chosen.tokens_per_s, a.simulated, a.search_s);
        }
    }
    doctor_preset(&d, &cfg, o.preset);
    doc_end(&d);
    return 0;
}

/* OpenBLAS's pthreads build starts its threads in a library constructor, before main, from
   OPENBLAS_NUM_THREADS or the core count. mgt calls BLAS from its own threads, one call on each, so
   those threads would only idle, each holding a GEMM buffer (128 MiB of address space); under a
   tight ulimit -v one that cannot get its buffer retries forever, and exit, which joins it, never
   returns. So when OpenBLAS started threads, mgt runs itself again with OPENBLAS_NUM_THREADS=1 (the
   same process, once: the variable is then 1), from its own path rather than /proc/self/exe, so
   that its name stays mgt (ps, pgrep). Where that fails (no /proc, the binary replaced), the
   library stops them at its first run (mgt.h, BLAS).
   The same run fixes OpenBLAS's kernels: built for many CPUs (DYNAMIC_ARCH), it picks them at load
   from the CPU's model number, and one it does not know (newer than the library, or a VM that hides
   the model) gets its SSE3 kernels: on the H200 machine's AVX-512 Xeon, OpenBLAS 0.3.21 ran
   "Prescott", 28.8 GFLOP/s a core where its SkylakeX kernels give 128.7. There, unless OPENBLAS_CORETYPE is set, mgt asks for the
   kernels of the instructions the CPU has (SkylakeX with AVX-512, Haswell with AVX2 and FMA), and
   says so in MGT_BLAS_CORE_WAS (mgt doctor shows it). */
extern char *openblas_get_corename(void) __attribute__((weak));
static const char *blas_better_core(void) {
    static const char *generic[] = {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom", "Sandybridge", "Generic", "Katmai", "Northwood", "Banias"};
    const char *core = openblas_get_corename ? openblas_get_corename() : NULL;
    size_t i;
    if (!core || getenv("OPENBLAS_CORETYPE")) return NULL;
    for (i = 0; i < sizeof generic / sizeof generic[0]; i++)
        if (!strcasecmp(core, generic[i])) break;
    if (i == sizeof generic / sizeof generic[0]) return NULL;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
    return NULL;
}
static void blas_settle(char **argv) {
    const char *v = getenv("OPENBLAS_NUM_THREADS"), *core = blas_better_core();
    char self[4096];
    ssize_t n;
    int threads = openblas_get_num_threads && openblas_get_parallel && openblas_get_parallel() == 1 && openblas_get_num_threads() > 1 && !(v && !strcmp(v, "1"));
    if (!threads && !core) return;
    n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0 || n >= (ssize_t)sizeof self - 1) return;
    self[n] = 0;
    if (core && (setenv("OPENBLAS_CORETYPE", core, 1) != 0 || setenv("MGT_BLAS_CORE_WAS", openblas_get_corename(), 1) != 0)) return;
    if (setenv("OPENBLAS_NUM_THREADS", "1", 1) == 0) execv(self, argv);
}

#ifdef MGT_CPU_LEVELS
/* The bundle (`ninja dist`, dist.sh): bin/mgt is built for x86-64-v2, and beside it lie the same
   program built for x86-64-v4 (AVX-512) and -v3 (AVX2, FMA), bin/mgt-x86-64-v4 and -v3. On a CPU
   that runs one, mgt runs the highest, as the same process with argv unchanged (the resume hint
   names the command as typed); MGT_X86_LEVEL=v2 or v3 caps it. OpenBLAS picks its own kernels at
   run time; this is for mgt's own loops (norms, softmax, GELU, AdamW), 1.6x faster with AVX-512
   than SSE on the quick start (README, "Without installing anything"). Only the v2 build has it. */
static void cpu_level_exec(char **argv) {
    static const char *const levels[] = {"x86-64-v4", "x86-64-v3"};
    const char *cap = getenv("MGT_X86_LEVEL");
    char self[4096], path[4200];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    size_t i;
    if (n <= 0 || n >= (ssize_t)sizeof self - 1) return;
    self[n] = 0;
    __builtin_cpu_init();
    for (i = 0; i < sizeof levels / sizeof levels[0]; i++) {
        int supported = i == 0 ? __builtin_cpu_supports("x86-64-v4") : __builtin_cpu_supports("x86-64-v3");
        if (!supported || (cap && cap[0] && strcmp(cap, levels[i] + 7) < 0)) continue; /* levels[i] + 7: "v4", "v3" */
        snprintf(path, sizeof path, "%.*s/mgt-%s", (int)(strrchr(self, '/') - self), self, levels[i]);
        if (access(path, X_OK) == 0) execv(path, argv);
    }
}
#else
static void cpu_level_exec(char **argv) { (void)argv; }
#endif

int main(int argc, char **argv) {
    const char *cmd = argc > 1 ? argv[1] : "";
    int rc;
    cpu_level_exec(argv);
    blas_settle(argv);
    if (argc > 2 && (rc = command_help(argc, argv)) >= 0) return rc;
    if (!strcmp(cmd, "train")) return cmd_train(argc, argv);
    if (!strcmp(cmd, "sample")) return cmd_sample(argc, argv);
    if (!strcmp(cmd, "check")) return cmd_check(argc, argv);
    if (!strcmp(cmd, "keys")) return cmd_keys(argc, argv);
    if (!strcmp(cmd, "prepare")) return cmd_prepare(argc, argv);
    if (!strcmp(cmd, "bench")) return cmd_bench(argc, argv);
    if (!strcmp(cmd, "plan")) return cmd_plan(argc, argv);
    if (!strcmp(cmd, "export")) return cmd_export(argc, argv);
    if (!strcmp(cmd, "doctor")) return cmd_doctor(argc, argv);
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        if (argc > 2) { fprintf(stderr, "mgt version: takes no arguments (got %s)\n", argv[2]); return 2; }
#ifdef MGT_BUILD_LEVEL
        printf("mgt %s (built for %s)\n", MGT_VERSION_STRING, MGT_BUILD_LEVEL);
#else
        printf("mgt %s\n", MGT_VERSION_STRING);
#endif
        return 0;
    }
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) { usage(stdout); return 0; }
    if (cmd[0]) fprintf(stderr, "mgt: unknown command '%s'\n\n", cmd);
    usage(stderr);
    return 2;
}
#endif /* MGT_NO_MAIN */
