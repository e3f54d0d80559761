/* nccl_fake.cpp - a checking fake of NCCL for ranks that are threads of one process or of several.

   Compiled against the real nccl.h (extern "C" definitions: a signature change is a compile
   error, an unfaked function a link error).

   MODEL
   - Communicators: ncclCommInitAll (one per device, made by one thread), ncclGetUniqueId +
     ncclCommInitRank / ncclCommInitRankConfig (each rank joins; a blocking join returns when all
     have, a non-blocking one (config blocking = 0, or inside ncclGroupStart/End) at once, its
     state ncclInProgress until all have), ncclCommSplit (color/key, NCCL_SPLIT_NOCOLOR; ranks
     ordered by key, then parent rank; non-blocking as its config or its parent says: the new
     handle at once, in progress until every rank of the parent has split), ncclCommFinalize,
     ncclCommDestroy, ncclCommAbort. ncclCommGetAsyncError answers the state: ncclInProgress,
     ncclSuccess, or an error (an injected one, or ncclUnhandledCudaError on a device whose kernel
     faulted). One thread drives each rank (a group spanning several ranks on one thread is not
     supported, but for initialisation).
   - Every collective and send/recv is a stream operation (tests/fakes/cudart_fake.cpp): it is
     checked and enqueued at the call and performed when its stream runs (a host that
     synchronises, or one that polls: the operation then goes as far as it can without waiting and
     resumes at the next poll), so a host that forgets to synchronise, or orders streams wrongly,
     sees it. A rank waiting for a peer whose part is launched (enqueued) runs the peer's stream up
     to it, as the peer's GPU would whatever the peer's host thread does meanwhile; a part that was
     never launched (its host thread blocked before the call) is what a rank waits for in vain. The send buffer is read and the receive buffer written, as device memory of the
     communicator's device, with the hazard check.
   - When the stream runs, a collective arrives at a rendezvous keyed by (communicator, sequence
     number) with a copy of its input; the last rank to arrive computes every rank's result, which
     each rank then copies into its own buffer. Sums are accumulated in rank order in fp32 (fp32,
     bf16, fp16: rounded once at the end) or fp64 (ncclFloat64, ncclInt32), so results are
     deterministic. Ops: ncclSum, ncclAvg, ncclMax, ncclMin (ncclProd and custom ops abort as
     unsupported). Types: fp32, fp64, bf16, fp16, int32 for reductions; any type for broadcast,
     all-gather, send and recv.
   - ncclGroupStart/End collect a thread's calls and enqueue them as one operation per stream that
     posts every send and arrives at every collective before it waits for anything, so the sends
     and receives of a ring inside a group do not deadlock (outside a group a send waits for its
     receive, as a large NCCL send does).
   - ncclCommAbort (from any thread) ends every wait of the ranks of that communicator, so a rank
     blocked in a collective returns; operations of an aborted communicator compute nothing.
   - LATE LAUNCH. On a non-blocking communicator NCCL may launch a call (or a group's calls) from a
     thread of its own (src/group.cc: whenever something must be connected first) and answer
     ncclInProgress; the work reaches the stream only when that thread has run, and the caller learns
     it by polling ncclCommGetAsyncError until ncclSuccess. The fake does the same for every call that
     connects (below) and for MGT_FAKE_NCCL_LATE percent (default 10) of the others, drawn from a
     generator seeded by MGT_FAKE_NCCL_SEED: its thread enqueues the call 0.1 to 1.1 ms later. So a
     caller that orders its streams after the call (records an event) before the poll says ncclSuccess
     orders them after nothing, and the hazard check (cudart_fake.cpp) names the stream that touches
     the buffer before the collective that writes it. The thread is joined by the poll that sees it
     done, or by ncclCommDestroy/Abort.
   - LAZY CONNECTION. NCCL 2.22 and later connect each algorithm of a communicator at its first use
     (NCCL_RUNTIME_CONNECT, default 1; read once, when the first communicator is made): the fake's
     tuner runs all-reduces of up to 64 KiB on trees and everything else on rings, so a 1-element
     warm-up connects trees only. With NCCL_RUNTIME_CONNECT=0 every algorithm is connected when the
     communicator is made. Sends and receives always connect their pair at first use.

   CHECKS (abort with "mgt fake <api>: ..."), naming both calls and both ranks:
   - the k-th collectives of the ranks of a communicator differ in operation, count, type,
     reduction or root; the k-th send from rank a to b and the k-th receive on b from a differ in
     count or type; a peer or root outside the communicator, a send to oneself;
   - ncclCommDestroy with operations still queued, with a collective other ranks issued and this
     rank never did, or with a send to it never received (or a receive never sent);
   - a call on a non-blocking communicator whose state is still ncclInProgress (its creation, or its
     previous call, has not finished: poll ncclCommGetAsyncError first);
   - ncclCommAbort or ncclCommDestroy of a communicator that another thread is inside an NCCL call
     on (NCCL frees it under that thread); ncclCommGetAsyncError of a communicator in progress takes
     a millisecond, as NCCL's progress engine runs inside it, so such a window is wide;
   - inside a step of the calling rank's device (kernels/fake_note.h): creating, splitting,
     finalizing or destroying a communicator, the first collective on an algorithm not connected
     yet (LAZY CONNECTION) and the first send or receive between two of its ranks in each direction
     (NCCL connects lazily, allocating and synchronising: connect everything when the run is made);
   - a deadlock: every thread that owns a live rank waits inside the fakes (a rendezvous, a receive,
     an unreceived send, the driver's lock) and nothing moved for a second; the report lists what
     each waits for.

   FAULTS (tests/fakes/README.md), counted over the NCCL calls (collectives, sends and receives)
   that rank R's thread makes inside steps:
   - MGT_FAKE_STALL_RANK=R, MGT_FAKE_STALL_CALL=N (default 1): rank R never arrives at its N-th call:
     the call answers ncclInProgress and its communicator stays in progress, enqueueing nothing,
     until it is aborted (a blocking communicator keeps the thread inside the call instead);
   - MGT_FAKE_NCCL_ERROR=R (with MGT_FAKE_STALL_CALL=N): rank R's N-th call is enqueued but never
     arrives, and its communicator reports ncclRemoteError asynchronously (ncclGetLastError says
     why) until it is aborted.
   Each prints one line, "mgt fake: ...", naming the call, its communicator and sequence number.

   ACROSS PROCESSES (mgt under mpirun, issue 17): the fake's own transport, not MPI, so it needs
   nothing but the unique id that the caller moves between its processes, as NCCL does. In a
   process started by an MPI launcher of more than one process (OMPI_COMM_WORLD_SIZE or PMI_SIZE
   above 1), or with MGT_FAKE_NCCL_PROCESSES=1, ncclGetUniqueId listens on a Unix socket in the
   abstract namespace whose name is the id ("mgt-fake-nccl-<pid>-<n>": no file to clean up), with
   a thread that accepts (elsewhere no thread is made: the watchdog tests count them); a process
   that joins an id made by another connects to it. The id's process is the hub: every event of a rank that other processes must
   see (a rank joined, arrived at a split, called a collective or send/recv with its signature, a
   collective's input arrived, a send's data was posted or taken, a communicator was aborted) is
   a message, which the hub applies and forwards to every other process in the one order it
   applied them, so every process holds the same state of every communicator (its own ranks, and
   a stand-in for each rank of another process) and the checks above run unchanged: a mismatch is
   found by whichever process sees both calls. Each process computes a collective's result from
   the same inputs in the same rank order, so every process gets the same bits. Sockets are
   written by a thread per connection from a queue (never under the fakes' mutex, so two
   processes cannot block each other's writes) and read by one that applies what arrives. What is
   not seen across processes: the deadlock check needs every rank's thread, so it stands aside
   while a communicator has a rank in another process (mgt's [parallel] timeout_s watchdog and
   MGT_FAKE_TIMEOUT_S end such a hang), and a peer that exits is not reported (a wait for it
   ends at those deadlines). An abort reaches the other processes' ranks as ncclRemoteError. */
#include "fake_core.h" /* defines: mgtfake::enqueue, wait, mem_use, fail */
#include <nccl.h>      /* defines: the declarations faked here */
#include <stdio.h>     /* defines: fprintf, snprintf */
#include <stdlib.h>    /* defines: getenv, atoi */
#include <errno.h>     /* defines: errno, EINTR */
#include <sys/socket.h> /* defines: socket, bind, listen, accept, connect, send, recv */
#include <sys/un.h>    /* defines: sockaddr_un */
#include <unistd.h>    /* defines: getpid, close */
#include <algorithm>   /* defines: std::sort, std::find */
#include <deque>       /* defines: std::deque */
#include <map>         /* defines: std::map */
#include <memory>      /* defines: std::shared_ptr */
#include <set>         /* defines: std::set */
#include <chrono>      /* defines: std::chrono::milliseconds */
#include <thread>      /* defines: std::this_thread::sleep_for */

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
struct launch_job;
struct ncclComm {
    group_t *g; /* nullptr while a non-blocking split is in progress */
    int rank, device;
    bool destroyed, nonblocking;
    const void *owner; /* the thread that drives this rank, for the deadlock check */
    uint64_t coll_enq, split_enq;
    long pending;        /* operations enqueued and not yet performed */
    ncclResult_t state;  /* what ncclCommGetAsyncError answers */
    std::string error;   /* ncclGetLastError, after an injected error */
    bool eager;          /* made with NCCL_RUNTIME_CONNECT=0: every algorithm connected at creation */
    std::set<int> connected;                /* algorithms (ALGO_*) connected so far */
    std::set<std::pair<int, int>> p2p_warm; /* (peer, 0 send / 1 receive) used outside any step */
    int inside;          /* NCCL calls on it in progress (a thread inside one), for the abort check */
    const void *inside_thread;
    bool remote;         /* a stand-in for a rank of another process */
    std::shared_ptr<launch_job> launching; /* its last call, launched later by NCCL's thread */
};
struct sig_rec {
    int rank, seen;
    sig s;
};
struct slot {
    int arrived = 0, left = 0;
    bool done = false;
    std::vector<std::vector<char>> in, out; /* per rank: a copy of its input when it arrived, its result */
    std::map<int, ticket> launched;         /* per rank: where its part waits in its stream */
};
struct posted {
    std::shared_ptr<std::vector<char>> data; /* the send buffer, copied when the send was posted */
    bool consumed;
};
struct chan {
    uint64_t nsend = 0, nrecv = 0;
    std::map<uint64_t, sig> send_sig, recv_sig; /* calls whose partner has not been called yet */
    std::map<uint64_t, posted> post;
    std::map<uint64_t, ticket> sent, received; /* where each send and receive waits in its stream */
};
struct split_slot {
    int arrived = 0, left = 0;
    bool done = false;
    std::vector<std::pair<int, int>> ck; /* per parent rank: color, key */
    std::vector<ncclComm *> out;         /* per parent rank: its new communicator (made when it arrives) */
};
struct net_t;
struct group_t {
    int id, n, joined;
    int nlocal, nremote; /* ranks of this process, of others */
    std::string key;     /* its name across processes: the unique id's, then /split.color */
    net_t *net;          /* the connections to the other processes (nullptr: ncclCommInitAll's) */
    bool aborted; /* ncclCommAbort of a rank: every wait of the others returns, nothing is computed */
    std::vector<ncclComm *> comms;
    std::map<uint64_t, sig_rec> sigs;
    std::map<uint64_t, slot> slots;
    std::map<std::pair<int, int>, chan> chans;
    std::map<uint64_t, split_slot> splits;
};
static std::vector<group_t *> &groups = *new std::vector<group_t *>; /* never freed, as cudart's tables */
static std::set<ncclComm *> &comms_made = *new std::set<ncclComm *>;
static std::map<std::string, group_t *> &by_key = *new std::map<std::string, group_t *>;

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
    if (!c->g) return strf("a communicator of device %d still being split", c->device);
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
            if (c->remote) {
                *why = strf("rank %d of communicator #%d is in another process, whose threads this one cannot see", c->rank, g->id);
                return false;
            }
            const void *owner = c->owner ? c->owner : device_owner(c->device); /* made on another thread: its device's */
            if (!owner || !(thread_is_waiting(owner) || thread_is_gone(owner))) {
                *why = owner ? "the thread of " + where(c) + " is running" : "no thread has used " + where(c) + " yet";
                return false;
            }
            live++;
        }
    }
    *why = strf("%d live ranks", live);
    return live > 0;
}
static group_t *new_group(int n, const std::string &key = "", net_t *net = nullptr) { /* mu held */
    set_owner_check(all_owners_stuck);
    group_t *g = new group_t;
    g->id = (int)groups.size();
    g->n = n;
    g->joined = g->nlocal = g->nremote = 0;
    g->key = key;
    g->net = net;
    if (!key.empty()) by_key[key] = g;
    g->aborted = false;
    g->comms.assign((size_t)n, nullptr);
    groups.push_back(g);
    return g;
}
/* NCCL 2.22 and later connect each algorithm of a communicator at its first use (NCCL_RUNTIME_CONNECT,
   default 1): inside the call, allocating device memory and launching from a thread of NCCL's. Read
   once, at the first communicator, as NCCL reads its parameters */
static bool lazy_connect() { /* mu held */
    static int lazy = -1;
    if (lazy < 0) {
        const char *e = getenv("NCCL_RUNTIME_CONNECT");
        lazy = !(e && *e && atoi(e) == 0);
    }
    return lazy != 0;
}
static ncclComm *make_comm(int device, const void *owner, bool nonblocking, bool remote = false) { /* mu held */
    ncclComm *c = new ncclComm{nullptr, -1, device, false, nonblocking, owner, 0, 0, 0, ncclSuccess, {}, !lazy_connect(), {}, {}, 0, nullptr,
                               remote, nullptr};
    if (!remote) comms_made.insert(c); /* a stand-in is no handle a caller may use */
    return c;
}
static void attach(group_t *g, int rank, ncclComm *c) { /* mu held: c becomes rank `rank` of g */
    c->g = g;
    c->rank = rank;
    g->comms[(size_t)rank] = c;
    g->joined++;
    (c->remote ? g->nremote : g->nlocal)++;
}
static void joined(group_t *g) { /* mu held: the last rank has joined, every non-blocking member is ready */
    if (g->joined == g->n)
        for (ncclComm *m : g->comms)
            if (m->state == ncclInProgress) m->state = ncclSuccess;
}
static ncclComm *new_comm(group_t *g, int rank, int device, const void *owner) {
    ncclComm *c = make_comm(device, owner, false);
    attach(g, rank, c);
    return c;
}
/* mu held: a live communicator; `any_state`: also one still in progress (the calls that ask, end or
   abort it) */
static ncclComm *comm(const char *api, ncclComm_t c, bool any_state = false) {
    if (!comms_made.count(c)) fail(api, "%p is not a communicator made by ncclCommInitAll/InitRank/Split", (void *)c);
    if (c->destroyed) fail(api, "communicator %p (%s) was destroyed", (void *)c, where(c).c_str());
    if (!any_state && c->state == ncclInProgress)
        fail(api, "%s of a non-blocking communicator whose state is still ncclInProgress (its creation or its previous call has "
             "not finished: poll ncclCommGetAsyncError until ncclSuccess first)", where(c).c_str());
    return c;
}

/* a thread inside an NCCL call on c (mu held at both ends): ncclCommAbort from another thread meanwhile
   would free the communicator under it */
struct inside_call {
    ncclComm *c;
    inside_call(ncclComm *comm) : c(comm) {
        c->inside++;
        c->inside_thread = thread_token();
    }
    ~inside_call() { c->inside--; }
};

/* ---- across processes (the header's ACROSS PROCESSES) -------------------------------------- */
enum msg_kind { M_JOIN, M_SPLIT, M_SIG, M_ARRIVE, M_POST, M_TAKEN, M_ABORT };
struct msg {
    int32_t kind, rank, peer, n, color, key; /* peer: a send's receiver; n: a joined rank's count */
    uint64_t k;                             /* the collective's, split's or channel's sequence number */
    sig s;
    std::string group, data; /* the communicator's key; a collective's input or a send's data */
};
struct wire { /* a message's fixed part on the socket (both ends run this same build) */
    int32_t kind, rank, peer, n, color, key;
    uint64_t k;
    sig s;
    uint64_t group_bytes, data_bytes;
};
struct link_t { /* a connection to another process: its queue of frames, written by its own thread */
    int fd;
    std::mutex m; /* guards q, never held with mu taken inside it */
    std::condition_variable cv;
    std::deque<std::string> q;
};
struct net_t {
    std::string name;
    bool hub;                       /* this process made the unique id: it forwards what it applies */
    std::vector<link_t *> links;    /* the hub's: one per process; the others': the hub */
    std::vector<std::string> joins; /* the hub's JOIN frames, replayed to a process that connects later */
};
static std::map<std::string, net_t *> &nets = *new std::map<std::string, net_t *>;
static const char net_prefix[] = "mgt-fake-nccl-";

static std::string encode(const msg &m) {
    wire w = {m.kind, m.rank, m.peer, m.n, m.color, m.key, m.k, m.s, m.group.size(), m.data.size()};
    uint64_t len = sizeof w + m.group.size() + m.data.size();
    std::string f((const char *)&len, sizeof len);
    f.append((const char *)&w, sizeof w);
    return f + m.group + m.data;
}
static msg decode(const std::string &f) {
    wire w;
    memcpy(&w, f.data(), sizeof w);
    return msg{w.kind, w.rank, w.peer, w.n, w.color, w.key, w.k, w.s, f.substr(sizeof w, w.group_bytes),
               f.substr(sizeof w + w.group_bytes, w.data_bytes)};
}
static void queue_frame(link_t *l, const std::string &f) {
    std::lock_guard<std::mutex> lg(l->m);
    l->q.push_back(f);
    l->cv.notify_one();
}
/* mu held: to every other process (but the connection it came from); the hub keeps the joins */
static void send_frame(net_t *n, const std::string &f, int kind, link_t *except = nullptr) {
    if (n->hub && kind == M_JOIN) n->joins.push_back(f);
    for (link_t *l : n->links)
        if (l != except) queue_frame(l, f);
}
static void emit(group_t *g, const msg &m) { /* mu held: something other processes' ranks must see */
    if (g->net && (g->nremote || m.kind == M_JOIN)) send_frame(g->net, encode(m), m.kind);
}
static void writer(link_t *l) {
    for (;;) {
        std::string f;
        {
            std::unique_lock<std::mutex> lg(l->m);
            l->cv.wait(lg, [l] { return !l->q.empty(); });
            f.swap(l->q.front());
            l->q.pop_front();
        }
        for (size_t off = 0; off < f.size();) {
            ssize_t w = send(l->fd, f.data() + off, f.size() - off, MSG_NOSIGNAL);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) return; /* the other process is gone: its waits end at their deadlines */
            off += (size_t)w;
        }
    }
}
static bool read_all(int fd, void *p, size_t n) {
    for (size_t off = 0; off < n;) {
        ssize_t r = recv(fd, (char *)p + off, n - off, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        off += (size_t)r;
    }
    return true;
}
static void apply(net_t *n, const msg &m); /* below: it uses the operations' state */
static void reader(net_t *n, link_t *l) {
    for (;;) {
        uint64_t len = 0;
        if (!read_all(l->fd, &len, sizeof len)) return;
        std::string f(len, '\0');
        if (!read_all(l->fd, &f[0], len)) return;
        msg m = decode(f);
        lock_t lk(mu);
        apply(n, m);
        if (n->hub) send_frame(n, std::string((const char *)&len, sizeof len) + f, m.kind, l); /* in the order applied */
        progress();
    }
}
static void start_link(net_t *n, int fd) { /* mu held */
    link_t *l = new link_t;
    l->fd = fd;
    if (n->hub)
        for (const std::string &f : n->joins) queue_frame(l, f); /* the ranks that joined before it connected */
    n->links.push_back(l);
    std::thread(writer, l).detach();
    std::thread(reader, n, l).detach();
}
static socklen_t net_addr(const std::string &name, sockaddr_un *a) { /* the abstract namespace: a leading NUL */
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    memcpy(a->sun_path + 1, name.data(), std::min(name.size(), sizeof a->sun_path - 2));
    return (socklen_t)(offsetof(sockaddr_un, sun_path) + 1 + std::min(name.size(), sizeof a->sun_path - 2));
}
static void acceptor(net_t *n, int lfd) {
    for (;;) {
        int fd = accept(lfd, nullptr, nullptr);
        if (fd < 0 && errno == EINTR) continue;
        if (fd < 0) return;
        lock_t lk(mu);
        start_link(n, fd);
    }
}
/* mu held: the connections of unique id `name`: made by this process (the hub), or reached now;
   nullptr for an id that is not the fake's */
static net_t *net_for(const char *api, const std::string &name) {
    auto it = nets.find(name);
    if (it != nets.end()) return it->second;
    if (name.compare(0, sizeof net_prefix - 1, net_prefix) || atoi(name.c_str() + sizeof net_prefix - 1) == (int)getpid())
        return nullptr; /* not the fake's, or this process's own that no other process joins */
    sockaddr_un a;
    socklen_t len = net_addr(name, &a);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (sockaddr *)&a, len) != 0)
        fail(api, "cannot reach the process that made unique id '%s' (%s): the fake's processes must share one machine and "
             "network namespace, the id's process must still run and listen (under mpirun, or with MGT_FAKE_NCCL_PROCESSES=1)",
             name.c_str(), strerror(errno));
    net_t *n = new net_t{name, false, {}, {}};
    nets[name] = n;
    start_link(n, fd);
    return n;
}

/* ---- fault injection (the header's FAULTS) ------------------------------------------------------ */
enum fault { NO_FAULT, STALL, ASYNC_ERROR };
static fault injected(ncclComm *c, const char *api, const sig &sg) { /* mu held: counts rank c's calls inside steps */
    static const char *stall = getenv("MGT_FAKE_STALL_RANK"), *error = getenv("MGT_FAKE_NCCL_ERROR"), *call = getenv("MGT_FAKE_STALL_CALL");
    static long counts[64];
    int r = stall && *stall ? atoi(stall) : error && *error ? atoi(error) : -1;
    if (r < 0 || c->device != r || c->device >= 64 || !in_step(c->device) || in_warm_up(c->device)) return NO_FAULT;
    long n = call && *call ? atol(call) : 1;
    if (++counts[c->device] != n) return NO_FAULT;
    fault f = stall && *stall ? STALL : ASYNC_ERROR;
    uint64_t k = sg.k == SEND ? c->g->chans[{c->rank, sg.root}].nsend : sg.k == RECV ? c->g->chans[{sg.root, c->rank}].nrecv : c->coll_enq;
    fprintf(stderr, "mgt fake: %s rank %d's NCCL call %ld inside steps, %s #%llu as %s, during %s\n",
            f == STALL ? "stalling (MGT_FAKE_STALL_RANK)" : "failing (MGT_FAKE_NCCL_ERROR)", r, n, api, (unsigned long long)k,
            where(c).c_str(), step_op(c->device).c_str());
    return f;
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
/* reduce element i over the ranks' inputs, in rank order: fp32 unless fp64/int32 */
static double reduce(const slot &sl, int n, size_t i, const sig &s) {
    bool wide = s.type == ncclFloat64 || s.type == ncclInt32;
    double acc = ld(sl.in[0].data(), i, s.type);
    float accf = (float)acc;
    for (int r = 1; r < n; r++) {
        double v = ld(sl.in[(size_t)r].data(), i, s.type);
        if (s.op == ncclMax) acc = std::max(acc, v);
        else if (s.op == ncclMin) acc = std::min(acc, v);
        else if (wide) acc += v;
        else accf += (float)v;
    }
    if (s.op == ncclMax || s.op == ncclMin) return acc;
    if (s.op == ncclAvg) return wide ? acc / n : (double)(accf / (float)n);
    return wide ? acc : (double)accf;
}
static size_t in_bytes(const nop &o) {
    size_t b = o.s.count * type_size(o.s.type);
    return o.s.k == REDUCESCATTER ? b * (size_t)o.c->g->n : b;
}
static size_t out_bytes(const nop &o) {
    size_t b = o.s.count * type_size(o.s.type);
    return o.s.k == ALLGATHER ? b * (size_t)o.c->g->n : b;
}
static void perform(group_t *g, const sig &s, slot &sl) { /* every rank arrived; mu held */
    int n = g->n;
    size_t es = type_size(s.type), c = s.count;
    sl.out.assign((size_t)n, {});
    if (s.k == ALLREDUCE || s.k == REDUCESCATTER) {
        size_t total = s.k == ALLREDUCE ? c : c * (size_t)n;
        std::vector<double> res(total);
        for (size_t i = 0; i < total; i++) res[i] = reduce(sl, n, i, s);
        for (int r = 0; r < n; r++) {
            sl.out[(size_t)r].resize(c * es);
            for (size_t i = 0; i < c; i++) st(sl.out[(size_t)r].data(), i, s.type, res[s.k == ALLREDUCE ? i : (size_t)r * c + i]);
        }
    } else if (s.k == ALLGATHER) {
        std::vector<char> all((size_t)n * c * es);
        for (int r = 0; r < n; r++) memcpy(all.data() + (size_t)r * c * es, sl.in[(size_t)r].data(), c * es);
        for (int r = 0; r < n; r++) sl.out[(size_t)r] = all;
    } else { /* BROADCAST */
        for (int r = 0; r < n; r++) sl.out[(size_t)r] = sl.in[(size_t)s.root];
    }
}
/* mu held: rank `rank`'s part of collective k of g arrives with its input (none from a broadcast's
   other ranks); the last to arrive computes every rank's result */
static void arrive(group_t *g, uint64_t k, int rank, const sig &s, const char *in, size_t bytes) {
    slot &sl = g->slots[k];
    if (sl.in.empty()) sl.in.resize((size_t)g->n);
    if (in) sl.in[(size_t)rank].assign(in, in + bytes);
    if (++sl.arrived == g->n) {
        perform(g, s, sl);
        sl.in.clear();
        sl.done = true;
    }
}
static std::string wait_what(const nop &o) {
    return strf("%s #%llu as %s", desc(o.s).c_str(), (unsigned long long)o.k, where(o.c).c_str());
}

/* one stream operation: the calls of a group (or one call) on one stream, in stages that a host poll
   may run one at a time: post every send and arrive at every collective, then take the receives and
   results, then wait for the sends to be taken (the order that lets a group's send/recv pairs meet) */
struct nexec {
    std::vector<nop> ops;
    int phase = 0;
    std::vector<char> fin; /* per op: its part of the current stage is done */
    bool hang = false;     /* MGT_FAKE_NCCL_ERROR: never arrives, never completes until an abort */
};
static bool aborted(const nexec &x) {
    for (const nop &o : x.ops)
        if (o.c->g->aborted) return true;
    return false;
}
static void end_all(nexec &x) {
    for (const nop &o : x.ops) o.c->pending--;
    x.phase = 3;
    progress();
}
/* mu held through lk; mode: RUN_TRY, RUN_BLOCK or RUN_ABANDON (fake_core.h); true once done */
static bool advance(nexec &x, int mode, lock_t &lk) {
    size_t n = x.ops.size(), i;
    if (x.phase == 3) return true;
    if (x.phase == 0) {
        /* like NCCL after an abort: the operation ends, its result undefined */
        if (mode == RUN_ABANDON || aborted(x)) { end_all(x); return true; }
        if (x.hang) {
            if (mode == RUN_TRY) return false;
            wait(lk, [&] { return aborted(x); }, wait_what(x.ops[0]) + ", which never arrives (MGT_FAKE_NCCL_ERROR)");
            end_all(x);
            return true;
        }
        for (const nop &o : x.ops) {
            group_t *g = o.c->g;
            if (o.s.k == SEND) {
                auto data = std::make_shared<std::vector<char>>((const char *)o.send, (const char *)o.send + in_bytes(o));
                g->chans[{o.c->rank, o.s.root}].post[o.k] = posted{data, false};
                if (g->comms[(size_t)o.s.root]->remote)
                    emit(g, msg{M_POST, o.c->rank, o.s.root, 0, 0, 0, o.k, o.s, g->key, std::string(data->begin(), data->end())});
            } else if (o.s.k != RECV) {
                bool has = o.s.k != BROADCAST || o.c->rank == o.s.root;
                arrive(g, o.k, o.c->rank, o.s, has ? (const char *)o.send : nullptr, in_bytes(o));
                emit(g, msg{M_ARRIVE, o.c->rank, 0, 0, 0, 0, o.k, o.s, g->key, has ? std::string((const char *)o.send, in_bytes(o)) : ""});
            }
            progress();
        }
        x.fin.assign(n, 0);
        x.phase = 1;
    }
    if (x.phase == 1) {
        for (i = 0; i < n; i++) {
            const nop &o = x.ops[i];
            group_t *g = o.c->g;
            if (x.fin[i] || o.s.k == SEND) continue;
            std::function<bool()> ready;
            if (o.s.k == RECV) {
                chan &ch = g->chans[{o.s.root, o.c->rank}];
                ready = [&ch, &o, g, &lk] { /* the peer's send, launched, runs on its device */
                    if (ch.post.count(o.k) || g->aborted) return true;
                    if (ch.sent.count(o.k)) help_run(lk, ch.sent[o.k]);
                    return ch.post.count(o.k) > 0 || g->aborted;
                };
            } else
                ready = [&o, g, &lk] { /* the peers' parts, launched, run on their devices */
                    if (g->slots[o.k].done || g->aborted) return true;
                    std::map<int, ticket> launched = g->slots[o.k].launched;
                    for (auto &kv : launched)
                        if (kv.first != o.c->rank) help_run(lk, kv.second);
                    return g->slots[o.k].done || g->aborted;
                };
            if (!ready()) {
                if (mode == RUN_TRY) return false;
                if (mode == RUN_BLOCK) wait(lk, ready, wait_what(o));
            }
            if (ready() && !g->aborted) {
                if (o.s.k == RECV) {
                    chan &ch = g->chans[{o.s.root, o.c->rank}];
                    posted &p = ch.post[o.k];
                    memcpy(o.recv, p.data->data(), out_bytes(o));
                    p.consumed = true;
                    if (g->comms[(size_t)o.s.root]->remote) { /* its sender learns, and nothing here waits for it */
                        ch.post.erase(o.k);
                        emit(g, msg{M_TAKEN, o.s.root, o.c->rank, 0, 0, 0, o.k, o.s, g->key, ""});
                    }
                } else {
                    const std::vector<char> &res = g->slots[o.k].out[(size_t)o.c->rank];
                    memcpy(o.recv, res.data(), out_bytes(o));
                }
                progress();
            }
            x.fin[i] = 1;
        }
        x.fin.assign(n, 0);
        x.phase = 2;
    }
    for (i = 0; i < n; i++) { /* phase 2: the sends have been taken */
        const nop &o = x.ops[i];
        group_t *g = o.c->g;
        if (x.fin[i] || o.s.k != SEND) continue;
        chan &ch = g->chans[{o.c->rank, o.s.root}];
        auto ready = [&ch, &o, g, &lk] { /* the peer's receive, launched, runs on its device */
            if (ch.post[o.k].consumed || g->aborted) return true;
            if (ch.received.count(o.k)) help_run(lk, ch.received[o.k]);
            return ch.post[o.k].consumed || g->aborted;
        };
        if (!ready()) {
            if (mode == RUN_TRY) return false;
            if (mode == RUN_BLOCK) wait(lk, ready, wait_what(o) + ", not yet received");
        }
        if (ready()) { /* abandoned: the peer may still take it */
            ch.post.erase(o.k);
            ch.sent.erase(o.k);
            ch.received.erase(o.k);
        }
        x.fin[i] = 1;
    }
    for (const nop &o : x.ops)
        if (o.s.k != SEND && o.s.k != RECV && ++o.c->g->slots[o.k].left == o.c->g->nlocal) o.c->g->slots.erase(o.k);
    end_all(x);
    return true;
}
static void submit(const char *api, std::vector<nop> ops, bool hang = false) {
    std::vector<mem_use> acc;
    std::string what;
    for (const nop &o : ops) {
        if (o.s.k != RECV && (o.s.k != BROADCAST || o.c->rank == o.s.root)) acc.push_back({o.send, in_bytes(o), false, "send buffer", false});
        if (o.s.k != SEND) acc.push_back({o.recv, out_bytes(o), true, "receive buffer", false});
        what += (what.empty() ? "" : " + ") + desc(o.s);
        if (o.c->device != ops[0].c->device) fail(api, "a group with ranks of devices %d and %d on one stream", ops[0].c->device, o.c->device);
    }
    auto x = std::make_shared<nexec>();
    x->ops = std::move(ops);
    x->hang = hang;
    const nop &o0 = x->ops[0];
    ticket t = enqueue_step(api, o0.stream, o0.c->device, what + " as " + where(o0.c), acc, [x](int mode) {
        lock_t lk(mu);
        return advance(*x, mode, lk);
    });
    lock_t lk(mu); /* launched: a peer waiting for it may run it, as this rank's device would */
    for (const nop &o : x->ops) {
        group_t *g = o.c->g;
        if (o.s.k == SEND) g->chans[{o.c->rank, o.s.root}].sent[o.k] = t;
        else if (o.s.k == RECV) g->chans[{o.s.root, o.c->rank}].received[o.k] = t;
        else g->slots[o.k].launched[o.c->rank] = t;
    }
    progress();
}

/* a group's calls: one operation per stream, in call order */
static void submit_per_stream(const char *api, std::vector<nop> all) {
    while (!all.empty()) {
        std::vector<nop> mine, rest;
        for (const nop &o : all) (o.stream == all[0].stream ? mine : rest).push_back(o);
        submit(api, mine);
        all.swap(rest);
    }
}

/* ---- late launches (the header's LATE LAUNCH) -------------------------------------------------- */
/* the algorithm NCCL's tuner would pick, as far as connecting goes: small all-reduces on trees,
   everything else on rings (NVLS, CollNet and PAT are not modelled) */
enum { ALGO_TREE, ALGO_RING };
static int algorithm(const sig &s) {
    return s.k == ALLREDUCE && s.count * type_size(s.type) <= (64u << 10) ? ALGO_TREE : ALGO_RING;
}
static const char *algo_name(int a) { return a == ALGO_TREE ? "tree" : "ring"; }
/* whether a call that needs no connecting is launched late anyway: MGT_FAKE_NCCL_LATE percent of them
   (default 10), drawn from a generator seeded by MGT_FAKE_NCCL_SEED (default 1). mu held */
static bool late_by_chance() {
    static const char *pct_env = getenv("MGT_FAKE_NCCL_LATE"), *seed_env = getenv("MGT_FAKE_NCCL_SEED");
    static int pct = pct_env && *pct_env ? atoi(pct_env) : 10;
    static uint64_t x = seed_env && *seed_env ? (uint64_t)strtoull(seed_env, nullptr, 10) * 2654435761u + 1 : 88172645463325252ull;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return (int)(x % 100) < pct;
}
/* a call (or a group's calls) that NCCL launches from its own thread: the host got ncclInProgress,
   the communicators stay in progress until the thread has enqueued the work on the streams */
struct launch_job {
    std::thread th;
    bool launched = false, joined = false;
};
static uint64_t launch_delay_us() { /* mu held: 100..1100 us, after the caller has had time to go on */
    static uint64_t x = 0x9E3779B97F4A7C15ull;
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return 100 + (x >> 33) % 1000;
}
static void launch_late(std::vector<nop> ops) { /* mu held */
    auto j = std::make_shared<launch_job>();
    std::vector<ncclComm *> cs;
    for (const nop &o : ops)
        if (std::find(cs.begin(), cs.end(), o.c) == cs.end()) cs.push_back(o.c);
    for (ncclComm *c : cs) {
        c->state = ncclInProgress;
        c->launching = j;
    }
    int device = ops[0].c->device;
    late_launch(device, +1);
    uint64_t delay = launch_delay_us();
    j->th = std::thread([j, ops, cs, delay, device]() {
        std::this_thread::sleep_for(std::chrono::microseconds(delay));
        submit_per_stream("NCCL's launch thread", ops);
        lock_t lk(mu);
        late_launch(device, -1);
        for (ncclComm *c : cs)
            if (c->state == ncclInProgress) c->state = ncclSuccess;
        j->launched = true;
        progress();
    });
}
/* mu held through lk: c's late launch, when it has one, joined (wait: waiting for it to launch first;
   destroying a communicator does) */
static void reap(lock_t &lk, ncclComm *c, bool wait_launch) {
    std::shared_ptr<launch_job> j = c->launching;
    if (!j || (!j->launched && !wait_launch)) return;
    if (!j->launched) wait(lk, [&j] { return j->launched; }, "NCCL's launch thread of " + where(c));
    c->launching.reset();
    if (j->joined) return;
    j->joined = true;
    lk.unlock();
    j->th.join(); /* it only returns after `launched`: no wait for mu */
    lk.lock();
}

/* mu held: rank `rank`'s k-th collective of g, or its k-th send to / receive from s.root, is s: the
   same as the other ranks' k-th (collectives), the k-th receive / send it meets (send/recv) */
static void match(const char *api, group_t *g, int rank, uint64_t k, const sig &s) {
    if (s.k == SEND || s.k == RECV) {
        bool snd = s.k == SEND;
        chan &ch = g->chans[snd ? std::make_pair(rank, s.root) : std::make_pair(s.root, rank)];
        auto &mine = snd ? ch.send_sig : ch.recv_sig, &theirs = snd ? ch.recv_sig : ch.send_sig;
        auto it = theirs.find(k);
        if (it == theirs.end()) mine[k] = s;
        else {
            if (it->second.count != s.count || it->second.type != s.type)
                fail(api, "mismatched send/receive #%llu between rank %d and rank %d of a %d-rank communicator (#%d): "
                     "rank %d called %s and rank %d called %s", (unsigned long long)k, rank, s.root, g->n, g->id,
                     s.root, desc(it->second).c_str(), rank, desc(s).c_str());
            theirs.erase(it);
        }
        return;
    }
    sig_rec &r = g->sigs[k];
    if (r.seen == 0) r = sig_rec{rank, 0, s};
    else if (!same(r.s, s))
        fail(api, "mismatched collective #%llu of a %d-rank communicator (#%d): rank %d called %s and rank %d "
             "called %s", (unsigned long long)k, g->n, g->id, r.rank, desc(r.s).c_str(), rank, desc(s).c_str());
    if (++r.seen == g->n) g->sigs.erase(k);
}

static thread_local int group_depth = 0;
static thread_local std::vector<nop> grouped;
static thread_local std::vector<ncclComm *> group_inits; /* blocking inits inside the group: done at its end */

static thread_local bool group_late = false; /* a call of the open group needs connecting */

static ncclResult_t call(const char *api, ncclComm_t cm, sig s, const void *send, void *recv, cudaStream_t stream) {
    nop o;
    fault f = NO_FAULT;
    bool connects = false, late = false;
    lock_t lk(mu);
    ncclComm *c = comm(api, cm);
    inside_call in(c);
    {
        group_t *g = c->g;
        c->owner = thread_token();
        if (device_fault(c->device) != cudaSuccess) { /* the context is gone: NCCL cannot launch */
            c->state = ncclUnhandledCudaError;
            c->error = strf("mgt fake: a kernel faulted on device %d (%s)", c->device, cudaGetErrorString(device_fault(c->device)));
            return ncclUnhandledCudaError;
        }
        if (c->state != ncclSuccess) return c->state;
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
        /* NCCL connects on first use: a send or receive its pair's channel, a collective (unless the
           communicator was made with NCCL_RUNTIME_CONNECT=0) the algorithm it runs on, allocating device
           memory and launching from its own thread */
        if (s.k == SEND || s.k == RECV) {
            std::pair<int, int> pd(s.root, s.k == SEND ? 0 : 1);
            if (!c->p2p_warm.count(pd)) {
                step_check(api, c->device, strf("the first %s between ranks %d and %d of communicator #%d (%s)", s.k == SEND ? "send" : "receive",
                                                c->rank, s.root, g->id, desc(s).c_str()),
                           "NCCL connects a pair on its first send or receive, allocating and synchronising: send and receive once "
                           "between every pipeline pair when the run is created");
                c->p2p_warm.insert(pd);
                connects = true;
            }
        } else if (!c->eager && !c->connected.count(algorithm(s))) {
            step_check(api, c->device, strf("the first collective on %ss of %s, %s (NCCL_RUNTIME_CONNECT is not 0)", algo_name(algorithm(s)),
                                            where(c).c_str(), desc(s).c_str()),
                       "NCCL 2.22 and later connect each algorithm at its first use, allocating and synchronising: set "
                       "NCCL_RUNTIME_CONNECT=0 before the first communicator is made, or run every kind and size of collective "
                       "when the run is created");
            c->connected.insert(algorithm(s));
            connects = true;
        }
        f = injected(c, api, s);
        if (f == STALL) { /* never arrives: the call stays in progress, nothing is enqueued */
            c->state = ncclInProgress;
            c->error = strf("mgt fake: rank %d stalled in %s (MGT_FAKE_STALL_RANK)", c->device, api);
            if (c->nonblocking) return ncclInProgress;
            /* a blocking communicator keeps the host thread inside the call until it is aborted */
            wait(lk, [g] { return g->aborted; }, strf("%s stalled inside a blocking call (MGT_FAKE_STALL_RANK) as %s", api, where(c).c_str()));
            return ncclInvalidUsage;
        }
        if (s.k == SEND || s.k == RECV) { /* the k-th send a->b meets the k-th recv on b from a */
            bool snd = s.k == SEND;
            chan &ch = g->chans[snd ? std::make_pair(c->rank, s.root) : std::make_pair(s.root, c->rank)];
            o.k = snd ? ch.nsend++ : ch.nrecv++;
        } else
            o.k = c->coll_enq++;
        match(api, g, c->rank, o.k, s);
        emit(g, msg{M_SIG, c->rank, 0, 0, 0, 0, o.k, s, g->key, ""});
        if (f == ASYNC_ERROR) {
            c->state = ncclRemoteError;
            c->error = strf("mgt fake: rank %d's %s #%llu failed asynchronously (MGT_FAKE_NCCL_ERROR)", c->device, api, (unsigned long long)o.k);
        }
        o.c = c;
        c->pending++;
        late = c->nonblocking && f == NO_FAULT && (connects || late_by_chance());
    }
    o.s = s;
    o.send = send;
    o.recv = recv;
    o.stream = stream;
    if (group_depth > 0 && f != ASYNC_ERROR) {
        grouped.push_back(o);
        group_late = group_late || (c->nonblocking && connects);
        return ncclSuccess;
    }
    if (late) { /* NCCL's thread enqueues it: the caller polls ncclCommGetAsyncError until ncclSuccess */
        launch_late({o});
        return ncclInProgress;
    }
    lk.unlock(); /* still inside the call: submit enqueues on the stream */
    submit(api, {o}, f == ASYNC_ERROR);
    lk.lock();
    return ncclSuccess;
}

/* the host side of a split: every rank of the parent arrives with its color and key; the last one
   makes the new communicators. Blocking: returns when all have arrived; non-blocking: at once, the
   new communicator (and the parent) in progress until then */
/* mu held: rank `rank` of g arrives at its split k with color and key, `mine` its new communicator
   (a stand-in for a rank of another process); the last to arrive makes every new communicator */
static split_slot &split_arrive(group_t *g, uint64_t k, int rank, int color, int key, ncclComm *mine) {
    split_slot &sl = g->splits[k];
    if (sl.ck.empty()) sl.ck.assign((size_t)g->n, {0, 0}), sl.out.assign((size_t)g->n, nullptr);
    sl.ck[(size_t)rank] = {color, key};
    sl.out[(size_t)rank] = mine;
    if (++sl.arrived == g->n) {
        std::map<int, std::vector<std::pair<int, int>>> members; /* color -> (key, parent rank) */
        for (int r = 0; r < g->n; r++)
            if (sl.ck[(size_t)r].first != NCCL_SPLIT_NOCOLOR) members[sl.ck[(size_t)r].first].push_back({sl.ck[(size_t)r].second, r});
        for (auto &m : members) {
            std::sort(m.second.begin(), m.second.end());
            group_t *ng = new_group((int)m.second.size(), g->key.empty() ? "" : strf("%s/%llu.%d", g->key.c_str(), (unsigned long long)k, m.first),
                                    g->net);
            for (size_t i = 0; i < m.second.size(); i++) {
                ncclComm *made = sl.out[(size_t)m.second[i].second];
                attach(ng, (int)i, made);
                made->state = ncclSuccess;
            }
        }
        for (ncclComm *p : g->comms)
            if (p && p->state == ncclInProgress) p->state = ncclSuccess; /* the parents' split is over */
        sl.done = true;
    }
    return sl;
}
static ncclComm *split_join(ncclComm *c, int color, int key, bool nonblocking) {
    lock_t lk(mu);
    group_t *g = c->g;
    c->owner = thread_token();
    uint64_t k = c->split_enq++;
    ncclComm *mine = color == NCCL_SPLIT_NOCOLOR ? nullptr : make_comm(c->device, c->owner, nonblocking);
    if (mine) mine->state = ncclInProgress;
    if (nonblocking) c->state = ncclInProgress;
    emit(g, msg{M_SPLIT, c->rank, 0, 0, color, key, k, sig{}, g->key, ""});
    split_slot &sl = split_arrive(g, k, c->rank, color, key, mine);
    progress();
    if (!nonblocking) wait(lk, [&] { return sl.done; }, strf("ncclCommSplit #%llu as %s", (unsigned long long)k, where(c).c_str()));
    if (++sl.left == g->nlocal && sl.done) g->splits.erase(k); /* else the last arrival (another process's) erases it */
    return mine;
}

/* mu held: what a rank of another process did (the messages' kinds above) */
static void apply(net_t *n, const msg &m) {
    const char *api = "the fake's transport";
    group_t *g = by_key.count(m.group) ? by_key[m.group] : nullptr;
    if (m.kind == M_JOIN) {
        if (!g) g = new_group(m.n, m.group, n);
        if (g->n != m.n || m.rank < 0 || m.rank >= g->n)
            fail("ncclCommInitRank", "rank %d of another process joins unique id '%s' with %d ranks, the ranks before it with %d", m.rank,
                 m.group.c_str(), m.n, g->n);
        if (g->comms[(size_t)m.rank]) fail("ncclCommInitRank", "rank %d of unique id '%s' joins twice", m.rank, m.group.c_str());
        attach(g, m.rank, make_comm(-1, nullptr, false, true));
        joined(g);
        return;
    }
    if (!g) fail(api, "a message of kind %d for communicator '%s', which this process has not made", m.kind, m.group.c_str());
    switch (m.kind) {
    case M_SPLIT:
    {
        split_slot &sl = split_arrive(g, m.k, m.rank, m.color, m.key, m.color == NCCL_SPLIT_NOCOLOR ? nullptr : make_comm(-1, nullptr, false, true));
        if (sl.done && sl.left == g->nlocal) g->splits.erase(m.k); /* this process's ranks have left it (non-blocking) */
        break;
    }
    case M_SIG: match(kind_names[m.s.k], g, m.rank, m.k, m.s); break;
    case M_ARRIVE:
        if (g->nlocal) arrive(g, m.k, m.rank, m.s, m.s.k != BROADCAST || m.rank == m.s.root ? m.data.data() : nullptr, m.data.size());
        break;
    case M_POST:
        if (!g->comms[(size_t)m.peer]->remote)
            g->chans[{m.rank, m.peer}].post[m.k] = posted{std::make_shared<std::vector<char>>(m.data.begin(), m.data.end()), false};
        break;
    case M_TAKEN: {
        chan &ch = g->chans[{m.rank, m.peer}];
        if (g->comms[(size_t)m.rank]->remote) ch.post.erase(m.k);
        else ch.post[m.k].consumed = true;
        break;
    }
    case M_ABORT: /* as NCCL's ranks see a peer's failure: an asynchronous error, and every wait ends */
        g->aborted = true;
        for (ncclComm *c : g->comms)
            if (!c->remote && !c->destroyed) {
                c->state = ncclRemoteError;
                c->error = strf("mgt fake: a rank of another process aborted communicator #%d", g->id);
            }
        break;
    default: fail(api, "a message of unknown kind %d", m.kind);
    }
}

extern "C" {

ncclResult_t ncclGetVersion(int *version) {
    if (!version) return ncclInvalidArgument;
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}
ncclResult_t ncclGetUniqueId(ncclUniqueId *id) { /* the name of a socket that other processes' ranks join through */
    static uint64_t counter = 0;
    if (!id) return ncclInvalidArgument;
    lock_t lk(mu);
    memset(id, 0, sizeof *id);
    snprintf(id->internal, sizeof id->internal, "%s%d-%llu", net_prefix, (int)getpid(), (unsigned long long)++counter);
    static const char *ompi = getenv("OMPI_COMM_WORLD_SIZE"), *pmi = getenv("PMI_SIZE"), *asked = getenv("MGT_FAKE_NCCL_PROCESSES");
    if (!((ompi && atoi(ompi) > 1) || (pmi && atoi(pmi) > 1) || (asked && atoi(asked)))) return ncclSuccess; /* this process's ranks alone */
    net_t *n = new net_t{id->internal, true, {}, {}};
    sockaddr_un a;
    socklen_t len = net_addr(n->name, &a);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (sockaddr *)&a, len) != 0 || listen(fd, 64) != 0)
        fail("ncclGetUniqueId", "cannot listen on the abstract Unix socket '%s': %s", n->name.c_str(), strerror(errno));
    nets[n->name] = n;
    std::thread(acceptor, n, fd).detach();
    return ncclSuccess;
}
/* config->blocking 0: non-blocking; NCCL_CONFIG_UNDEF_INT or 1: blocking */
static bool config_nonblocking(const ncclConfig_t *config, bool dflt) {
    return config && config->blocking != NCCL_CONFIG_UNDEF_INT ? config->blocking == 0 : dflt;
}
ncclResult_t ncclCommInitRankConfig(ncclComm_t *out, int nranks, ncclUniqueId id, int rank, ncclConfig_t *config) {
    if (!out || nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
    bool nb = config_nonblocking(config, false);
    lock_t lk(mu);
    step_check("ncclCommInitRank", current_device(), "making a communicator", "communicators are made when the run is created");
    std::string key(id.internal, strnlen(id.internal, sizeof id.internal));
    net_t *n = net_for("ncclCommInitRank", key); /* an id of another process: connects to it */
    group_t *g = by_key.count(key) ? by_key[key] : new_group(nranks, key, n);
    if (g->n != nranks)
        fail("ncclCommInitRank", "rank %d joins unique id '%s' with %d ranks, the ranks before it with %d", rank,
             id.internal, nranks, g->n);
    if (g->comms[(size_t)rank]) fail("ncclCommInitRank", "rank %d of unique id '%s' joins twice", rank, id.internal);
    ncclComm *c = new_comm(g, rank, current_device(), thread_token());
    c->nonblocking = nb;
    emit(g, msg{M_JOIN, rank, 0, nranks, 0, 0, 0, sig{}, key, ""});
    progress();
    if (g->joined == g->n) joined(g);
    else if (nb || group_depth > 0) {
        c->state = ncclInProgress; /* until the others have joined */
        if (!nb) group_inits.push_back(c);
    }
    *out = c;
    if (nb) return c->state;
    if (group_depth > 0) return ncclSuccess; /* joined at the group's end */
    wait(lk, [&] { return g->joined == g->n; }, strf("ncclCommInitRank as %s", where(c).c_str()));
    return ncclSuccess;
}
ncclResult_t ncclCommInitRank(ncclComm_t *out, int nranks, ncclUniqueId id, int rank) {
    return ncclCommInitRankConfig(out, nranks, id, rank, nullptr);
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
ncclResult_t ncclCommSplit(ncclComm_t parent, int color, int key, ncclComm_t *out, ncclConfig_t *config) {
    if (!out || (color < 0 && color != NCCL_SPLIT_NOCOLOR)) return ncclInvalidArgument;
    ncclComm *c;
    bool nb;
    {
        lock_t lk(mu);
        c = comm("ncclCommSplit", parent);
        step_check("ncclCommSplit", c->device, "splitting " + where(c), "communicators are made when the run is created");
        nb = config_nonblocking(config, c->nonblocking); /* no config: the parent's */
    }
    *out = split_join(c, color, key, nb);
    lock_t lk(mu);
    return nb ? c->state : ncclSuccess;
}
static ncclResult_t destroy(const char *api, ncclComm_t cm, bool check) {
    lock_t lk(mu);
    ncclComm *c = comm(api, cm, true);
    reap(lk, c, true); /* NCCL's launch thread ends before the communicator does */
    group_t *g = c->g;
    if (c->inside && c->inside_thread != thread_token())
        fail(api, "%s while another thread is inside an NCCL call on it: NCCL frees the communicator under that thread (abort a rank's "
             "communicators when its thread is outside NCCL)", where(c).c_str());
    if (check) step_check(api, c->device, "ending " + where(c), "communicators live as long as the run");
    if (check && c->pending)
        fail(api, "%ld operations of %s are still queued: synchronise its streams first", c->pending, where(c).c_str());
    for (auto &kv : g ? g->sigs : std::map<uint64_t, sig_rec>())
        if (check && kv.first >= c->coll_enq)
            fail(api, "collective #%llu %s that rank %d issued was never issued by %s", (unsigned long long)kv.first,
                 desc(kv.second.s).c_str(), kv.second.rank, where(c).c_str());
    for (auto &kv : g ? g->chans : std::map<std::pair<int, int>, chan>()) {
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
    if (!check && g && !g->aborted) {
        g->aborted = true;
        emit(g, msg{M_ABORT, c->rank, 0, 0, 0, 0, 0, sig{}, g->key, ""});
    }
    progress();
    return ncclSuccess;
}
ncclResult_t ncclCommFinalize(ncclComm_t cm) {
    lock_t lk(mu);
    ncclComm *c = comm("ncclCommFinalize", cm);
    step_check("ncclCommFinalize", c->device, "finalizing " + where(c), "communicators live as long as the run");
    return ncclSuccess; /* nothing is left in flight to flush once its streams were synchronised (destroy checks) */
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
    *device = comm("ncclCommCuDevice", cm, true)->device;
    return ncclSuccess;
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t cm, ncclResult_t *e) {
    lock_t lk(mu);
    ncclComm *c = comm("ncclCommGetAsyncError", cm, true);
    inside_call in(c);
    if (!e) return ncclInvalidArgument;
    if (c->state == ncclInProgress) { /* NCCL's progress engine runs inside this call: a while */
        lk.unlock();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        lk.lock();
        if (c->destroyed) fail("ncclCommGetAsyncError", "%s was freed while this thread was inside the call", where(c).c_str());
    }
    reap(lk, c, false);
    if (device_fault(c->device) != cudaSuccess && c->state == ncclSuccess) {
        c->state = ncclUnhandledCudaError;
        c->error = strf("mgt fake: a kernel faulted on device %d (%s)", c->device, cudaGetErrorString(device_fault(c->device)));
    }
    *e = c->state;
    return ncclSuccess;
}
const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "an NCCL result the fake does not produce";
    }
}
const char *ncclGetLastError(ncclComm_t cm) {
    lock_t lk(mu);
    if (!cm || !comms_made.count(cm)) return "";
    return cm->error.c_str(); /* the communicator is never freed: the string stays */
}

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
    bool late = group_late;
    group_late = false;
    if (!all.empty()) {
        lock_t lk(mu);
        bool nonblocking = true;
        for (const nop &o : all) nonblocking = nonblocking && o.c->nonblocking;
        if (nonblocking && (late || late_by_chance())) { /* NCCL's thread launches the group */
            launch_late(all);
            return ncclInProgress;
        }
    }
    submit_per_stream("ncclGroupEnd", all);
    std::vector<ncclComm *> inits;
    inits.swap(group_inits);
    lock_t lk(mu);
    for (ncclComm *c : inits) /* blocking communicators made inside the group: ready when it ends */
        wait(lk, [c] { return c->g->joined == c->g->n; }, strf("ncclCommInitRank (in a group) as %s", where(c).c_str()));
    return ncclSuccess;
}

} /* extern "C" */
