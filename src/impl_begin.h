/* src/impl_begin.h - the implementation begins: its guard, allocator hooks, system includes, compiler
   macros */

/* ============================================================================================== */
/*                                         IMPLEMENTATION                                         */
/* ============================================================================================== */
#ifdef MGT_IMPLEMENTATION
#ifndef MGT__IMPLEMENTED
#define MGT__IMPLEMENTED

#if defined(MGT_MALLOC) != defined(MGT_FREE)
#error "define both MGT_MALLOC and MGT_FREE, or neither"
#endif
#ifndef MGT_MALLOC
#define MGT_MALLOC(size) malloc(size)
#define MGT_FREE(ptr) free(ptr)
#endif

#include <stdlib.h>    /* defines: malloc, free, qsort, strtod, strtol */
#include <string.h>    /* defines: memcpy, memset, strcmp, strlen */
#include <stdarg.h>    /* defines: va_list */
#include <math.h>      /* defines: sqrt, exp, log, log2, cos, floorf */
#include <errno.h>     /* defines: errno */
#include <pthread.h>   /* defines: pthread_create, mutexes, condition variables */
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

