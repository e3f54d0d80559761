/* tests/fake_nvml.c: a stand-in libnvidia-ml.so.1 for tests/test_nvml.c, with the entry points
   kernels/nvml.h looks up. Two devices: 0 at PCI 0000:17:00.0 reports everything; 1 at
   0000:65:00.0 has no power sensor and no utilisation (as a MIG instance). FAKE_NVML_INIT_FAILS=1
   makes nvmlInit fail (as with no driver loaded). */
#include <stdlib.h> /* defines: getenv */
#include <string.h> /* defines: strcmp */

typedef struct dev { const char *pci; int full; } dev;
static dev devices[2] = {{"0000:17:00.0", 1}, {"0000:65:00.0", 0}};
static int initialised;

enum { OK = 0, UNINITIALIZED = 1, INVALID_ARGUMENT = 2, NOT_SUPPORTED = 3, DRIVER_NOT_LOADED = 9, NOT_FOUND = 6 };

int nvmlInit_v2(void) {
    const char *f = getenv("FAKE_NVML_INIT_FAILS");
    if (f && *f == '1') return DRIVER_NOT_LOADED;
    initialised = 1;
    return OK;
}
int nvmlShutdown(void) { initialised = 0; return OK; }
const char *nvmlErrorString(int r) {
    return r == OK ? "Success" : r == DRIVER_NOT_LOADED ? "Driver Not Loaded" : r == NOT_FOUND ? "Not Found" : r == NOT_SUPPORTED ? "Not Supported" : "Unknown Error";
}
int nvmlDeviceGetHandleByIndex_v2(unsigned index, dev **out) {
    if (!initialised) return UNINITIALIZED;
    if (index >= 2) return INVALID_ARGUMENT;
    *out = &devices[index];
    return OK;
}
int nvmlDeviceGetHandleByPciBusId_v2(const char *pci, dev **out) {
    int i;
    if (!initialised) return UNINITIALIZED;
    for (i = 0; i < 2; i++)
        if (!strcmp(pci, devices[i].pci)) { *out = &devices[i]; return OK; }
    return NOT_FOUND;
}
int nvmlDeviceGetUtilizationRates(dev *d, unsigned rates[2]) {
    if (!d->full) return NOT_SUPPORTED;
    rates[0] = 87;
    rates[1] = 41;
    return OK;
}
int nvmlDeviceGetPowerUsage(dev *d, unsigned *mw) {
    if (!d->full) return NOT_SUPPORTED;
    *mw = 612345;
    return OK;
}
int nvmlDeviceGetTemperature(dev *d, int sensor, unsigned *c) {
    if (sensor != 0) return INVALID_ARGUMENT;
    *c = d->full ? 71 : 55;
    return OK;
}
