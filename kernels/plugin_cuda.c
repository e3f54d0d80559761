/* kernels/plugin_cuda.c: the entry point of the CUDA backend library (build/libmgt_cuda.so, made by
   `ninja cuda`). mgt.h opens the library with dlopen only when a run asks for device = cuda (or
   auto) and takes everything through one table, mgt_cuda_api_get(), so the mgt program itself never
   links cudart, cuBLAS, NCCL or NVML and starts on any machine. The table's version (MGT_CUDA_ABI)
   must equal mgt.h's, or mgt.h refuses the library with a message to rebuild it.

   probe: the usable GPUs, or why there are none, in words that say what to do (the CUDA runtime's
   own error, e.g. "CUDA driver version is insufficient for CUDA runtime version" on a machine with
   no driver). readings: NVML through dlopen (kernels/nvml.h), found by PCI bus id, opened once. */
#include "mgt.h" /* defines: mgt_cuda_api, mgt_backend, mgt_comm, mgt_gpu_info, mgt_gpu_reading */

#include <cuda_runtime.h> /* defines: cudaGetDeviceCount, cudaGetDeviceProperties, cudaMemGetInfo */
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

static mgt_result mgt__cuda_world_create(int world, int first, int count, const int *devices, const void *unique_id, double timeout_s,
                                         mgt_fail_fn fail, void **out) {
    return mgt_nccl_world_create(world, first, count, devices, unique_id, timeout_s, fail, (mgt_nccl_world **)out);
}
static int mgt__cuda_backend_create(void *world, int device, int dtype, mgt_backend **out, char *why, size_t cap) {
    return mgt_cuda_backend_create((mgt_nccl_world *)world, device, dtype, out, why, cap);
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
    };
    return &api;
}
