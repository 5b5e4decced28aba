/*
 * rmqload: the remoting half of the bench's load generator, in C.
 *
 * Why it exists: on a 2-core machine the load generators share the cores with the servers they
 * measure. The Python generator spends about 4.5 us of CPU per GET_ROUTEINFO_BY_TOPIC, nearly as
 * much as the worker answering it, so at 80% of a worker's peak it keeps half a core busy and
 * the worker waits for a CPU while it runs (docs/performance.md). This one does the same job for
 * a fraction of that. bench/loadgen.py stays the reference: same frames (encoded by the
 * project's codec in Python and passed in a file), same topic choice, same open-loop schedule,
 * same tallies; bench/native_load.py runs it and reads its result back.
 *
 * Closed loop: each connection keeps `depth` requests in flight. Open loop: requests are due at
 * a fixed rate (in steps, for the overload row) whatever the replies do; latency is taken from
 * the write and, in `intended`, from the scheduled moment.
 *
 * Output (--out): "RMQLOAD1", 12 int64 counters, 2 doubles, the error codes as int64 pairs, then
 * the latencies, intended latencies and offsets as doubles (native byte order: the reader runs
 * on the same machine). Exit status 2 and a line on stderr when it cannot run the job.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define OPAQUE_BASE 1000000000L /* 10 digits: every frame of a topic has one length */
#define OPEN_LOOP_CAP 5000      /* most requests in flight per connection before sends are skipped */
#define RING 16384              /* pending slots per connection (> OPEN_LOOP_CAP, power of 2) */
#define LATE_SEND 0.002         /* a send more than 2 ms behind its schedule: the generator lagged */
#define MAX_CONNS 1024
#define MAX_STEPS 16
#define MAX_CODES 64

typedef struct {
    double *v;
    size_t n, cap;
} vec;

typedef struct {
    char *head, *tail;
    size_t head_len, tail_len;
} frame_parts;

typedef struct {
    double sent_at, intended;
    int live;
} slot;

typedef struct {
    int fd, open;
    long opaque;
    int in_flight;
    slot *ring;
    char *in;
    size_t in_len, in_cap;
    char *out;
    size_t out_len, out_cap, out_off;
    int want_write;
} conn;

typedef struct {
    double starts[MAX_STEPS + 1], rates[MAX_STEPS + 1];
    long firsts[MAX_STEPS + 1];
    int n;
} schedule;

static struct {
    frame_parts *topics;
    size_t topic_count;
    int uniform;
    uint64_t rng;
    long next_index;
    double window_start, window_end;
    int closed_loop, sending;
    long outstanding;
    /* tallies, as LoadResult */
    long completed, errors, sent, late, skipped, disconnects, unanswered, connections;
    long codes[MAX_CODES][2];
    int code_count;
    vec latencies, intended, offsets;
    double cpu, window;
} S;

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("rmqload: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

static void *grow(void *p, size_t size) {
    void *q = realloc(p, size);
    if (q == NULL)
        die("out of memory (%zu bytes)", size);
    return q;
}

static void push(vec *v, double x) {
    if (v->n == v->cap) {
        v->cap = v->cap ? v->cap * 2 : 65536;
        v->v = grow(v->v, v->cap * sizeof(double));
    }
    v->v[v->n++] = x;
}

static double mono(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double wall(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double cpu_now(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec * 1e-6 + (double)u.ru_stime.tv_sec +
           (double)u.ru_stime.tv_usec * 1e-6;
}

static void sleep_until(double deadline) {
    double delay = deadline - mono();
    if (delay <= 0)
        return;
    struct timespec t = {(time_t)delay, (long)((delay - floor(delay)) * 1e9)};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
}

/* ---- the frames ----------------------------------------------------------------------------- */

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        die("cannot open %s: %s", path, strerror(errno));
    size_t cap = 1 << 20, n = 0;
    char *buf = grow(NULL, cap);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap)
            buf = grow(buf, cap *= 2);
    }
    fclose(f);
    *len = n;
    return buf;
}

static uint32_t u32_at(const char *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* [u32 head length][head][u32 tail length][tail] per topic, in the job's topic order */
static void load_frames(const char *path) {
    size_t len, pos = 0, cap = 1024;
    char *buf = read_file(path, &len);
    S.topics = grow(NULL, cap * sizeof(frame_parts));
    while (pos < len) {
        if (S.topic_count == cap)
            S.topics = grow(S.topics, (cap *= 2) * sizeof(frame_parts));
        frame_parts *t = &S.topics[S.topic_count++];
        if (len - pos < 4 || len - pos - 4 < u32_at(buf + pos))
            die("%s: truncated at byte %zu", path, pos);
        t->head_len = u32_at(buf + pos);
        t->head = buf + pos + 4;
        pos += 4 + t->head_len;
        if (len - pos < 4 || len - pos - 4 < u32_at(buf + pos))
            die("%s: truncated at byte %zu", path, pos);
        t->tail_len = u32_at(buf + pos);
        t->tail = buf + pos + 4;
        pos += 4 + t->tail_len;
    }
    if (S.topic_count == 0)
        die("%s: no frames", path);
}

/* splitmix64: a seeded, repeatable choice of topics */
static uint64_t next_random(void) {
    uint64_t z = (S.rng += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static size_t topic_index(void) {
    if (S.uniform)
        return (size_t)(next_random() % S.topic_count);
    return (size_t)(S.next_index++ % (long)S.topic_count);
}

/* ---- the schedule (bench/schedule.py's StepSchedule) ----------------------------------------- */

static void schedule_init(schedule *s, double start, const double *seconds, const double *rates, int n) {
    double at = start;
    long count = 0;
    s->n = n;
    for (int i = 0; i < n; i++) {
        s->starts[i] = at;
        s->firsts[i] = count;
        s->rates[i] = rates[i];
        at += seconds[i];
        count += (long)ceil(seconds[i] * rates[i]);
    }
}

static long schedule_due(const schedule *s, double now) {
    if (now < s->starts[0])
        return 0;
    int i = 0;
    while (i + 1 < s->n && s->starts[i + 1] <= now)
        i++;
    long due = s->firsts[i] + (long)((now - s->starts[i]) * s->rates[i]) + 1;
    if (i + 1 < s->n && due > s->firsts[i + 1])
        due = s->firsts[i + 1];
    return due;
}

static double schedule_intended(const schedule *s, long k) {
    int i = 0;
    while (i + 1 < s->n && s->firsts[i + 1] <= k)
        i++;
    return s->starts[i] + (double)(k - s->firsts[i]) / s->rates[i];
}

/* ---- connections ----------------------------------------------------------------------------- */

static int connect_to(const char *target) {
    char host[256];
    const char *colon = strrchr(target, ':');
    if (colon == NULL || (size_t)(colon - target) >= sizeof host)
        die("bad target %s (host:port)", target);
    memcpy(host, target, (size_t)(colon - target));
    host[colon - target] = '\0';
    struct addrinfo hints = {0}, *res;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(host, colon + 1, &hints, &res);
    if (rc != 0)
        die("cannot resolve %s: %s", target, gai_strerror(rc));
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        die("socket: %s", strerror(errno));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, res->ai_addr, res->ai_addrlen) != 0)
        die("cannot connect to %s: %s", target, strerror(errno));
    freeaddrinfo(res);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

static void conn_lost(conn *c, int epfd) {
    if (!c->open)
        return;
    c->open = 0;
    epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    if (S.sending) { /* the server closed it: what was in flight will never be answered */
        S.disconnects++;
        S.unanswered += c->in_flight;
    }
    S.outstanding -= c->in_flight;
    c->in_flight = 0;
}

static void conn_send(conn *c, double now, double intended) {
    const frame_parts *t = &S.topics[topic_index()];
    size_t need = c->out_len + t->head_len + 10 + t->tail_len;
    if (need > c->out_cap) {
        while (need > c->out_cap)
            c->out_cap *= 2;
        c->out = grow(c->out, c->out_cap);
    }
    long opaque = c->opaque++;
    slot *s = &c->ring[(opaque - OPAQUE_BASE) & (RING - 1)];
    if (s->live) { /* an old request never answered, lapped by RING newer ones: give it up */
        c->in_flight--;
        S.outstanding--;
    }
    s->sent_at = now;
    s->intended = intended;
    s->live = 1;
    c->in_flight++;
    S.outstanding++;
    char *p = c->out + c->out_len;
    memcpy(p, t->head, t->head_len);
    p += t->head_len;
    for (int i = 9; i >= 0; i--, opaque /= 10)
        p[i] = (char)('0' + opaque % 10);
    p += 10;
    memcpy(p, t->tail, t->tail_len);
    c->out_len = need;
}

static void conn_flush(conn *c, int epfd) {
    while (c->open && c->out_off < c->out_len) {
        ssize_t n = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
        if (n > 0) {
            c->out_off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!c->want_write) {
                struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
                epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev);
                c->want_write = 1;
            }
            return;
        }
        conn_lost(c, epfd);
        return;
    }
    c->out_len = c->out_off = 0;
    if (c->want_write && c->open) {
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev);
        c->want_write = 0;
    }
}

static long parse_long(const char *p, const char *end, const char **stop) {
    int negative = 0;
    long v = 0;
    if (p < end && *p == '-') {
        negative = 1;
        p++;
    }
    while (p < end && *p >= '0' && *p <= '9')
        v = v * 10 + (*p++ - '0');
    if (stop)
        *stop = p;
    return negative ? -v : v;
}

static long header_field(const char *h, size_t len, const char *key, size_t key_len) {
    const char *at = memmem(h, len, key, key_len);
    if (at == NULL)
        return -1;
    return parse_long(at + key_len, h + len, NULL);
}

static void record(const slot *s, double now, int ok, long code) {
    S.outstanding--;
    if (now < S.window_start || now >= S.window_end)
        return;
    S.completed++;
    push(&S.latencies, now - s->sent_at);
    if (!S.closed_loop) {
        push(&S.intended, now - s->intended);
        push(&S.offsets, s->intended - S.window_start);
    }
    if (!ok) {
        S.errors++;
        int i = 0;
        while (i < S.code_count && S.codes[i][0] != code)
            i++;
        if (i == S.code_count && S.code_count < MAX_CODES)
            S.codes[S.code_count++][0] = code;
        if (i < S.code_count)
            S.codes[i][1]++;
    }
}

/* one read (epoll is level-triggered: what it leaves comes back) and every whole reply in the
   buffer; returns how many were answers to our requests */
static int conn_read(conn *c, int epfd) {
    if (c->in_cap - c->in_len < 65536)
        c->in = grow(c->in, c->in_cap *= 2);
    ssize_t n = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 0;
    if (n <= 0) {
        conn_lost(c, epfd);
        return 0;
    }
    c->in_len += (size_t)n;
    double now = mono();
    size_t pos = 0;
    int replies = 0;
    while (c->in_len - pos >= 8) {
        const unsigned char *p = (const unsigned char *)c->in + pos;
        uint32_t total = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        uint32_t header_len = (uint32_t)p[5] << 16 | (uint32_t)p[6] << 8 | p[7];
        if (c->in_len - pos - 4 < total)
            break;
        if (total < 4 || header_len > total - 4)
            die("a reply frame's header (%u bytes) does not fit its frame (%u)", header_len, total);
        const char *h = c->in + pos + 8;
        long code = header_field(h, header_len, "\"code\":", 7);
        long opaque = header_field(h, header_len, "\"opaque\":", 9);
        size_t body_len = total - 4 - header_len;
        pos += 4 + (size_t)total;
        if (opaque < OPAQUE_BASE || opaque >= c->opaque)
            continue;
        slot *s = &c->ring[(opaque - OPAQUE_BASE) & (RING - 1)];
        if (!s->live)
            continue;
        s->live = 0;
        c->in_flight--;
        record(s, now, code == 0 && body_len > 0, code);
        replies++;
    }
    memmove(c->in, c->in + pos, c->in_len - pos);
    c->in_len -= pos;
    return replies;
}

/* ---- the job --------------------------------------------------------------------------------- */

static void write_result(const char *path) {
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        die("cannot write %s: %s", path, strerror(errno));
    int64_t counters[12] = {S.completed, S.errors,      S.sent,           S.late,         S.skipped,
                            S.disconnects, S.unanswered, S.connections,  (int64_t)S.latencies.n,
                            (int64_t)S.intended.n, (int64_t)S.offsets.n, S.code_count};
    double times[2] = {S.cpu, S.window};
    fwrite("RMQLOAD1", 1, 8, f);
    fwrite(counters, sizeof counters, 1, f);
    fwrite(times, sizeof times, 1, f);
    for (int i = 0; i < S.code_count; i++) {
        int64_t pair[2] = {S.codes[i][0], S.codes[i][1]};
        fwrite(pair, sizeof pair, 1, f);
    }
    fwrite(S.latencies.v, sizeof(double), S.latencies.n, f);
    fwrite(S.intended.v, sizeof(double), S.intended.n, f);
    fwrite(S.offsets.v, sizeof(double), S.offsets.n, f);
    if (fclose(f) != 0)
        die("cannot write %s: %s", path, strerror(errno));
}

static const char *arg(int argc, char **argv, const char *name, const char *fallback) {
    for (int i = 1; i + 1 < argc; i += 2)
        if (strcmp(argv[i], name) == 0)
            return argv[i + 1];
    if (fallback == NULL)
        die("missing %s", name);
    return fallback;
}

int main(int argc, char **argv) {
    const char *out = arg(argc, argv, "--out", NULL);
    load_frames(arg(argc, argv, "--frames", NULL));
    int conns_per_target = atoi(arg(argc, argv, "--conns", "4"));
    int depth = atoi(arg(argc, argv, "--depth", "8"));
    double rate = atof(arg(argc, argv, "--rate", "0"));
    int procs = atoi(arg(argc, argv, "--procs", "1"));
    int index = atoi(arg(argc, argv, "--index", "0"));
    double warmup = atof(arg(argc, argv, "--warmup", "2"));
    double duration = atof(arg(argc, argv, "--duration", "5"));
    double start_at = atof(arg(argc, argv, "--start-at", NULL));
    S.uniform = atoi(arg(argc, argv, "--uniform", "0"));
    S.rng = 1000003ULL * (uint64_t)index + 17;
    S.next_index = (long)index * 7;
    const char *targets = arg(argc, argv, "--targets", NULL); /* host:port,host:port */
    const char *steps_arg = arg(argc, argv, "--steps", "");   /* seconds:factor,... */
    if (conns_per_target < 1 || depth < 1 || procs < 1 || duration <= 0)
        die("conns, depth, procs and duration must be positive");

    /* targets, connections interleaved so round-robin sends alternate between them */
    char *list = strdup(targets), *save = NULL;
    int target_fds[64][64], target_count = 0;
    for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (target_count == 64 || conns_per_target > 64)
            die("at most 64 targets and 64 connections per target");
        for (int i = 0; i < conns_per_target; i++)
            target_fds[target_count][i] = connect_to(t);
        target_count++;
    }
    int n = target_count * conns_per_target;
    if (n == 0 || n > MAX_CONNS)
        die("between 1 and %d connections, not %d", MAX_CONNS, n);
    conn *conns = grow(NULL, (size_t)n * sizeof(conn));
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    for (int i = 0; i < conns_per_target; i++) {
        for (int j = 0; j < target_count; j++) {
            conn *c = &conns[i * target_count + j];
            memset(c, 0, sizeof *c);
            c->fd = target_fds[j][i];
            c->open = 1;
            c->opaque = OPAQUE_BASE;
            c->ring = calloc(RING, sizeof(slot));
            c->in_cap = c->out_cap = 1 << 18;
            c->in = grow(NULL, c->in_cap);
            c->out = grow(NULL, c->out_cap);
            if (c->ring == NULL)
                die("out of memory");
            struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
            epoll_ctl(epfd, EPOLL_CTL_ADD, c->fd, &ev);
        }
    }
    S.connections = n;

    double start = start_at + (mono() - wall());
    S.window_start = start + warmup;
    S.window_end = S.window_start + duration;
    S.closed_loop = rate <= 0;
    S.sending = 1;

    schedule sched = {0};
    if (!S.closed_loop) {
        double seconds[MAX_STEPS + 1], rates[MAX_STEPS + 1], factors[MAX_STEPS];
        int steps = 0;
        char *sl = strdup(steps_arg), *ss = NULL;
        for (char *t = strtok_r(sl, ",", &ss); t; t = strtok_r(NULL, ",", &ss)) {
            if (steps == MAX_STEPS)
                die("at most %d steps", MAX_STEPS);
            char *colon = strchr(t, ':');
            if (colon == NULL)
                die("bad step %s (seconds:factor)", t);
            seconds[steps] = atof(t);
            factors[steps++] = atof(colon + 1);
        }
        double share = rate / procs;
        double first = start + index / (procs * share * (steps ? factors[0] : 1.0));
        int k = 0;
        if (steps == 0) {
            seconds[0] = warmup + duration;
            rates[0] = share;
            k = 1;
        } else {
            double s2[MAX_STEPS + 1];
            if (warmup > 0) {
                s2[k] = warmup;
                rates[k++] = share * factors[0];
            }
            for (int i = 0; i < steps; i++) {
                s2[k] = seconds[i];
                rates[k++] = share * factors[i];
            }
            memcpy(seconds, s2, sizeof s2);
        }
        for (int i = 0; i < k; i++)
            if (seconds[i] <= 0 || rates[i] <= 0)
                die("steps need positive lengths and rates");
        schedule_init(&sched, first, seconds, rates, k);
    }

    sleep_until(start);
    double cpu0 = 0, t0 = 0;
    int cpu_started = 0, cpu_done = 0;
    if (S.closed_loop) {
        double now = mono();
        for (int i = 0; i < n; i++) {
            for (int d = 0; d < depth; d++)
                conn_send(&conns[i], now, now);
            conn_flush(&conns[i], epfd);
        }
    }
    long sent = 0;
    double next_tick = 0;
    struct epoll_event events[256];
    char *touched = calloc((size_t)n, 1);
    for (;;) {
        double now = mono();
        if (!cpu_started && now >= S.window_start) {
            cpu0 = cpu_now();
            t0 = now;
            cpu_started = 1;
        }
        if (now >= S.window_end)
            break;
        /* open loop: sends go out on a 1 ms tick, as bench/loadgen.py's do, not as replies wake
           the loop: finer sends cost the generator and the server a write and a read per request */
        if (!S.closed_loop && now >= next_tick) {
            next_tick = now + 0.001;
            long due = schedule_due(&sched, now);
            int in_window = S.window_start <= now && now < S.window_end;
            for (long k = sent; k < due; k++) {
                double intended = schedule_intended(&sched, k);
                conn *c = &conns[k % n];
                if (c->in_flight >= OPEN_LOOP_CAP || !c->open) { /* a closed one: nowhere to send */
                    S.skipped += in_window;
                    continue;
                }
                conn_send(c, now, intended);
                touched[k % n] = 1;
                if (in_window) {
                    S.sent++;
                    S.late += now - intended > LATE_SEND;
                }
            }
            if (due > sent) {
                for (int i = 0; i < n; i++)
                    if (touched[i]) {
                        touched[i] = 0;
                        conn_flush(&conns[i], epfd);
                    }
                sent = due;
            }
        }
        int ready = epoll_wait(epfd, events, 256, 1);
        for (int e = 0; e < ready; e++) {
            conn *c = events[e].data.ptr;
            if (events[e].events & EPOLLOUT)
                conn_flush(c, epfd);
            if (events[e].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
                int replies = conn_read(c, epfd);
                if (S.closed_loop && S.sending && c->open && mono() < S.window_end) {
                    double at = mono();
                    for (int r = 0; r < replies; r++)
                        conn_send(c, at, at);
                    conn_flush(c, epfd);
                }
            }
        }
    }
    if (cpu_started && !cpu_done) {
        S.cpu = cpu_now() - cpu0;
        S.window = mono() - t0;
        cpu_done = 1;
    }
    S.sending = 0;
    /* let the requests still in flight finish (not counted), so no server sees a reset */
    double give_up = mono() + 2.0;
    while (S.outstanding > 0 && mono() < give_up) {
        int ready = epoll_wait(epfd, events, 256, 10);
        for (int e = 0; e < ready; e++) {
            conn *c = events[e].data.ptr;
            if (events[e].events & EPOLLOUT)
                conn_flush(c, epfd);
            if (events[e].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
                conn_read(c, epfd);
        }
    }
    for (int i = 0; i < n; i++)
        if (conns[i].open)
            close(conns[i].fd);
    /* stay a moment past the window: the bench reads this process's CPU time as its parent's at
       the window's end, and a child that has just ended but is not yet waited for counts for
       neither */
    sleep_until(S.window_end + 0.5);
    write_result(out);
    return 0;
}
