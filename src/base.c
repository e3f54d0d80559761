/* src/base.c - results, errors and logging; counter-based random numbers */
/* ---- results, errors, logging ---------------------------------------------------------------- */

static MGT__THREAD_LOCAL char mgt__error_text[1024];
static mgt_log_fn mgt__logger;
static void *mgt__logger_user;

MGTDEF const char *mgt_result_string(mgt_result result) {
    switch (result) {
#define MGT__RESULT_CASE(name, value, text) case name: return text;
        MGT_RESULTS(MGT__RESULT_CASE)
#undef MGT__RESULT_CASE
    default: return "unknown result";
    }
}
MGTDEF const char *mgt_last_error(void) { return mgt__error_text; }
MGTDEF void mgt_set_logger(mgt_log_fn fn, void *user) { mgt__logger = fn; mgt__logger_user = user; }

MGT__PRINTF(2, 3) static mgt_result mgt__fail(mgt_result result, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(mgt__error_text, sizeof mgt__error_text, fmt, ap);
    va_end(ap);
    return result;
}
#define MGT__TRY(expr) do { mgt_result mgt__r = (expr); if (mgt__r != MGT_OK) return mgt__r; } while (0)
MGT__PRINTF(2, 3) static void mgt__log(int level, const char *fmt, ...) {
    char text[1024];
    va_list ap;
    if (!mgt__logger) return;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    mgt__logger(mgt__logger_user, level, text);
}

MGTDEF double mgt_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* zeroed memory for n things of `size` bytes through MGT_MALLOC; NULL when the product overflows */
static void *mgt__calloc(size_t n, size_t size) {
    void *p;
    size_t bytes;
    if (size && n > (size_t)-1 / size) return NULL;
    bytes = n * size;
    p = MGT_MALLOC(bytes > 0 ? bytes : 1);
    if (p) memset(p, 0, bytes);
    return p;
}

/* bounded string copy that always terminates */
static void mgt__strlcpy(char *dst, const char *src, size_t cap) {
    size_t n = strlen(src);
    if (cap == 0) return;
    if (n >= cap) n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

/* Opens path read-only if it is a regular file; anything else (a folder, /dev/null, a FIFO, a
   socket) is refused before a byte is read. O_NONBLOCK makes open() of a FIFO return at once
   instead of waiting for a writer; the flag is cleared once fstat shows a regular file. Returns the
   descriptor (and *st when st is not NULL), or -1 with why = strerror ("No such file or
   directory") or what the path is ("it is a folder, not a file"), for a message such as
   "%s: cannot open the preset: %s". */
static int mgt__open_regular(const char *path, struct stat *st, char *why, size_t cap) {
    struct stat s;
    const char *kind;
    int fd = open(path, O_RDONLY | O_NONBLOCK), flags;
    if (fd < 0) { snprintf(why, cap, "%s", strerror(errno)); return -1; }
    if (fstat(fd, &s)) { snprintf(why, cap, "%s", strerror(errno)); close(fd); return -1; }
    if (S_ISREG(s.st_mode)) {
        if ((flags = fcntl(fd, F_GETFL)) == -1 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == -1) {
            snprintf(why, cap, "%s", strerror(errno));
            close(fd);
            return -1;
        }
        if (st) *st = s;
        return fd;
    }
    kind = S_ISDIR(s.st_mode) ? "a folder" : S_ISFIFO(s.st_mode) ? "a FIFO (named pipe)" : S_ISCHR(s.st_mode) ? "a character device"
         : S_ISBLK(s.st_mode) ? "a block device" : S_ISSOCK(s.st_mode) ? "a socket" : NULL;
    if (kind) snprintf(why, cap, "it is %s, not a file", kind);
    else snprintf(why, cap, "it is not a regular file");
    close(fd);
    errno = EINVAL;
    return -1;
}

/* ---- counter-based random numbers: every value is a pure function of its keys --------------- */

static uint64_t mgt__mix64(uint64_t x) { /* splitmix64 finaliser */
    x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27; x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}
MGTDEF uint64_t mgt_hash3(uint64_t a, uint64_t b, uint64_t c) {
    return mgt__mix64(mgt__mix64(mgt__mix64(a + 0x9e3779b97f4a7c15ULL) ^ b) ^ c);
}
static double mgt__uniform(uint64_t h) { return ((double)(h >> 11) + 0.5) * (1.0 / 9007199254740992.0); } /* (0,1) */
/* standard normal for element `index` of tensor `tensor` (Box-Muller over two counters) */
static double mgt__normal(uint64_t seed, uint64_t tensor, uint64_t index) {
    double u1 = mgt__uniform(mgt_hash3(seed, tensor, 2 * index));
    double u2 = mgt__uniform(mgt_hash3(seed, tensor, 2 * index + 1));
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

