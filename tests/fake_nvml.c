/* tests/fake_nvml.c: a stand-in libnvidia-ml.so.1 for tests/test_nvml.c, with the entry points
   kernels/nvml.h looks up. Two devices: 0 at PCI 0000:17:00.0 reports everything; 1 at
   0000:65:00.0 has no power sensor and no utilisation (as a MIG instance). Two more, found by PCI
   bus id only, are the checking fakes' first two GPUs (00000000:18:00.0 and :19:00.0, the domain
   written with 8 digits as CUDA writes it; NVML takes either): boards with a power limit, PCIe and
   NVLink for mgt doctor. FAKE_NVML_INIT_FAILS=1 makes nvmlInit fail (as with no driver loaded). */
#include <stdlib.h> /* defines: getenv */
#include <string.h> /* defines: strcmp */

typedef struct dev { const char *pci; int full; } dev;
static dev devices[4] = {{"0000:17:00.0", 1}, {"0000:65:00.0", 0}, {"0000:18:00.0", 1}, {"0000:19:00.0", 1}};
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
    if (strlen(pci) == 16 && !strncmp(pci, "0000", 4)) pci += 4; /* 00000000:18:00.0: the 8-digit domain */
    for (i = 0; i < 4; i++)
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
/* the board's facts mgt doctor reports; the MIG-like device has none of them */
int nvmlDeviceGetPowerManagementLimit(dev *d, unsigned *mw) {
    if (!d->full) return NOT_SUPPORTED;
    *mw = 700000;
    return OK;
}
int nvmlDeviceGetCurrPcieLinkGeneration(dev *d, unsigned *gen) {
    if (!d->full) return NOT_SUPPORTED;
    *gen = 5;
    return OK;
}
int nvmlDeviceGetCurrPcieLinkWidth(dev *d, unsigned *lanes) {
    if (!d->full) return NOT_SUPPORTED;
    *lanes = 16;
    return OK;
}
int nvmlDeviceGetNvLinkState(dev *d, unsigned link, int *active) { /* an H100 SXM: 18 links */
    if (!d->full || link >= 18) return NOT_SUPPORTED;
    *active = 1;
    return OK;
}
