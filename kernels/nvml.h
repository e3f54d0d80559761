/* kernels/nvml.h: GPU utilisation, power and temperature through NVML, loaded at run time.

   The program must start on machines without the NVIDIA driver, so NVML is never linked: the
   library is opened with dlopen (libnvidia-ml.so.1, the name the driver installs; MGT_NVML_LIBRARY
   overrides it, which the tests use to load a fake) and the few entry points are looked up by
   name. Their prototypes are declared here from the NVML API reference rather than taken from
   nvml.h, which the CUDA toolkit does not always ship; the ABI of these calls has been stable
   since the _v2 entry points.

   Every reading is optional: a device or driver that does not support one (MIG instances have no
   utilisation, some boards no power sensor) leaves it unknown, and the dashboard shows n/a.

     mgt_nvml nv;
     if (mgt_nvml_open(&nv) == 0) {             // else nv.why says what is missing
         mgt_nvml_device dev;
         mgt_nvml_reading g;
         if (mgt_nvml_find(&nv, "0000:17:00.0", 0, &dev) == 0) mgt_nvml_read(&nv, dev, &g);
         mgt_nvml_close(&nv);
     }

   C99, header-only (static functions); link with -ldl on glibc older than 2.34. */
#ifndef MGT_NVML_H
#define MGT_NVML_H

#include <dlfcn.h>  /* defines: dlopen, dlsym, dlclose, dlerror */
#include <stdio.h>  /* defines: snprintf */
#include <stdlib.h> /* defines: getenv */
#include <string.h> /* defines: memset, memcpy */

typedef struct mgt_nvml_device_st *mgt_nvml_device; /* nvmlDevice_t */

typedef struct mgt_nvml_reading {
    double util_pct;     /* share of the last sample period (1/6 s to 1 s) with a kernel running */
    double mem_util_pct; /* share of it with device memory being read or written */
    double power_w;      /* board power (Ampere and later: averaged over 1 s) */
    double temp_c;       /* GPU core temperature */
    int has_util, has_power, has_temp;
} mgt_nvml_reading;

typedef struct mgt_nvml {
    void *lib;
    char why[256]; /* why mgt_nvml_open failed, for messages */
    /* NVML's own calls; nvmlReturn_t is an int enum, 0 = NVML_SUCCESS */
    int (*init)(void);
    int (*shutdown)(void);
    const char *(*error_string)(int result);
    int (*handle_by_index)(unsigned index, mgt_nvml_device *device);
    int (*handle_by_pci)(const char *pci_bus_id, mgt_nvml_device *device);
    int (*utilization)(mgt_nvml_device device, unsigned rates[2]); /* nvmlUtilization_t {gpu, memory} */
    int (*power)(mgt_nvml_device device, unsigned *milliwatts);
    int (*temperature)(mgt_nvml_device device, int sensor, unsigned *celsius);
    /* optional (NULL where the driver lacks them): what mgt doctor reports of a board */
    int (*power_limit)(mgt_nvml_device device, unsigned *milliwatts);
    int (*max_clock)(mgt_nvml_device device, int clock_type, unsigned *mhz);
    int (*pcie_generation)(mgt_nvml_device device, unsigned *generation);
    int (*pcie_width)(mgt_nvml_device device, unsigned *lanes);
    int (*nvlink_state)(mgt_nvml_device device, unsigned link, int *active);
} mgt_nvml;

/* a board's fixed facts; -1 where NVML does not say */
typedef struct mgt_nvml_board {
    int power_limit_w, max_sm_clock_mhz, pcie_generation, pcie_width, nvlinks_active;
} mgt_nvml_board;

#define MGT_NVML_TEMPERATURE_GPU 0 /* nvmlTemperatureSensors_t */

static inline void *mgt__nvml_sym(mgt_nvml *nv, const char *name, int *missing) {
    void *p = dlsym(nv->lib, name);
    if (!p && !*missing) {
        snprintf(nv->why, sizeof nv->why, "NVML has no %s (driver too old?)", name);
        *missing = 1;
    }
    return p;
}

/* 0, or -1 with nv->why filled (the library is absent, lacks an entry point, or nvmlInit fails) */
static inline int mgt_nvml_open(mgt_nvml *nv) {
    const char *name = getenv("MGT_NVML_LIBRARY");
    int missing = 0, rc;
    memset(nv, 0, sizeof *nv);
    if (!name || !*name) name = "libnvidia-ml.so.1";
    nv->lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!nv->lib) {
        const char *e = dlerror();
        snprintf(nv->why, sizeof nv->why, "cannot load %s (%s): GPU utilisation, power and temperature are n/a", name, e ? e : "not found");
        return -1;
    }
    /* dlsym returns void *; POSIX guarantees it converts to a function pointer, C99 does not say
       so, hence the memcpy rather than a cast that -pedantic would reject */
#define MGT__NVML_LOAD(field, symbol)                                          \
    do {                                                                       \
        void *mgt__p = mgt__nvml_sym(nv, symbol, &missing);                    \
        if (mgt__p) memcpy(&nv->field, &mgt__p, sizeof mgt__p);                \
    } while (0)
    MGT__NVML_LOAD(init, "nvmlInit_v2");
    MGT__NVML_LOAD(shutdown, "nvmlShutdown");
    MGT__NVML_LOAD(error_string, "nvmlErrorString");
    MGT__NVML_LOAD(handle_by_index, "nvmlDeviceGetHandleByIndex_v2");
    MGT__NVML_LOAD(handle_by_pci, "nvmlDeviceGetHandleByPciBusId_v2");
    MGT__NVML_LOAD(utilization, "nvmlDeviceGetUtilizationRates");
    MGT__NVML_LOAD(power, "nvmlDeviceGetPowerUsage");
    MGT__NVML_LOAD(temperature, "nvmlDeviceGetTemperature");
#undef MGT__NVML_LOAD
    {
        void *p;
        if ((p = dlsym(nv->lib, "nvmlDeviceGetPowerManagementLimit"))) memcpy(&nv->power_limit, &p, sizeof p);
        if ((p = dlsym(nv->lib, "nvmlDeviceGetMaxClockInfo"))) memcpy(&nv->max_clock, &p, sizeof p);
        if ((p = dlsym(nv->lib, "nvmlDeviceGetCurrPcieLinkGeneration"))) memcpy(&nv->pcie_generation, &p, sizeof p);
        if ((p = dlsym(nv->lib, "nvmlDeviceGetCurrPcieLinkWidth"))) memcpy(&nv->pcie_width, &p, sizeof p);
        if ((p = dlsym(nv->lib, "nvmlDeviceGetNvLinkState"))) memcpy(&nv->nvlink_state, &p, sizeof p);
    }
    if (missing) {
        dlclose(nv->lib);
        nv->lib = NULL;
        return -1;
    }
    if ((rc = nv->init()) != 0) {
        snprintf(nv->why, sizeof nv->why, "nvmlInit failed: %s", nv->error_string(rc));
        dlclose(nv->lib);
        nv->lib = NULL;
        return -1;
    }
    return 0;
}

/* the NVML handle of a CUDA device: by PCI bus id (as cudaDeviceGetPCIBusId writes it), because
   NVML numbers devices in PCI order and CUDA, by default, fastest first; by index when pci_bus_id
   is NULL. 0, or -1 with nv->why */
static inline int mgt_nvml_find(mgt_nvml *nv, const char *pci_bus_id, unsigned index, mgt_nvml_device *device) {
    int rc = pci_bus_id ? nv->handle_by_pci(pci_bus_id, device) : nv->handle_by_index(index, device);
    if (rc != 0) {
        if (pci_bus_id) snprintf(nv->why, sizeof nv->why, "NVML has no device at PCI %s: %s", pci_bus_id, nv->error_string(rc));
        else snprintf(nv->why, sizeof nv->why, "NVML has no device %u: %s", index, nv->error_string(rc));
        return -1;
    }
    return 0;
}

/* whatever the device reports now; the has_ flags say which readings are real */
static inline void mgt_nvml_read(mgt_nvml *nv, mgt_nvml_device device, mgt_nvml_reading *g) {
    unsigned rates[2], mw, celsius;
    memset(g, 0, sizeof *g);
    if (nv->utilization(device, rates) == 0) {
        g->util_pct = rates[0];
        g->mem_util_pct = rates[1];
        g->has_util = 1;
    }
    if (nv->power(device, &mw) == 0) {
        g->power_w = mw / 1000.0;
        g->has_power = 1;
    }
    if (nv->temperature(device, MGT_NVML_TEMPERATURE_GPU, &celsius) == 0) {
        g->temp_c = celsius;
        g->has_temp = 1;
    }
}

#define MGT_NVML_CLOCK_SM 1     /* nvmlClockType_t */
#define MGT_NVML_NVLINK_LINKS 18 /* NVML_NVLINK_MAX_LINKS */
static inline void mgt_nvml_board_read(mgt_nvml *nv, mgt_nvml_device device, mgt_nvml_board *b) {
    unsigned v;
    int active, link, any = 0;
    b->power_limit_w = nv->power_limit && nv->power_limit(device, &v) == 0 ? (int)(v / 1000) : -1;
    b->max_sm_clock_mhz = nv->max_clock && nv->max_clock(device, MGT_NVML_CLOCK_SM, &v) == 0 ? (int)v : -1;
    b->pcie_generation = nv->pcie_generation && nv->pcie_generation(device, &v) == 0 ? (int)v : -1;
    b->pcie_width = nv->pcie_width && nv->pcie_width(device, &v) == 0 ? (int)v : -1;
    b->nvlinks_active = 0;
    for (link = 0; nv->nvlink_state && link < MGT_NVML_NVLINK_LINKS; link++) /* a link that does not exist answers an error */
        if (nv->nvlink_state(device, (unsigned)link, &active) == 0) {
            any = 1;
            b->nvlinks_active += active != 0;
        }
    if (!any) b->nvlinks_active = -1;
}

static inline void mgt_nvml_close(mgt_nvml *nv) {
    if (nv->lib) {
        nv->shutdown();
        dlclose(nv->lib);
    }
    memset(nv, 0, sizeof *nv);
}

#endif /* MGT_NVML_H */
