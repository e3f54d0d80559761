/* kernels/plugin_cuda.c: the entry point of the CUDA backend library (build/libmgt_cuda.so, made by
   `ninja cuda`). mgt.h opens the library with dlopen only when a run asks for device = cuda (or
   auto) and takes everything through one table, mgt_cuda_api_get(), so the mgt program itself never
   links cudart, cuBLAS, NCCL or NVML and starts on any machine. The table's version (MGT_CUDA_ABI)
   must equal mgt.h's, or mgt.h refuses the library with a message to rebuild it.

   probe: the usable GPUs, or why there are none, in words that say what to do (the CUDA runtime's
   own error, e.g. "CUDA driver version is insufficient for CUDA runtime version" on a machine with
   no driver). readings: NVML through dlopen (kernels/nvml.h), found by PCI bus id, opened once. */
#define _GNU_SOURCE /* dladdr: the file each library was loaded from (mgt doctor) */
#include "mgt.h" /* defines: mgt_cuda_api, mgt_backend, mgt_comm, mgt_gpu_info, mgt_gpu_reading, mgt_cuda_report */

#include <cublasLt.h>     /* defines: cublasLtGetVersion */
#include <cublas_api.h>   /* defines: cublasGetProperty */
#include <cuda_runtime.h> /* defines: cudaGetDeviceCount, cudaGetDeviceProperties, cudaMemGetInfo, cudaDeviceCanAccessPeer */
#include <cudnn.h>        /* defines: cudnnGetVersion */
#include <dlfcn.h>        /* defines: dladdr, dlopen, dlsym */
#include <nccl.h>         /* defines: ncclGetVersion */
#include <pthread.h>      /* defines: pthread_once */
#include <stdio.h>        /* defines: snprintf */
#include <string.h>       /* defines: memset */

#include "backend_cuda.h" /* defines: mgt_cuda_backend_create.. */
#include "comm_nccl.h"    /* defines: mgt_nccl_world_create.. */
#include "nvml.h"         /* defines: mgt_nvml_open, mgt_nvml_find, mgt_nvml_read */

#ifndef MGT_CUDA_ABI
#error "this mgt.h has no CUDA library interface (mgt_cuda_api)"
#endif

static int mgt__cuda_probe(int *devices, char *why, size_t cap) {
    cudaError_t e = cudaGetDeviceCount(devices);
    if (e != cudaSuccess) {
        *devices = 0;
        snprintf(why, cap, "%s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
        return -1;
    }
    if (*devices == 0) {
        snprintf(why, cap, "the CUDA driver reports no GPU");
        return -1;
    }
    return 0;
}

static int mgt__cuda_info(int device, mgt_gpu_info *out) {
    struct cudaDeviceProp p;
    size_t free_bytes = 0, total = 0;
    memset(out, 0, sizeof *out);
    if (cudaGetDeviceProperties(&p, device) != cudaSuccess) return -1;
    snprintf(out->name, sizeof out->name, "%.95s", p.name);
    snprintf(out->pci_bus_id, sizeof out->pci_bus_id, "%08x:%02x:%02x.0", (unsigned)p.pciDomainID, (unsigned)p.pciBusID, (unsigned)p.pciDeviceID);
    out->memory_total = p.totalGlobalMem;
    out->sm_count = p.multiProcessorCount;
    out->cc_major = p.major;
    out->cc_minor = p.minor;
    if (cudaSetDevice(device) == cudaSuccess && cudaMemGetInfo(&free_bytes, &total) == cudaSuccess) out->memory_free = free_bytes;
    return 0;
}

/* NVML, opened on first use by any rank */
static pthread_once_t mgt__nvml_once = PTHREAD_ONCE_INIT;
static mgt_nvml mgt__nvml_state;
static int mgt__nvml_ok;
static void mgt__nvml_init(void) { mgt__nvml_ok = mgt_nvml_open(&mgt__nvml_state) == 0; }

static int mgt__cuda_reading(int device, mgt_gpu_reading *out) {
    mgt_gpu_info info;
    mgt_nvml_device handle;
    size_t free_bytes = 0, total = 0;
    memset(out, 0, sizeof *out);
    if (cudaSetDevice(device) == cudaSuccess && cudaMemGetInfo(&free_bytes, &total) == cudaSuccess) {
        out->memory_used = (double)(total - free_bytes);
        out->memory_total = (double)total;
        out->has_memory = 1;
    }
    pthread_once(&mgt__nvml_once, mgt__nvml_init);
    if (mgt__nvml_ok && mgt__cuda_info(device, &info) == 0 && mgt_nvml_find(&mgt__nvml_state, info.pci_bus_id, (unsigned)device, &handle) == 0) {
        mgt_nvml_reading g;
        mgt_nvml_read(&mgt__nvml_state, handle, &g);
        out->util_pct = g.util_pct;
        out->power_w = g.power_w;
        out->temp_c = g.temp_c;
        out->has_util = g.has_util;
        out->has_power = g.has_power;
        out->has_temp = g.has_temp;
    }
    return 0;
}

/* one library as loaded: its version (as it says) and the file that holds `symbol` */
static void mgt__cuda_library(mgt_cuda_report *r, const char *name, const char *version, const void *symbol) {
    Dl_info info;
    if (r->libraries >= (int)(sizeof r->library / sizeof r->library[0])) return;
    snprintf(r->library[r->libraries].name, sizeof r->library[0].name, "%s", name);
    snprintf(r->library[r->libraries].version, sizeof r->library[0].version, "%s", version);
    snprintf(r->library[r->libraries].path, sizeof r->library[0].path, "%s", symbol && dladdr(symbol, &info) && info.dli_fname ? info.dli_fname : "");
    r->libraries++;
}
static void mgt__cuda_report(mgt_cuda_report *r) {
    char v[32];
    int major = 0, minor = 0, patch = 0, n = 0, i, j;
    size_t cudnn = cudnnGetVersion();
    void *nvrtc;
    typedef int (*nvrtc_version_fn)(int *, int *);
    memset(r, 0, sizeof *r);
    if (cudaDriverGetVersion(&r->driver_version) != cudaSuccess) r->driver_version = -1;
    if (cudaRuntimeGetVersion(&r->runtime_version) != cudaSuccess) r->runtime_version = -1;
    (void)cudaGetLastError();
    cublasGetProperty(MAJOR_VERSION, &major);
    cublasGetProperty(MINOR_VERSION, &minor);
    cublasGetProperty(PATCH_LEVEL, &patch);
    snprintf(v, sizeof v, "%d.%d.%d", major, minor, patch);
    mgt__cuda_library(r, "cuBLAS", v, (const void *)cublasGetProperty);
    snprintf(v, sizeof v, "%zu", cublasLtGetVersion());
    mgt__cuda_library(r, "cuBLASLt", v, (const void *)cublasLtGetVersion);
    snprintf(v, sizeof v, "%zu.%zu.%zu", cudnn / 10000, cudnn / 100 % 100, cudnn % 100);
    mgt__cuda_library(r, "cuDNN", v, (const void *)cudnnGetVersion);
    if (ncclGetVersion(&major) == ncclSuccess) snprintf(v, sizeof v, "%d.%d.%d", major / 10000, major / 100 % 100, major % 100);
    else snprintf(v, sizeof v, "unknown");
    mgt__cuda_library(r, "NCCL", v, (const void *)ncclGetVersion);
    snprintf(v, sizeof v, "libnvrtc.so.%d", CUDART_VERSION / 1000); /* opened as cuDNN opens it (attention_cudnn.cpp) */
    nvrtc = dlopen(v, RTLD_NOW | RTLD_GLOBAL);
    if (nvrtc) {
        void *sym = dlsym(nvrtc, "nvrtcVersion");
        nvrtc_version_fn fn;
        memcpy(&fn, &sym, sizeof sym);
        if (sym && fn(&major, &minor) == 0) snprintf(v, sizeof v, "%d.%d", major, minor);
        mgt__cuda_library(r, "NVRTC", sym ? v : "unknown", sym);
    } else
        mgt__cuda_library(r, "NVRTC", "not found", NULL);
    pthread_once(&mgt__nvml_once, mgt__nvml_init);
    if (!mgt__nvml_ok) snprintf(r->nvml_why, sizeof r->nvml_why, "%s", mgt__nvml_state.why);
    if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
    (void)cudaGetLastError();
    r->gpus = n < MGT_CUDA_REPORT_GPUS ? n : MGT_CUDA_REPORT_GPUS;
    for (i = 0; i < r->gpus; i++) {
        mgt_gpu_info info;
        mgt_nvml_device handle;
        mgt_nvml_board b = {-1, -1, -1, -1, -1};
        int khz;
        r->gpu[i].sm_clock_mhz = cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, i) == cudaSuccess ? khz / 1000 : -1;
        r->gpu[i].memory_clock_mhz = cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, i) == cudaSuccess ? khz / 1000 : -1;
        r->gpu[i].ecc = cudaDeviceGetAttribute(&khz, cudaDevAttrEccEnabled, i) == cudaSuccess ? khz : -1;
        (void)cudaGetLastError();
        if (mgt__nvml_ok && mgt__cuda_info(i, &info) == 0 && mgt_nvml_find(&mgt__nvml_state, info.pci_bus_id, (unsigned)i, &handle) == 0)
            mgt_nvml_board_read(&mgt__nvml_state, handle, &b);
        else if (mgt__nvml_ok && !r->nvml_why[0])
            snprintf(r->nvml_why, sizeof r->nvml_why, "%s", mgt__nvml_state.why);
        r->gpu[i].power_limit_w = b.power_limit_w;
        r->gpu[i].pcie_generation = b.pcie_generation;
        r->gpu[i].pcie_width = b.pcie_width;
        r->gpu[i].nvlinks_active = b.nvlinks_active;
        for (j = 0; j < r->gpus; j++) {
            int can = 0;
            r->peer[i][j] = i == j ? 1 : cudaDeviceCanAccessPeer(&can, i, j) == cudaSuccess ? (signed char)(can != 0) : -1;
        }
        (void)cudaGetLastError();
    }
}

static mgt_result mgt__cuda_world_create(int world, int first, int count, const int *devices, const void *unique_id, double timeout_s,
                                         mgt_fail_fn fail, void **out) {
    return mgt_nccl_world_create(world, first, count, devices, unique_id, timeout_s, fail, (mgt_nccl_world **)out);
}
static int mgt__cuda_backend_create(void *world, int device, int dtype, mgt_backend **out, char *why, size_t cap) {
    return mgt_cuda_backend_create(mgt_nccl_watchdog((mgt_nccl_world *)world), device, dtype, out, why, cap); /* the two meet only here */
}
static mgt_result mgt__cuda_comm_create(void *world, int rank, void *stream, const mgt_group *const *groups, int ngroups, mgt_comm **out) {
    return mgt_nccl_comm_create((mgt_nccl_world *)world, rank, stream, groups, ngroups, out);
}
static void mgt__cuda_world_abort(void *world) { mgt_nccl_world_abort((mgt_nccl_world *)world); }
static void mgt__cuda_world_destroy(void *world) { mgt_nccl_world_destroy((mgt_nccl_world *)world); }

__attribute__((visibility("default"))) const mgt_cuda_api *mgt_cuda_api_get(void) {
    static const mgt_cuda_api api = {
        MGT_CUDA_ABI,
        mgt__cuda_probe,
        mgt__cuda_info,
        mgt__cuda_reading,
        mgt__cuda_backend_create,
        mgt_cuda_backend_destroy,
        mgt_cuda_backend_stream,
        mgt_nccl_unique_id,
        mgt__cuda_world_create,
        mgt__cuda_comm_create,
        mgt_nccl_settle,
        mgt_nccl_comm_destroy,
        mgt__cuda_world_abort,
        mgt__cuda_world_destroy,
        mgt__cuda_report,
        mgt_cuda_set_logger,
    };
    return &api;
}
