/* nccl_fake.cpp - a checking fake of NCCL for ranks that are threads of one process.

   Compiled against the real nccl.h (extern "C" definitions: a signature change is a compile
   error, an unfaked function a link error).

   MODEL
   - Communicators: ncclCommInitAll (one per device, made by one thread), ncclGetUniqueId +
     ncclCommInitRank (each rank thread joins; the call returns when all have), ncclCommSplit
     (color/key, NCCL_SPLIT_NOCOLOR; ranks ordered by key, then parent rank). One thread drives each
     rank (a group spanning several ranks on one thread is not supported).
   - Every collective and send/recv is a stream operation (tests/fakes/cudart_fake.cpp): it is
     checked and enqueued at the call and performed when its stream runs, so a host that forgets
     to synchronise, or orders streams wrongly, sees it. The send buffer is read and the receive
     buffer written, as device memory of the communicator's device, with the hazard check.
   - When the stream runs, a collective meets the other ranks at a rendezvous keyed by
     (communicator, sequence number); the last rank to arrive computes it for everyone. Sums are
     accumulated in rank order in fp32 (fp32, bf16, fp16: rounded once at the end) or fp64
     (ncclFloat64, ncclInt32), so results are deterministic. Ops: ncclSum, ncclAvg, ncclMax,
     ncclMin (ncclProd and custom ops abort as unsupported). Types: fp32, fp64, bf16, fp16,
     int32 for reductions; any type for broadcast, all-gather, send and recv.
   - ncclGroupStart/End collect a thread's calls and enqueue them as one operation per stream that
     posts every send and arrives at every collective before it waits for anything, so the sends
     and receives of a ring inside a group do not deadlock (outside a group a send waits for its
     receive, as a large NCCL send does).
   - ncclCommAbort (from any thread) ends every wait of the ranks of that communicator, so a rank
     blocked in a collective returns; operations of an aborted communicator compute nothing.

   CHECKS (abort with "mgt fake <api>: ..."), naming both calls and both ranks:
   - the k-th collectives of the ranks of a communicator differ in operation, count, type,
     reduction or root; the k-th send from rank a to b and the k-th receive on b from a differ in
     count or type; a peer or root outside the communicator, a send to oneself;
   - ncclCommDestroy with operations still queued, with a collective other ranks issued and this
     rank never did, or with a send to it never received (or a receive never sent);
   - a deadlock: every thread that owns a live rank waits inside the fakes (a rendezvous, a receive,
     an unreceived send) and nothing moved for a second; the report lists what each waits for. */
#include "fake_core.h" /* defines: mgtfake::enqueue, wait, mem_use, fail */
#include <nccl.h>      /* defines: the declarations faked here */
#include <stdlib.h>    /* defines: malloc */
#include <unistd.h>    /* defines: getpid */
#include <algorithm>   /* defines: std::sort */
#include <map>         /* defines: std::map */

using namespace mgtfake;

enum kind { ALLREDUCE, REDUCESCATTER, ALLGATHER, BROADCAST, SEND, RECV };
static const char *kind_names[] = {"ncclAllReduce", "ncclReduceScatter", "ncclAllGather", "ncclBroadcast", "ncclSend",
                                   "ncclRecv"};
struct sig {
    kind k;
    size_t count;
    ncclDataType_t type;
    ncclRedOp_t op;
    int root; /* the root, or the peer of a send/recv */
};
struct group_t;
struct ncclComm {
    group_t *g;
    int rank, device;
    bool destroyed;
    const void *owner; /* the thread that drives this rank, for the deadlock check */
    uint64_t coll_enq, split_enq;
    long pending; /* operations enqueued and not yet performed */
};
struct sig_rec {
    int rank, seen;
    sig s;
};
struct slot {
    int arrived = 0, left = 0;
    bool done = false;
    std::vector<std::pair<const void *, void *>> bufs; /* per rank: send, receive */
};
struct posted {
    const void *buf;
    bool consumed;
};
struct chan {
    uint64_t nsend = 0, nrecv = 0;
    std::map<uint64_t, sig> send_sig, recv_sig; /* calls whose partner has not been called yet */
    std::map<uint64_t, posted> post;
};
struct split_slot {
    int arrived = 0, left = 0;
    bool done = false;
    std::vector<std::pair<int, int>> ck; /* per parent rank: color, key */
    std::vector<ncclComm *> out;
};
struct group_t {
    int id, n, joined;
    bool aborted; /* ncclCommAbort of a rank: every wait of the others returns, nothing is computed */
    std::vector<ncclComm *> comms;
    std::map<uint64_t, sig_rec> sigs;
    std::map<uint64_t, slot> slots;
    std::map<std::pair<int, int>, chan> chans;
    std::map<uint64_t, split_slot> splits;
};
static std::vector<group_t *> &groups = *new std::vector<group_t *>; /* never freed, as cudart's tables */
static std::map<std::string, group_t *> &by_id = *new std::map<std::string, group_t *>;

static size_t type_size(ncclDataType_t t) {
    switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
    }
}
static const char *type_name(ncclDataType_t t) {
    static const char *n[] = {"ncclInt8", "ncclUint8", "ncclInt32", "ncclUint32", "ncclInt64", "ncclUint64",
                              "ncclFloat16", "ncclFloat32", "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3",
                              "ncclFloat8e5m2"};
    return (unsigned)t < 12 ? n[t] : "an invalid type";
}
static std::string desc(const sig &s) {
    static const char *ops[] = {"ncclSum", "ncclProd", "ncclMax", "ncclMin", "ncclAvg"};
    std::string r = strf("%s(count %zu, %s", kind_names[s.k], s.count, type_name(s.type));
    if (s.k == ALLREDUCE || s.k == REDUCESCATTER) r += strf(", %s", (unsigned)s.op < 5 ? ops[s.op] : "a custom op");
    if (s.k == BROADCAST) r += strf(", root %d", s.root);
    if (s.k == SEND || s.k == RECV) r += strf(", peer %d", s.root);
    return r + ")";
}
static bool same(const sig &a, const sig &b) {
    return a.k == b.k && a.count == b.count && a.type == b.type &&
           ((a.k != ALLREDUCE && a.k != REDUCESCATTER) || a.op == b.op) && (a.k != BROADCAST || a.root == b.root);
}
static std::string where(const ncclComm *c) {
    return strf("rank %d of a %d-rank communicator (#%d, device %d)", c->rank, c->g->n, c->g->id, c->device);
}

static bool all_owners_stuck(std::string *why) { /* mu held */
    int live = 0;
    for (group_t *g : groups) {
        if (g->joined < g->n) {
            *why = strf("communicator #%d has %d of its %d ranks so far", g->id, g->joined, g->n);
            return false; /* a rank may still be on its way */
        }
        for (ncclComm *c : g->comms) {
            if (c->destroyed) continue;
            if (!c->owner || !(thread_is_waiting(c->owner) || thread_is_gone(c->owner))) {
                *why = c->owner ? "the thread of " + where(c) + " is running" : "no thread has used " + where(c) + " yet";
                return false;
            }
            live++;
        }
    }
    *why = strf("%d live ranks", live);
    return live > 0;
}
static group_t *new_group(int n) { /* mu held */
    set_owner_check(all_owners_stuck);
    group_t *g = new group_t;
    g->id = (int)groups.size();
    g->n = n;
    g->joined = 0;
    g->aborted = false;
    g->comms.assign((size_t)n, nullptr);
    groups.push_back(g);
    return g;
}
static ncclComm *new_comm(group_t *g, int rank, int device, const void *owner) {
    ncclComm *c = new ncclComm{g, rank, device, false, owner, 0, 0, 0};
    g->comms[(size_t)rank] = c;
    g->joined++;
    return c;
}
static ncclComm *comm(const char *api, ncclComm_t c) { /* mu held */
    for (group_t *g : groups)
        for (ncclComm *x : g->comms)
            if (x == c) {
                if (c->destroyed) fail(api, "communicator %p (%s) was destroyed", (void *)c, where(c).c_str());
                return c;
            }
    fail(api, "%p is not a communicator made by ncclCommInitAll/InitRank/Split", (void *)c);
}

/* ---- the operations ------------------------------------------------------------------------------ */
struct nop {
    ncclComm *c;
    sig s;
    uint64_t k; /* collective sequence number, or the index on the send/recv channel */
    const void *send;
    void *recv;
    cudaStream_t stream;
};
static double ld(const void *p, size_t i, ncclDataType_t t) {
    switch (t) {
    case ncclFloat32: return ((const float *)p)[i];
    case ncclFloat64: return ((const double *)p)[i];
    case ncclBfloat16: return bf16_to_float(((const uint16_t *)p)[i]);
    case ncclFloat16: return half_to_float(((const uint16_t *)p)[i]);
    default: return ((const int32_t *)p)[i];
    }
}
static void st(void *p, size_t i, ncclDataType_t t, double v) {
    switch (t) {
    case ncclFloat32: ((float *)p)[i] = (float)v; break;
    case ncclFloat64: ((double *)p)[i] = v; break;
    case ncclBfloat16: ((uint16_t *)p)[i] = float_to_bf16((float)v); break;
    case ncclFloat16: ((uint16_t *)p)[i] = float_to_half((float)v); break;
    default: ((int32_t *)p)[i] = (int32_t)v;
    }
}
/* reduce element i over the ranks' send buffers, in rank order: fp32 unless fp64/int32 */
static double reduce(const slot &sl, int n, size_t i, const sig &s) {
    bool wide = s.type == ncclFloat64 || s.type == ncclInt32;
    double acc = ld(sl.bufs[0].first, i, s.type);
    float accf = (float)acc;
    for (int r = 1; r < n; r++) {
        double v = ld(sl.bufs[(size_t)r].first, i, s.type);
        if (s.op == ncclMax) acc = std::max(acc, v);
        else if (s.op == ncclMin) acc = std::min(acc, v);
        else if (wide) acc += v;
        else accf += (float)v;
    }
    if (s.op == ncclMax || s.op == ncclMin) return acc;
    if (s.op == ncclAvg) return wide ? acc / n : (double)(accf / (float)n);
    return wide ? acc : (double)accf;
}
static void perform(group_t *g, const sig &s, const slot &sl) { /* every rank arrived; mu held */
    int n = g->n;
    size_t es = type_size(s.type), c = s.count;
    if (s.k == ALLREDUCE || s.k == REDUCESCATTER) {
        size_t total = s.k == ALLREDUCE ? c : c * (size_t)n;
        std::vector<double> out(total);
        for (size_t i = 0; i < total; i++) out[i] = reduce(sl, n, i, s);
        for (int r = 0; r < n; r++)
            for (size_t i = 0; i < c; i++)
                st(sl.bufs[(size_t)r].second, i, s.type, out[s.k == ALLREDUCE ? i : (size_t)r * c + i]);
    } else if (s.k == ALLGATHER) {
        std::vector<char> all((size_t)n * c * es);
        for (int r = 0; r < n; r++) memcpy(all.data() + (size_t)r * c * es, sl.bufs[(size_t)r].first, c * es);
        for (int r = 0; r < n; r++) memcpy(sl.bufs[(size_t)r].second, all.data(), all.size());
    } else { /* BROADCAST */
        std::vector<char> data((const char *)sl.bufs[(size_t)s.root].first, (const char *)sl.bufs[(size_t)s.root].first + c * es);
        for (int r = 0; r < n; r++) memcpy(sl.bufs[(size_t)r].second, data.data(), data.size());
    }
}
static std::string wait_what(const nop &o) {
    return strf("%s #%llu as %s", desc(o.s).c_str(), (unsigned long long)o.k, where(o.c).c_str());
}
/* post every send and arrive at every collective, then wait for receives and results, then for the
   sends to be taken: the order that lets a group's send/recv pairs meet */
static void run_ops(const std::vector<nop> &ops) {
    lock_t lk(mu);
    for (const nop &o : ops)
        if (o.c->g->aborted) { /* like NCCL after an abort: the operation ends, its result undefined */
            for (const nop &x : ops) x.c->pending--;
            progress();
            return;
        }
    for (const nop &o : ops) {
        group_t *g = o.c->g;
        if (o.s.k == SEND) {
            g->chans[{o.c->rank, o.s.root}].post[o.k] = posted{o.send, false};
        } else if (o.s.k != RECV) {
            slot &sl = g->slots[o.k];
            if (sl.bufs.empty()) sl.bufs.resize((size_t)g->n);
            sl.bufs[(size_t)o.c->rank] = {o.send, o.recv};
            if (++sl.arrived == g->n) {
                perform(g, o.s, sl);
                sl.done = true;
            }
        }
        progress();
    }
    for (const nop &o : ops) {
        group_t *g = o.c->g;
        if (o.s.k == RECV) {
            chan &ch = g->chans[{o.s.root, o.c->rank}];
            wait(lk, [&] { return ch.post.count(o.k) > 0 || g->aborted; }, wait_what(o));
            if (g->aborted) continue;
            memcpy(o.recv, ch.post[o.k].buf, o.s.count * type_size(o.s.type));
            ch.post[o.k].consumed = true;
            progress();
        } else if (o.s.k != SEND) {
            wait(lk, [&] { return g->slots[o.k].done || g->aborted; }, wait_what(o));
        }
    }
    for (const nop &o : ops) {
        group_t *g = o.c->g;
        if (o.s.k == SEND) {
            chan &ch = g->chans[{o.c->rank, o.s.root}];
            wait(lk, [&] { return ch.post[o.k].consumed || g->aborted; }, wait_what(o) + ", not yet received");
            ch.post.erase(o.k);
        } else if (o.s.k != RECV && ++g->slots[o.k].left == g->n) {
            g->slots.erase(o.k);
        }
        o.c->pending--;
        progress();
    }
}
static void submit(const char *api, std::vector<nop> ops) {
    std::vector<mem_use> acc;
    std::string what;
    for (const nop &o : ops) {
        size_t es = type_size(o.s.type), in = o.s.count * es, out = in;
        if (o.s.k == REDUCESCATTER) in *= (size_t)o.c->g->n;
        if (o.s.k == ALLGATHER) out *= (size_t)o.c->g->n;
        if (o.s.k != RECV && (o.s.k != BROADCAST || o.c->rank == o.s.root)) acc.push_back({o.send, in, false, "send buffer", false});
        if (o.s.k != SEND) acc.push_back({o.recv, out, true, "receive buffer", false});
        what += (what.empty() ? "" : " + ") + desc(o.s);
        if (o.c->device != ops[0].c->device) fail(api, "a group with ranks of devices %d and %d on one stream", ops[0].c->device, o.c->device);
    }
    enqueue(api, ops[0].stream, ops[0].c->device, what + " as " + where(ops[0].c), acc, [ops] { run_ops(ops); });
}

static thread_local int group_depth = 0;
static thread_local std::vector<nop> grouped;

static ncclResult_t call(const char *api, ncclComm_t cm, sig s, const void *send, void *recv, cudaStream_t stream) {
    nop o;
    {
        lock_t lk(mu);
        ncclComm *c = comm(api, cm);
        group_t *g = c->g;
        c->owner = thread_token();
        if (s.type < 0 || s.type >= ncclNumTypes) fail(api, "invalid data type %d, %s", (int)s.type, where(c).c_str());
        bool reduces = s.k == ALLREDUCE || s.k == REDUCESCATTER;
        if (reduces && (s.op == ncclProd || (unsigned)s.op >= ncclNumOps))
            fail(api, "reduction %d is not faked (ncclSum, ncclAvg, ncclMax, ncclMin are), %s", (int)s.op, where(c).c_str());
        if (reduces && s.type != ncclFloat32 && s.type != ncclFloat64 && s.type != ncclBfloat16 && s.type != ncclFloat16 &&
            s.type != ncclInt32)
            fail(api, "reduction over %s is not faked, %s", type_name(s.type), where(c).c_str());
        if ((s.k == BROADCAST || s.k == SEND || s.k == RECV) && (s.root < 0 || s.root >= g->n))
            fail(api, "%s names rank %d, outside the communicator, %s", desc(s).c_str(), s.root, where(c).c_str());
        if ((s.k == SEND || s.k == RECV) && s.root == c->rank) fail(api, "%s to itself, %s", desc(s).c_str(), where(c).c_str());
        if (s.k == SEND || s.k == RECV) { /* the k-th send a->b meets the k-th recv on b from a */
            bool snd = s.k == SEND;
            chan &ch = g->chans[snd ? std::make_pair(c->rank, s.root) : std::make_pair(s.root, c->rank)];
            o.k = snd ? ch.nsend++ : ch.nrecv++;
            auto &mine = snd ? ch.send_sig : ch.recv_sig, &theirs = snd ? ch.recv_sig : ch.send_sig;
            auto it = theirs.find(o.k);
            if (it == theirs.end()) mine[o.k] = s;
            else {
                if (it->second.count != s.count || it->second.type != s.type)
                    fail(api, "mismatched send/receive #%llu between rank %d and rank %d of a %d-rank communicator (#%d): "
                         "rank %d called %s and rank %d called %s", (unsigned long long)o.k, c->rank, s.root, g->n, g->id,
                         s.root, desc(it->second).c_str(), c->rank, desc(s).c_str());
                theirs.erase(it);
            }
        } else {
            o.k = c->coll_enq++;
            sig_rec &r = g->sigs[o.k];
            if (r.seen == 0) r = sig_rec{c->rank, 0, s};
            else if (!same(r.s, s))
                fail(api, "mismatched collective #%llu of a %d-rank communicator (#%d): rank %d called %s and rank %d "
                     "called %s", (unsigned long long)o.k, g->n, g->id, r.rank, desc(r.s).c_str(), c->rank, desc(s).c_str());
            if (++r.seen == g->n) g->sigs.erase(o.k);
        }
        o.c = c;
        c->pending++;
    }
    o.s = s;
    o.send = send;
    o.recv = recv;
    o.stream = stream;
    if (group_depth > 0) grouped.push_back(o);
    else submit(api, {o});
    return ncclSuccess;
}

static ncclComm *split_join(ncclComm *c, int color, int key) { /* the blocking host-side split */
    lock_t lk(mu);
    group_t *g = c->g;
    c->owner = thread_token();
    uint64_t k = c->split_enq++;
    split_slot &sl = g->splits[k];
    if (sl.ck.empty()) sl.ck.assign((size_t)g->n, {0, 0}), sl.out.assign((size_t)g->n, nullptr);
    sl.ck[(size_t)c->rank] = {color, key};
    if (++sl.arrived == g->n) { /* the last to arrive makes every new communicator */
        std::map<int, std::vector<std::pair<int, int>>> members; /* color -> (key, parent rank) */
        for (int r = 0; r < g->n; r++)
            if (sl.ck[(size_t)r].first != NCCL_SPLIT_NOCOLOR) members[sl.ck[(size_t)r].first].push_back({sl.ck[(size_t)r].second, r});
        for (auto &m : members) {
            std::sort(m.second.begin(), m.second.end());
            group_t *ng = new_group((int)m.second.size());
            for (size_t i = 0; i < m.second.size(); i++) {
                ncclComm *p = g->comms[(size_t)m.second[i].second];
                sl.out[(size_t)p->rank] = new_comm(ng, (int)i, p->device, p->owner);
            }
        }
        sl.done = true;
    }
    progress();
    wait(lk, [&] { return sl.done; }, strf("ncclCommSplit #%llu as %s", (unsigned long long)k, where(c).c_str()));
    ncclComm *out = sl.out[(size_t)c->rank];
    if (out) out->owner = c->owner;
    if (++sl.left == g->n) g->splits.erase(k);
    return out;
}

extern "C" {

ncclResult_t ncclGetVersion(int *version) {
    if (!version) return ncclInvalidArgument;
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}
ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    static uint64_t counter = 0;
    if (!id) return ncclInvalidArgument;
    lock_t lk(mu);
    memset(id, 0, sizeof *id);
    snprintf(id->internal, sizeof id->internal, "mgt fake nccl id %d.%llu", (int)getpid(), (unsigned long long)++counter);
    return ncclSuccess;
}
ncclResult_t ncclCommInitRank(ncclComm_t *out, int nranks, ncclUniqueId id, int rank) {
    if (!out || nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
    lock_t lk(mu);
    std::string key(id.internal, sizeof id.internal);
    group_t *&g = by_id[key];
    if (!g) g = new_group(nranks);
    if (g->n != nranks)
        fail("ncclCommInitRank", "rank %d joins unique id '%s' with %d ranks, the ranks before it with %d", rank,
             id.internal, nranks, g->n);
    if (g->comms[(size_t)rank]) fail("ncclCommInitRank", "rank %d of unique id '%s' joins twice", rank, id.internal);
    ncclComm *c = new_comm(g, rank, current_device(), thread_token());
    progress();
    wait(lk, [&] { return g->joined == g->n; }, strf("ncclCommInitRank as %s", where(c).c_str()));
    *out = c;
    return ncclSuccess;
}
ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist) {
    int count = 0;
    cudaGetDeviceCount(&count);
    if (!comms || ndev < 1) return ncclInvalidArgument;
    for (int i = 0; i < ndev; i++)
        if (devlist && (devlist[i] < 0 || devlist[i] >= count))
            fail("ncclCommInitAll", "device %d of the list is not one of the %d devices", devlist[i], count);
    if (!devlist && ndev > count) fail("ncclCommInitAll", "%d ranks on %d devices", ndev, count);
    lock_t lk(mu);
    group_t *g = new_group(ndev);
    for (int i = 0; i < ndev; i++) comms[i] = new_comm(g, i, devlist ? devlist[i] : i, nullptr);
    return ncclSuccess;
}
ncclResult_t ncclCommSplit(ncclComm_t parent, int color, int key, ncclComm_t *out, ncclConfig_t *) {
    if (!out || (color < 0 && color != NCCL_SPLIT_NOCOLOR)) return ncclInvalidArgument;
    ncclComm *c;
    {
        lock_t lk(mu);
        c = comm("ncclCommSplit", parent);
    }
    *out = split_join(c, color, key);
    return ncclSuccess;
}
static ncclResult_t destroy(const char *api, ncclComm_t cm, bool check) {
    lock_t lk(mu);
    ncclComm *c = comm(api, cm);
    group_t *g = c->g;
    if (check && c->pending)
        fail(api, "%ld operations of %s are still queued: synchronise its streams first", c->pending, where(c).c_str());
    for (auto &kv : g->sigs)
        if (check && kv.first >= c->coll_enq)
            fail(api, "collective #%llu %s that rank %d issued was never issued by %s", (unsigned long long)kv.first,
                 desc(kv.second.s).c_str(), kv.second.rank, where(c).c_str());
    for (auto &kv : g->chans) {
        if (!check) break;
        if (kv.first.second == c->rank && !kv.second.send_sig.empty())
            fail(api, "unmatched send: rank %d called %s (#%llu to this rank), never received by %s", kv.first.first,
                 desc(kv.second.send_sig.begin()->second).c_str(), (unsigned long long)kv.second.send_sig.begin()->first,
                 where(c).c_str());
        if (kv.first.first == c->rank && !kv.second.recv_sig.empty())
            fail(api, "unmatched receive: rank %d called %s (#%llu from this rank), never sent by %s", kv.first.second,
                 desc(kv.second.recv_sig.begin()->second).c_str(), (unsigned long long)kv.second.recv_sig.begin()->first,
                 where(c).c_str());
    }
    c->destroyed = true; /* kept, so a later use is reported */
    if (!check) g->aborted = true;
    progress();
    return ncclSuccess;
}
ncclResult_t ncclCommDestroy(ncclComm_t c) { return destroy("ncclCommDestroy", c, true); }
ncclResult_t ncclCommAbort(ncclComm_t c) { return destroy("ncclCommAbort", c, false); }
ncclResult_t ncclCommCount(const ncclComm_t cm, int *count) {
    lock_t lk(mu);
    if (!count) return ncclInvalidArgument;
    *count = comm("ncclCommCount", cm)->g->n;
    return ncclSuccess;
}
ncclResult_t ncclCommUserRank(const ncclComm_t cm, int *rank) {
    lock_t lk(mu);
    if (!rank) return ncclInvalidArgument;
    *rank = comm("ncclCommUserRank", cm)->rank;
    return ncclSuccess;
}
ncclResult_t ncclCommCuDevice(const ncclComm_t cm, int *device) {
    lock_t lk(mu);
    if (!device) return ncclInvalidArgument;
    *device = comm("ncclCommCuDevice", cm)->device;
    return ncclSuccess;
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t cm, ncclResult_t *e) {
    lock_t lk(mu);
    comm("ncclCommGetAsyncError", cm);
    if (!e) return ncclInvalidArgument;
    *e = ncclSuccess; /* failures abort instead */
    return ncclSuccess;
}
const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    default: return "an NCCL result the fake does not produce";
    }
}
const char *ncclGetLastError(ncclComm_t) { return ""; }

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                           cudaStream_t s) {
    return call("ncclAllReduce", c, sig{ALLREDUCE, count, t, op, 0}, send, recv, s);
}
ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recvcount, ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t c, cudaStream_t s) {
    return call("ncclReduceScatter", c, sig{REDUCESCATTER, recvcount, t, op, 0}, send, recv, s);
}
ncclResult_t ncclAllGather(const void *send, void *recv, size_t sendcount, ncclDataType_t t, ncclComm_t c,
                           cudaStream_t s) {
    return call("ncclAllGather", c, sig{ALLGATHER, sendcount, t, ncclSum, 0}, send, recv, s);
}
ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t t, int root, ncclComm_t c,
                           cudaStream_t s) {
    return call("ncclBroadcast", c, sig{BROADCAST, count, t, ncclSum, root}, send, recv, s);
}
ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t s) {
    return call("ncclSend", c, sig{SEND, count, t, ncclSum, peer}, send, nullptr, s);
}
ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t s) {
    return call("ncclRecv", c, sig{RECV, count, t, ncclSum, peer}, nullptr, recv, s);
}
ncclResult_t ncclGroupStart(void) {
    group_depth++;
    return ncclSuccess;
}
ncclResult_t ncclGroupEnd(void) {
    if (group_depth == 0) fail("ncclGroupEnd", "without ncclGroupStart");
    if (--group_depth > 0) return ncclSuccess;
    std::vector<nop> all;
    all.swap(grouped);
    while (!all.empty()) { /* one operation per stream, in call order */
        std::vector<nop> mine, rest;
        for (const nop &o : all) (o.stream == all[0].stream ? mine : rest).push_back(o);
        submit("ncclGroupEnd", mine);
        all.swap(rest);
    }
    return ncclSuccess;
}

} /* extern "C" */
