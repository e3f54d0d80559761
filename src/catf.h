/* src/catf.h - mgt__catf, shared by the implementation and the CUDA library's C files (which define MGT_CATF) */

/* mgt__catf: printf appended to the text in buf, cut at cap. The implementation's, and that of a
   file built apart from it that includes only the declarations: kernels/comm_nccl.c and
   kernels/watchdog.c, in the CUDA library, which takes nothing from the program (it is opened with
   dlopen and reached through one table), define MGT_CATF before including mgt.h. */
#if (defined(MGT_IMPLEMENTATION) || defined(MGT_CATF)) && !defined(MGT__CATF_DEFINED)
#define MGT__CATF_DEFINED
#include <stdarg.h> /* defines: va_list */
#include <stdio.h>  /* defines: vsnprintf */
#include <string.h> /* defines: strlen */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 3, 4)))
#endif
static void mgt__catf(char *buf, size_t cap, const char *fmt, ...) {
    size_t n = strlen(buf);
    va_list ap;
    if (n + 1 >= cap) return;
    va_start(ap, fmt);
    vsnprintf(buf + n, cap - n, fmt, ap);
    va_end(ap);
}
#endif
