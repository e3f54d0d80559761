/* tests/test_nvml.c: kernels/nvml.h against tests/fake_nvml.c (built as a shared library and
   named by MGT_NVML_LIBRARY): readings arrive with units converted, unsupported readings stay
   unknown, and every way of failing to open NVML (no library, nvmlInit failing, an entry point
   missing) is a message rather than a crash. argv[1]: the fake library (default: where
   kernels/cuda.ninja builds it, from the repository root). */
#include "kernels/nvml.h" /* defines: mgt_nvml_open, mgt_nvml_find, mgt_nvml_read, mgt_nvml_close */

#include <stdio.h>  /* defines: printf */
#include <stdlib.h> /* defines: setenv, unsetenv */
#include <string.h> /* defines: strstr */

static int failures, checks;
#define CHECK(cond, ...)                                          \
    do {                                                          \
        checks++;                                                 \
        if (!(cond)) {                                            \
            failures++;                                           \
            printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            printf(__VA_ARGS__);                                  \
            printf("\n");                                         \
        }                                                         \
    } while (0)

int main(int argc, char **argv) {
    mgt_nvml nv;
    mgt_nvml_device d0, d1, d0_by_index;
    mgt_nvml_reading g;
    const char *fake = argc > 1 ? argv[1] : "build/fake_nvml/libnvidia-ml.so.1";

    /* a driver with two devices (a path with a slash: dlopen takes it as is) */
    setenv("MGT_NVML_LIBRARY", fake, 1);
    CHECK(mgt_nvml_open(&nv) == 0, "open: %s", nv.why);
    CHECK(mgt_nvml_find(&nv, "0000:17:00.0", 0, &d0) == 0, "%s", nv.why);
    CHECK(mgt_nvml_find(&nv, NULL, 0, &d0_by_index) == 0 && d0_by_index == d0, "index 0 is PCI 17");
    mgt_nvml_read(&nv, d0, &g);
    CHECK(g.has_util && g.util_pct == 87 && g.mem_util_pct == 41, "utilisation %g %g", g.util_pct, g.mem_util_pct);
    CHECK(g.has_power && g.power_w == 612.345, "power %g W (612345 mW)", g.power_w);
    CHECK(g.has_temp && g.temp_c == 71, "temperature %g", g.temp_c);
    CHECK(mgt_nvml_find(&nv, "0000:65:00.0", 0, &d1) == 0, "%s", nv.why);
    mgt_nvml_read(&nv, d1, &g);
    CHECK(!g.has_util && !g.has_power && g.has_temp && g.temp_c == 55, "unsupported readings stay unknown");
    CHECK(mgt_nvml_find(&nv, "0000:99:00.0", 0, &d1) == -1 && strstr(nv.why, "0000:99:00.0") && strstr(nv.why, "Not Found"), "why: %s", nv.why);
    CHECK(mgt_nvml_find(&nv, NULL, 7, &d1) == -1 && strstr(nv.why, "device 7"), "why: %s", nv.why);
    mgt_nvml_close(&nv);
    CHECK(nv.lib == NULL, "closed");

    /* the driver is installed but not loaded */
    setenv("FAKE_NVML_INIT_FAILS", "1", 1);
    CHECK(mgt_nvml_open(&nv) == -1 && strstr(nv.why, "nvmlInit failed: Driver Not Loaded"), "why: %s", nv.why);
    unsetenv("FAKE_NVML_INIT_FAILS");

    /* no NVML at all (a machine without the NVIDIA driver) */
    setenv("MGT_NVML_LIBRARY", "libmgt-no-such-nvml.so.1", 1);
    CHECK(mgt_nvml_open(&nv) == -1 && strstr(nv.why, "cannot load libmgt-no-such-nvml.so.1") && strstr(nv.why, "n/a"), "why: %s", nv.why);

    /* a library that is not NVML (an entry point missing): libm has none of them */
    setenv("MGT_NVML_LIBRARY", "libm.so.6", 1);
    CHECK(mgt_nvml_open(&nv) == -1 && strstr(nv.why, "NVML has no nvmlInit_v2"), "why: %s", nv.why);

    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
