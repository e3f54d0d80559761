/* src/impl_begin.h - the implementation begins: its guard, allocator hooks, system includes, compiler
   macros */

/* ============================================================================================== */
/*                                         IMPLEMENTATION                                         */
/* ============================================================================================== */
#ifdef MGT_IMPLEMENTATION
#ifndef MGT__IMPLEMENTED
#define MGT__IMPLEMENTED

/* every allocation of the library goes through these (a test counts them: tests/test_alloc.c);
   what the C library allocates itself (glob's paths) it frees itself */
#if defined(MGT_MALLOC) != defined(MGT_FREE) || defined(MGT_MALLOC) != defined(MGT_REALLOC)
#error "define MGT_MALLOC, MGT_REALLOC and MGT_FREE together, or none of them"
#endif
#ifndef MGT_MALLOC
#define MGT_MALLOC(size) malloc(size)
#define MGT_REALLOC(ptr, size) realloc(ptr, size)
#define MGT_FREE(ptr) free(ptr)
#endif

#include <stdlib.h>    /* defines: malloc, free, qsort, strtod, strtol */
#include <string.h>    /* defines: memcpy, memset, strcmp, strlen */
#include <stdarg.h>    /* defines: va_list */
#include <math.h>      /* defines: sqrt, exp, log, log2, cos, floorf */
#include <errno.h>     /* defines: errno */
#include <pthread.h>   /* defines: pthread_create, mutexes, condition variables */
#include <sched.h>     /* defines: sched_yield (a spinning pool thread) */
#include <time.h>      /* defines: clock_gettime */
#include <unistd.h>    /* defines: sysconf, fsync, close */
#include <fcntl.h>     /* defines: open */
#include <dirent.h>    /* defines: opendir, readdir */
#include <glob.h>      /* defines: glob (data.train = data/fineweb_train_*.bin) */
#include <sys/mman.h>  /* defines: mmap */
#include <sys/stat.h>  /* defines: stat, mkdir */
#include <sys/file.h>  /* defines: flock (a run's lock on its checkpoint folder) */
#include <sys/resource.h> /* defines: getrlimit, RLIMIT_AS */
#include <dlfcn.h>     /* defines: dlopen, dlsym (the CUDA backend library) */
#include <cblas.h>     /* defines: cblas_sgemm */
#include <ini.h>       /* defines: ini_parse_stream (inih) */
#ifdef MGT_NO_STDIO
#include <stdio.h>     /* the implementation still reads and writes files */
#endif

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define MGT__THREAD_LOCAL __thread
#define MGT__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define MGT__THREAD_LOCAL
#define MGT__PRINTF(a, b)
#endif

