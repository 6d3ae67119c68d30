/* libmqm_r.so for tests: the 23 MQI verbs IBM's `ibmmq` package links against, each sent to an
 * emulated queue manager (tests/mqemu/qmgr.py) over a loopback TCP socket. NOT IBM MQ.
 *
 * The library only transports: every verb becomes one request frame holding its integer
 * arguments, the raw bytes of its structures (as long as their Version says) and the strings
 * their pointers point at; the reply holds CompCode, Reason and the bytes to copy back into
 * the caller's output structures. All semantics live in qmgr.py. Pointers are never kept.
 *
 * Wire format (little endian): frame = u32 length, then the payload. Request payload: u32 verb,
 * u32 count, then count fields of (u32 length, bytes). Reply payload: i32 CompCode, i32 Reason,
 * u32 count, fields as in requests. Build: gcc -shared -fPIC -Wl,-soname,libmqm_r.so -pthread.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef int32_t MQLONG;
typedef MQLONG MQHCONN, MQHOBJ;
typedef int64_t MQHMSG;
typedef MQLONG *PMQLONG;
typedef MQHCONN *PMQHCONN;
typedef MQHOBJ *PMQHOBJ;
typedef MQHMSG *PMQHMSG;
typedef char *PMQCHAR;
typedef void *PMQVOID;

enum { CC_OK = 0, CC_FAILED = 2, CC_MOVE = -1 }; /* CC_MOVE: rebalance.py's move request */
enum {
    RC_CONNECTION_BROKEN = 2009, RC_HCONN_ERROR = 2018, RC_Q_MGR_NAME_ERROR = 2058,
    RC_Q_MGR_NOT_AVAILABLE = 2059, RC_RESOURCE_PROBLEM = 2102, RC_CD_ERROR = 2277,
    RC_FUNCTION_NOT_SUPPORTED = 2298, RC_HOST_NOT_AVAILABLE = 2538
};
/* Verb numbers shared with qmgr.py (VERBS there). */
enum {
    V_CONNX = 1, V_DISC, V_OPEN, V_CLOSE, V_PUT, V_PUT1, V_GET, V_INQ, V_SET, V_BEGIN,
    V_CMIT, V_BACK, V_SUB, V_SUBRQ, V_CB, V_CTL, V_STAT, V_CRTMH, V_DLTMH, V_SETMP, V_INQMP,
    V_DLTMP
};

#define MAX_FIELDS 16
#define SLOTS 4096

typedef struct { const void *ptr; uint32_t len; } field_t;
typedef struct { char *data; uint32_t len; } reply_field_t;

/* An MQOPEN or MQSUB a reconnect replays: its request fields (copied) and the handles it
 * returned, which the replay asks for again (the application keeps using them). */
#define KEPT_FIELDS 5
typedef struct {
    uint32_t verb;
    MQHOBJ handle, handle2; /* MQOPEN: hobj; MQSUB: hsub, hobj */
    int nfields;
    char *data[KEPT_FIELDS];
    uint32_t len[KEPT_FIELDS];
} kept_t;

/* What a reconnectable connection (MQCNO_RECONNECT, _Q_MGR) needs to connect again. */
typedef struct {
    MQLONG mode;
    char name[49], qmgr[49]; /* asked for; reached */
    char cno[272], cd[2000], user[256], password[256], ccdt[1024];
    uint32_t cno_len, cd_len, user_len, password_len, ccdt_len;
    kept_t *kept;
    int nkept;
} recon_t;

typedef void (*callback_t)(MQHCONN, PMQVOID, PMQVOID, PMQVOID, PMQVOID);

typedef struct {
    MQHCONN hconn; /* 0 = free */
    int fd;
    int broken;
    MQLONG broken_reason;
    pthread_mutex_t lock; /* one verb at a time per connection (MQCNO_HANDLE_SHARE_BLOCK) */
    recon_t *recon;
    int uow, backed_out;
    /* the event handler (MQCB) and its dispatcher thread */
    callback_t handler;
    char area[8];
    pthread_t dispatcher;
    int dispatching, stop;
    pthread_mutex_t ev_lock;
    pthread_cond_t ev_cond;
    MQLONG events[16][3]; /* CompCode, Reason, ReconnectDelay */
    int ev_head, ev_tail;
} conn_t;

static conn_t conns[SLOTS];
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static MQHCONN next_hconn = 1;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void init_table(void) {
    for (int i = 0; i < SLOTS; i++) {
        pthread_mutex_init(&conns[i].lock, NULL);
        pthread_mutex_init(&conns[i].ev_lock, NULL);
        pthread_cond_init(&conns[i].ev_cond, NULL);
    }
}

static int reconnect(conn_t *c, const char *hint);

/* ---------------------------------------------------------------------------------------- */
/* structure lengths by Version (the MQxx_LENGTH_n constants, 64-bit)                        */

static uint32_t version_length(const void *s, const uint32_t *lengths, int count) {
    MQLONG v;
    memcpy(&v, (const char *)s + 4, 4);
    if (v < 1) v = 1;
    if (v > count) v = count;
    return lengths[v - 1];
}
static const uint32_t MD_LEN[] = {324, 364};
static const uint32_t OD_LEN[] = {168, 208, 344, 424};
static const uint32_t PMO_LEN[] = {128, 160, 184};
static const uint32_t GMO_LEN[] = {72, 80, 100, 112};
static const uint32_t SD_LEN[] = {344};
static const uint32_t CNO_LEN[] = {12, 24, 152, 168, 200, 224, 256, 272};
static const uint32_t CSP_LEN[] = {56, 80, 104};
static const uint32_t CBD_LEN[] = {168};
static const uint32_t STS_LEN[] = {224, 280};
static const uint32_t SRO_LEN[] = {16};

#define VLEN(s, table) version_length((s), (table), (int)(sizeof(table) / sizeof(table[0])))

static const void *ptr_at(const void *s, size_t offset) {
    const void *p;
    memcpy(&p, (const char *)s + offset, sizeof p);
    return p;
}
static MQLONG long_at(const void *s, size_t offset) {
    MQLONG v;
    memcpy(&v, (const char *)s + offset, 4);
    return v;
}

/* The string an MQCHARV at `offset` of `s` points at (VSPtr/VSLength; VSOffset is not used by
 * ibmmq), or an empty field. */
static field_t charv(const void *s, size_t offset) {
    field_t f = {"", 0};
    const void *p = ptr_at(s, offset);
    MQLONG len = long_at(s, offset + 16);
    if (p && len > 0) { f.ptr = p; f.len = (uint32_t)len; }
    else if (p && len == -1) { f.ptr = p; f.len = (uint32_t)strlen((const char *)p); }
    return f;
}

/* ---------------------------------------------------------------------------------------- */
/* socket I/O                                                                                */

static int write_all(int fd, const void *buf, size_t len) {
    const char *p = buf;
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n <= 0) return -1;
        p += n; len -= (size_t)n;
    }
    return 0;
}
static int read_all(int fd, void *buf, size_t len) {
    char *p = buf;
    while (len) {
        ssize_t n = recv(fd, p, len, 0);
        if (n <= 0) return -1;
        p += n; len -= (size_t)n;
    }
    return 0;
}

/* Send one request and read its reply. On success returns 0 with `*payload` malloc'd (caller
 * frees) and `out` pointing into it; on a transport failure returns -1. */
static int exchange(int fd, uint32_t verb, const field_t *in, int nin, char **payload,
                    MQLONG *cc, MQLONG *rc, reply_field_t *out, int *nout) {
    uint32_t total = 8;
    for (int i = 0; i < nin; i++) total += 4 + in[i].len;
    char *req = malloc(4 + total);
    if (!req) return -1;
    char *p = req;
    uint32_t head[3] = {total, verb, (uint32_t)nin};
    memcpy(p, head, 12); p += 12;
    for (int i = 0; i < nin; i++) {
        memcpy(p, &in[i].len, 4); p += 4;
        if (in[i].len) memcpy(p, in[i].ptr, in[i].len);
        p += in[i].len;
    }
    int bad = write_all(fd, req, 4 + total);
    free(req);
    if (bad) return -1;
    uint32_t len;
    if (read_all(fd, &len, 4) || len < 12) return -1;
    char *rep = malloc(len);
    if (!rep || read_all(fd, rep, len)) { free(rep); return -1; }
    uint32_t count;
    memcpy(cc, rep, 4); memcpy(rc, rep + 4, 4); memcpy(&count, rep + 8, 4);
    uint32_t at = 12;
    int n = 0;
    for (uint32_t i = 0; i < count && n < MAX_FIELDS; i++) {
        uint32_t flen;
        if (at + 4 > len) break;
        memcpy(&flen, rep + at, 4); at += 4;
        if (at + flen > len) break;
        out[n].data = rep + at; out[n].len = flen; n++;
        at += flen;
    }
    *nout = n;
    *payload = rep;
    return 0;
}

static MQLONG int_of_field(const reply_field_t *f) {
    MQLONG v = 0;
    if (f->len >= 4) memcpy(&v, f->data, 4);
    return v;
}

static void free_kept(kept_t *k) {
    for (int i = 0; i < k->nfields; i++) free(k->data[i]);
}

/* Remember a successful MQOPEN/MQSUB for replay. A model queue's MQOPEN is replayed with the
 * temporary dynamic queue's name as DynamicQName, so the queue comes back under that name. */
static void keep(recon_t *r, uint32_t verb, const field_t *in, int nin, MQHOBJ handle,
                 MQHOBJ handle2, const reply_field_t *od_out) {
    kept_t *grown = realloc(r->kept, (size_t)(r->nkept + 1) * sizeof *grown);
    if (!grown) return;
    r->kept = grown;
    kept_t *k = &r->kept[r->nkept++];
    memset(k, 0, sizeof *k);
    k->verb = verb; k->handle = handle; k->handle2 = handle2;
    for (int i = 0; i < nin && i < KEPT_FIELDS; i++) {
        k->data[i] = malloc(in[i].len ? in[i].len : 1);
        if (k->data[i] && in[i].len) memcpy(k->data[i], in[i].ptr, in[i].len);
        k->len[i] = k->data[i] ? in[i].len : 0;
        k->nfields = i + 1;
    }
    if (od_out && k->len[0] >= 156 && od_out->len >= 60 && long_at(k->data[0], 8) == 1
        && memcmp(k->data[0] + 12, od_out->data + 12, 48))
        memcpy(k->data[0] + 108, od_out->data + 12, 48); /* ObjectName -> DynamicQName */
}

/* MQCLOSE of hobj or hsub `h`: no longer replayed (order kept: an MQSUB follows its queue). */
static void forget(recon_t *r, MQHOBJ h) {
    for (int i = 0; i < r->nkept; i++)
        if (r->kept[i].handle == h) {
            free_kept(&r->kept[i]);
            memmove(&r->kept[i], &r->kept[i + 1], (size_t)(r->nkept - i - 1) * sizeof *r->kept);
            r->nkept--;
            return;
        }
}

static conn_t *find(MQHCONN hconn) {
    if (hconn <= 0) return NULL;
    conn_t *c = &conns[hconn % SLOTS];
    return c->hconn == hconn ? c : NULL;
}

/* One verb on connection `hconn`: fills CompCode/Reason and `out`; returns the reply payload to
 * free (NULL when the verb did not reach the queue manager). */
static char *call(MQHCONN hconn, uint32_t verb, const field_t *in, int nin,
                  reply_field_t *out, int *nout, PMQLONG pCC, PMQLONG pRC) {
    pthread_once(&init_once, init_table);
    *nout = 0;
    conn_t *c = find(hconn);
    if (!c) { *pCC = CC_FAILED; *pRC = RC_HCONN_ERROR; return NULL; }
    pthread_mutex_lock(&c->lock);
    if (c->hconn != hconn) {
        pthread_mutex_unlock(&c->lock);
        *pCC = CC_FAILED; *pRC = RC_HCONN_ERROR; return NULL;
    }
    char *payload = NULL;
    if (verb == V_CMIT && c->backed_out) { /* the unit of work was lost in a reconnect */
        c->backed_out = c->uow = 0;
        pthread_mutex_unlock(&c->lock);
        *pCC = 1; *pRC = 2003; /* MQCC_WARNING, MQRC_BACKED_OUT */
        return NULL;
    }
    for (;;) {
        int lost = c->broken || exchange(c->fd, verb, in, nin, &payload, pCC, pRC, out, nout);
        if (!lost && *pCC == CC_MOVE) {
            /* The queue manager did not run the verb: it asks this connection to move to the
             * queue manager named in the reply (a uniform cluster rebalancing) and drops it. */
            char hint[49];
            snprintf(hint, sizeof hint, "%.*s", *nout ? (int)out[0].len : 0,
                     *nout ? out[0].data : "");
            free(payload);
            payload = NULL;
            *nout = 0;
            if (c->recon && reconnect(c, hint) == 0) {
                if (verb == V_CMIT && c->backed_out) {
                    c->backed_out = c->uow = 0;
                    pthread_mutex_unlock(&c->lock);
                    *pCC = 1; *pRC = 2003; /* MQCC_WARNING, MQRC_BACKED_OUT */
                    return NULL;
                }
                continue; /* the verb runs on the new connection */
            }
            c->broken = lost = 1;
            c->broken_reason = c->recon ? 2548 : RC_CONNECTION_BROKEN;
        }
        if (!lost) break;
        MQLONG why = c->broken ? c->broken_reason : RC_CONNECTION_BROKEN;
        if (!c->broken && c->recon && verb != V_DISC && verb != V_CONNX) {
            if (reconnect(c, NULL) == 0) {
                if (verb == V_PUT || verb == V_PUT1 || verb == V_CMIT) {
                    why = 2549; /* MQRC_CALL_INTERRUPTED: its outcome is unknown */
                } else {
                    continue; /* any other verb runs again on the new connection */
                }
            } else {
                why = 2548; /* MQRC_RECONNECT_FAILED */
            }
        }
        if (why != 2549) { c->broken = 1; c->broken_reason = why; }
        pthread_mutex_unlock(&c->lock);
        *pCC = CC_FAILED; *pRC = why;
        return NULL;
    }
    if (*pCC != CC_FAILED) {
        if (verb == V_CMIT || verb == V_BACK) c->uow = c->backed_out = 0;
        if ((verb == V_PUT && long_at(in[2].ptr, 8) & 0x2)
            || (verb == V_PUT1 && long_at(in[3].ptr, 8) & 0x2)
            || (verb == V_GET && long_at(in[2].ptr, 8) & (0x2 | 0x1000)))
            c->uow = 1; /* MQPMO_SYNCPOINT, MQGMO_SYNCPOINT(_IF_PERSISTENT) */
        if (c->recon && verb == V_OPEN && *nout >= 2)
            keep(c->recon, verb, in, 3, int_of_field(&out[0]), 0, &out[1]);
        if (c->recon && verb == V_SUB && *nout >= 3)
            keep(c->recon, verb, in, 5, int_of_field(&out[2]), int_of_field(&out[1]), NULL);
        if (c->recon && verb == V_CLOSE) {
            MQHOBJ h;
            memcpy(&h, in[0].ptr, 4);
            forget(c->recon, h);
        }
    }
    pthread_mutex_unlock(&c->lock);
    return payload;
}

static void copy_out(void *dst, uint32_t room, const reply_field_t *f) {
    if (dst && f->len) memcpy(dst, f->data, f->len < room ? f->len : room);
}
static MQLONG int_of(const reply_field_t *f) {
    MQLONG v = 0;
    if (f->len >= 4) memcpy(&v, f->data, 4);
    return v;
}

static void unsupported(PMQLONG pCC, PMQLONG pRC) {
    *pCC = CC_FAILED;
    *pRC = RC_FUNCTION_NOT_SUPPORTED;
}

/* ---------------------------------------------------------------------------------------- */
/* JSON CCDT (file:// URLs only): just enough JSON to read the documented channel keys        */

#define CCDT_MAX 64
#define CCDT_CONNS 8

typedef struct {
    char name[21], type[32], qmgr[49];
    char hosts[CCDT_CONNS][256];
    int ports[CCDT_CONNS];
    int nconn, weight;
} ccdt_entry_t;

typedef struct { char key[48]; int index; } step_t;
typedef struct {
    const char *p, *end;
    int bad, depth;
    step_t path[12];
    ccdt_entry_t *entries;
    int count;
} json_t;

static void ws(json_t *j) { while (j->p < j->end && isspace((unsigned char)*j->p)) j->p++; }

static int jstring(json_t *j, char *out, size_t room) {
    size_t n = 0;
    if (j->p >= j->end || *j->p != '"') { j->bad = 1; return -1; }
    j->p++;
    while (j->p < j->end && *j->p != '"') {
        char c = *j->p++;
        if (c == '\\' && j->p < j->end) {
            c = *j->p++;
            if (c == 'n') c = '\n';
            else if (c == 't') c = '\t';
            else if (c == 'u') { c = '?'; j->p += (j->end - j->p >= 4) ? 4 : 0; }
        }
        if (n + 1 < room) out[n++] = c;
    }
    if (j->p >= j->end) { j->bad = 1; return -1; }
    j->p++;
    out[n] = 0;
    return 0;
}

static int is(const json_t *j, int at, const char *key) {
    return j->depth > at && !strcmp(j->path[at].key, key);
}

/* A scalar at the current path: keep what a channel entry needs. */
static void scalar(json_t *j, const char *value) {
    if (!is(j, 0, "channel") || j->depth < 3) return;
    int i = j->path[1].index;
    if (i < 0 || i >= CCDT_MAX) return;
    ccdt_entry_t *e = &j->entries[i];
    if (i + 1 > j->count) j->count = i + 1;
    if (j->depth == 3 && is(j, 2, "name")) snprintf(e->name, sizeof e->name, "%s", value);
    else if (j->depth == 3 && is(j, 2, "type")) snprintf(e->type, sizeof e->type, "%s", value);
    else if (j->depth == 4 && is(j, 2, "clientConnection") && is(j, 3, "queueManager"))
        snprintf(e->qmgr, sizeof e->qmgr, "%s", value);
    else if (j->depth == 4 && is(j, 2, "connectionManagement") && is(j, 3, "clientWeight"))
        e->weight = atoi(value);
    else if (j->depth == 6 && is(j, 2, "clientConnection") && is(j, 3, "connection")) {
        int c = j->path[4].index;
        if (c < 0 || c >= CCDT_CONNS) return;
        if (c + 1 > e->nconn) e->nconn = c + 1;
        if (is(j, 5, "host")) snprintf(e->hosts[c], sizeof e->hosts[c], "%s", value);
        if (is(j, 5, "port")) e->ports[c] = atoi(value);
    }
}

static void jvalue(json_t *j) {
    char text[512];
    ws(j);
    if (j->bad || j->p >= j->end || j->depth >= 11) { j->bad = 1; return; }
    char c = *j->p;
    if (c == '{' || c == '[') {
        j->p++;
        int index = 0;
        for (;;) {
            ws(j);
            if (j->p < j->end && *j->p == (c == '{' ? '}' : ']')) { j->p++; return; }
            step_t *step = &j->path[j->depth];
            step->key[0] = 0;
            step->index = -1;
            if (c == '{') {
                if (jstring(j, step->key, sizeof step->key)) return;
                ws(j);
                if (j->p >= j->end || *j->p != ':') { j->bad = 1; return; }
                j->p++;
            } else {
                step->index = index++;
            }
            j->depth++;
            jvalue(j);
            j->depth--;
            if (j->bad) return;
            ws(j);
            if (j->p < j->end && *j->p == ',') { j->p++; continue; }
            if (j->p < j->end && *j->p == (c == '{' ? '}' : ']')) { j->p++; return; }
            j->bad = 1;
            return;
        }
    }
    if (c == '"') { if (!jstring(j, text, sizeof text)) scalar(j, text); return; }
    size_t n = 0;
    while (j->p < j->end && !strchr(",}] \t\r\n", *j->p)) {
        if (n + 1 < sizeof text) text[n++] = *j->p;
        j->p++;
    }
    text[n] = 0;
    if (!n) { j->bad = 1; return; }
    scalar(j, text);
}

static int by_name(const void *a, const void *b) {
    return strcmp(((const ccdt_entry_t *)a)->name, ((const ccdt_entry_t *)b)->name);
}

/* The CONNAME list for queue manager `qmgr` ("*GROUP", a name, or "") from the CCDT at `url`:
 * every applicable channel's connections, CLNTWGHT(0) channels first in alphabetical order,
 * then the others in an order drawn at random by weight. 0, or -1 with *pRC set. */
static int ccdt_conname(const char *url, size_t url_len, const char *qmgr, size_t qmgr_len,
                        char *out, size_t room, PMQLONG pRC) {
    char path[1024];
    *pRC = 2600; /* MQRC_CCDT_URL_ERROR */
    if (url_len < 7 || strncmp(url, "file://", 7) || url_len - 7 >= sizeof path) return -1;
    memcpy(path, url + 7, url_len - 7);
    path[url_len - 7] = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    static char text[1 << 20];
    static pthread_mutex_t ccdt_lock = PTHREAD_MUTEX_INITIALIZER;
    static ccdt_entry_t entries[CCDT_MAX];
    pthread_mutex_lock(&ccdt_lock);
    size_t n = fread(text, 1, sizeof text, f);
    fclose(f);
    memset(entries, 0, sizeof entries);
    json_t j = {text, text + n, 0, 0, {{{0}, 0}}, entries, 0};
    jvalue(&j);
    if (j.bad) { pthread_mutex_unlock(&ccdt_lock); return -1; }
    char wanted[49];
    const char *name = qmgr;
    size_t len = qmgr_len;
    if (len && name[0] == '*') { name++; len--; }
    snprintf(wanted, sizeof wanted, "%.*s", (int)len, name);
    ccdt_entry_t fit[CCDT_MAX];
    int nfit = 0, nzero = 0;
    for (int i = 0; i < j.count; i++) {
        ccdt_entry_t *e = &entries[i];
        if ((e->type[0] && strcmp(e->type, "clientConnection")) || !e->nconn) continue;
        if (wanted[0] && strcmp(e->qmgr, wanted)) continue;
        if (e->weight == 0) {  /* zero weights first, alphabetically, stable for equal names */
            memmove(&fit[nzero + 1], &fit[nzero], (size_t)(nfit - nzero) * sizeof *fit);
            fit[nzero++] = *e;
        } else {
            fit[nfit] = *e;
        }
        nfit++;
    }
    pthread_mutex_unlock(&ccdt_lock);
    for (int a = 1; a < nzero; a++)  /* insertion sort: stable */
        for (int b = a; b > 0 && by_name(&fit[b - 1], &fit[b]) > 0; b--) {
            ccdt_entry_t t = fit[b]; fit[b] = fit[b - 1]; fit[b - 1] = t;
        }
    for (int a = nzero; a < nfit; a++) {  /* weighted draw without replacement */
        long total = 0;
        for (int b = a; b < nfit; b++) total += fit[b].weight;
        long pick = total > 0 ? random() % total : 0;
        int b = a;
        while (b < nfit - 1 && pick >= fit[b].weight) { pick -= fit[b].weight; b++; }
        ccdt_entry_t t = fit[a]; fit[a] = fit[b]; fit[b] = t;
    }
    if (!nfit) { *pRC = RC_Q_MGR_NAME_ERROR; return -1; }
    out[0] = 0;
    for (int i = 0; i < nfit; i++)
        for (int c = 0; c < fit[i].nconn; c++) {
            size_t used = strlen(out);
            snprintf(out + used, room - used, "%s%s(%d)", used ? "," : "", fit[i].hosts[c],
                     fit[i].ports[c] ? fit[i].ports[c] : 1414);
        }
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* connecting                                                                                */

static int is_loopback(const char *host) {
    return !strcmp(host, "localhost") || !strncmp(host, "127.", 4) || !strcmp(host, "::1");
}

/* Connect to the first reachable entry of a CONNAME list "host(port),host(port)". Returns the
 * socket, the entry reached in `reached`, or -1 with *pRC set. */
static int dial(const char *conname, PMQLONG pRC, char *reached, size_t room) {
    char list[512];
    snprintf(list, sizeof list, "%s", conname);
    *pRC = RC_HOST_NOT_AVAILABLE;
    char *save = NULL;
    for (char *entry = strtok_r(list, ",", &save); entry; entry = strtok_r(NULL, ",", &save)) {
        while (isspace((unsigned char)*entry)) entry++;
        char host[256] = "";
        int port = 1414;
        char *open = strchr(entry, '(');
        size_t hlen = open ? (size_t)(open - entry) : strlen(entry);
        while (hlen && isspace((unsigned char)entry[hlen - 1])) hlen--;
        if (hlen == 0 || hlen >= sizeof host) { *pRC = RC_CD_ERROR; continue; }
        memcpy(host, entry, hlen); host[hlen] = 0;
        if (open) port = atoi(open + 1);
        if (!is_loopback(host) || port <= 0 || port > 65535) continue;
        struct sockaddr_in addr = {0};
        addr.sin_family = AF_INET;
        addr.sin_port = htons((uint16_t)port);
        inet_pton(AF_INET, strcmp(host, "localhost") && strcmp(host, "::1") ? host : "127.0.0.1",
                  &addr.sin_addr);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) { *pRC = RC_RESOURCE_PROBLEM; return -1; }
        if (connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            snprintf(reached, room, "%s(%d)", host, port);
            return fd;
        }
        close(fd);
    }
    return -1;
}

/* The CONNAME to use: the MQCD's, else MQSERVER's (CHANNEL/TCP/CONNAME). */
static int conname_of(const void *cd, char *out, size_t room) {
    if (cd) {
        snprintf(out, room, "%.264s", (const char *)cd + 1024);
        size_t n = strlen(out);
        while (n && (out[n - 1] == ' ' || out[n - 1] == 0)) out[--n] = 0;
        return n ? 0 : -1;
    }
    const char *server = getenv("MQSERVER");
    if (server) {
        const char *slash = strrchr(server, '/');
        if (slash) { snprintf(out, room, "%s", slash + 1); return 0; }
    }
    return -1;
}

/* ---------------------------------------------------------------------------------------- */
/* event handler and automatic reconnection (MQCNO_RECONNECT, MQCNO_RECONNECT_Q_MGR)          */

/* The dispatcher thread of a connection: calls its event handler with each queued event, in
 * order, never inside MQCB (ibmmq records the handler only after MQCB returns). */
static void *dispatch(void *arg) {
    conn_t *c = arg;
    pthread_mutex_lock(&c->ev_lock);
    for (;;) {
        while (c->ev_head == c->ev_tail && !c->stop) pthread_cond_wait(&c->ev_cond, &c->ev_lock);
        if (c->ev_head == c->ev_tail && c->stop) break;
        MQLONG *e = c->events[c->ev_head % 16];
        char cbc[64] = {0};
        MQLONG head[2] = {2, 5}; /* Version 2, MQCBCT_EVENT_CALL */
        memcpy(cbc, "CBC ", 4);
        memcpy(cbc + 4, head, 8);
        memcpy(cbc + 16, c->area, 8);         /* CallbackArea, as registered */
        memcpy(cbc + 32, &e[0], 4);           /* CompCode */
        memcpy(cbc + 36, &e[1], 4);           /* Reason */
        memcpy(cbc + 56, &e[2], 4);           /* ReconnectDelay */
        c->ev_head++;
        callback_t fn = c->handler;
        MQHCONN h = c->hconn;
        pthread_mutex_unlock(&c->ev_lock);
        if (fn) fn(h, NULL, NULL, NULL, cbc);
        pthread_mutex_lock(&c->ev_lock);
    }
    pthread_mutex_unlock(&c->ev_lock);
    return NULL;
}

static void post_event(conn_t *c, MQLONG cc, MQLONG rc, MQLONG delay) {
    pthread_mutex_lock(&c->ev_lock);
    if (c->dispatching && c->handler && c->ev_tail - c->ev_head < 16) {
        MQLONG *e = c->events[c->ev_tail % 16];
        e[0] = cc; e[1] = rc; e[2] = delay;
        c->ev_tail++;
        pthread_cond_signal(&c->ev_cond);
    }
    pthread_mutex_unlock(&c->ev_lock);
}

static void stop_dispatcher(conn_t *c) {
    pthread_mutex_lock(&c->ev_lock);
    int running = c->dispatching;
    c->stop = 1;
    pthread_cond_signal(&c->ev_cond);
    pthread_mutex_unlock(&c->ev_lock);
    if (running && !pthread_equal(c->dispatcher, pthread_self()))
        pthread_join(c->dispatcher, NULL);
    else if (running)
        pthread_detach(c->dispatcher);
    pthread_mutex_lock(&c->ev_lock);
    c->dispatching = 0; c->stop = 0; c->handler = NULL; c->ev_head = c->ev_tail = 0;
    pthread_mutex_unlock(&c->ev_lock);
}

static double reconnect_timeout_s(void) {
    const char *text = getenv("MQEMU_RECONNECT_TIMEOUT_S");
    double t = text ? atof(text) : 30.0;
    return t > 0 ? t : 30.0;
}

/* Dial `conname`, MQCONNX as `name`, reopen every handle under its old number. The socket or
 * -1. */
static int attach(conn_t *c, const char *conname, const char *name) {
    recon_t *r = c->recon;
    MQLONG why;
    char reached[300];
    int fd = dial(conname, &why, reached, sizeof reached);
    if (fd < 0) return -1;
    field_t in[] = {{name, (uint32_t)strlen(name)}, {r->cno, r->cno_len}, {r->cd, r->cd_len},
                    {r->user, r->user_len}, {r->password, r->password_len},
                    {r->ccdt, r->ccdt_len}, {reached, (uint32_t)strlen(reached)}};
    reply_field_t out[MAX_FIELDS];
    int nout;
    char *payload = NULL;
    MQLONG cc, rc;
    if (exchange(fd, V_CONNX, in, 7, &payload, &cc, &rc, out, &nout) || cc == CC_FAILED) {
        free(payload);
        close(fd);
        return -1;
    }
    free(payload);
    for (int i = 0; i < r->nkept; i++) {
        kept_t *k = &r->kept[i];
        field_t again[KEPT_FIELDS + 2];
        int n = 0;
        for (; n < k->nfields; n++) again[n] = (field_t){k->data[n] ? k->data[n] : "", k->len[n]};
        again[n++] = (field_t){&k->handle, 4};
        if (k->verb == V_SUB) {
            again[n++] = (field_t){&k->handle2, 4};
            /* a durable subscription is resumed; a non-durable one made again */
            MQLONG options = long_at(k->data[0], 8);
            if (options & 0x8) options = (options & ~0x2) | 0x4; /* DURABLE: -CREATE +RESUME */
            memcpy(k->data[0] + 8, &options, 4);
        }
        payload = NULL;
        if (exchange(fd, k->verb, again, n, &payload, &cc, &rc, out, &nout) || cc == CC_FAILED) {
            free(payload);
            close(fd);
            return -1;
        }
        free(payload);
    }
    return fd;
}

/* One attempt to connect again: the socket or -1. Without a hint, as the connection was first
 * made (its CONNAME list or CCDT channels; _Q_MGR: the queue manager first reached). With a
 * uniform cluster's hint (a queue manager's name), the CCDT's channels for that queue manager,
 * else each entry of the connection's own list in turn, where only that queue manager accepts
 * the name ("How automatic balancing uses automatic reconnect"). */
static int reconnect_once(conn_t *c, const char *hint) {
    recon_t *r = c->recon;
    char conname[512];
    MQLONG why;
    int own = hint && r->ccdt_len ? ccdt_conname(r->ccdt, r->ccdt_len, hint, strlen(hint),
                                                 conname, sizeof conname, &why) : -1;
    if (own && r->cd_len) {
        if (conname_of(r->cd, conname, sizeof conname)) return -1;
    } else if (own && conname_of(NULL, conname, sizeof conname)
               && (!r->ccdt_len || ccdt_conname(r->ccdt, r->ccdt_len, r->name, strlen(r->name),
                                                conname, sizeof conname, &why))) {
        return -1;
    }
    if (!hint) return attach(c, conname, r->mode == 0x4000000 ? r->qmgr : r->name);
    char *save = NULL;
    for (char *entry = strtok_r(conname, ",", &save); entry; entry = strtok_r(NULL, ",", &save)) {
        int fd = attach(c, entry, hint);
        if (fd >= 0) return fd;
    }
    return -1;
}

/* The connection broke, or its queue manager asked it to move to queue manager `hint`: tell the
 * event handler, connect again (the hinted queue manager first, else any the connection
 * reaches, within the reconnect timeout), tell it how that ended. Called with c->lock held, so
 * the connection's other verbs wait. */
static int reconnect(conn_t *c, const char *hint) {
    close(c->fd);
    c->fd = -1;
    MQLONG delay_ms = 100;
    if (hint) post_event(c, 1, 2601, 0); /* MQCC_WARNING, MQRC_Q_MGR_RECONNECT_REQUESTED */
    post_event(c, 1, 2544, delay_ms); /* MQCC_WARNING, MQRC_RECONNECTING */
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    double limit = reconnect_timeout_s();
    for (;;) {
        usleep((useconds_t)delay_ms * 1000);
        int fd = hint ? reconnect_once(c, hint) : -1;
        if (fd < 0) fd = reconnect_once(c, NULL);
        if (fd >= 0) {
            c->fd = fd;
            c->backed_out = c->uow;
            post_event(c, CC_OK, 2545, 0); /* MQRC_RECONNECTED */
            return 0;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((double)(now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9 > limit)
            break;
        delay_ms = delay_ms * 2 > 1000 ? 1000 : delay_ms * 2;
    }
    post_event(c, CC_FAILED, 2548, 0); /* MQRC_RECONNECT_FAILED */
    return -1;
}

static MQHCONN add_conn(int fd) {
    pthread_mutex_lock(&table_lock);
    for (int tries = 0; tries < SLOTS; tries++) {
        MQHCONN h = next_hconn;
        next_hconn = next_hconn >= 0x7ffffff0 ? 1 : next_hconn + 1;
        conn_t *c = &conns[h % SLOTS];
        if (c->hconn == 0) {
            c->hconn = h; c->fd = fd; c->broken = 0; c->recon = NULL;
            pthread_mutex_unlock(&table_lock);
            return h;
        }
    }
    pthread_mutex_unlock(&table_lock);
    return 0;
}

static void drop_conn(conn_t *c) {
    stop_dispatcher(c);
    pthread_mutex_lock(&c->lock);
    if (c->recon) {
        for (int i = 0; i < c->recon->nkept; i++) free_kept(&c->recon->kept[i]);
        free(c->recon->kept);
        free(c->recon);
        c->recon = NULL;
    }
    c->uow = c->backed_out = 0;
    pthread_mutex_lock(&table_lock);
    if (c->hconn) { close(c->fd); c->hconn = 0; c->fd = -1; }
    pthread_mutex_unlock(&table_lock);
    pthread_mutex_unlock(&c->lock);
}

/* Connect the socket (the MQCD's CONNAME list, else MQSERVER's, else the CCDT's channels for
 * the queue manager name: MQCNO CCDTUrl, MQCCDTURL, MQCHLLIB/MQCHLTAB), then send the CONNX frame
 * with everything the queue manager checks: name, MQCNO, MQCD, MQCSP user and password, the
 * CCDT URL (passed on, not read) and the CONNAME actually reached. */
static void do_connect(const char *name, size_t name_len, const void *cno, MQHCONN *pHconn,
                       PMQLONG pCC, PMQLONG pRC) {
    pthread_once(&init_once, init_table);
    const void *cd = NULL, *csp = NULL;
    field_t user = {"", 0}, password = {"", 0}, ccdt = {"", 0};
    uint32_t cno_len = 0;
    if (cno) {
        cno_len = VLEN(cno, CNO_LEN);
        MQLONG v = long_at(cno, 4);
        if (v >= 2) cd = ptr_at(cno, 16);
        if (v >= 5) csp = ptr_at(cno, 192);
        if (v >= 6 && ptr_at(cno, 200) && long_at(cno, 212) > 0) {
            ccdt.ptr = ptr_at(cno, 200); ccdt.len = (uint32_t)long_at(cno, 212);
        }
    }
    if (csp && long_at(csp, 8) == 1) {
        if (ptr_at(csp, 16) && long_at(csp, 28) > 0) {
            user.ptr = ptr_at(csp, 16); user.len = (uint32_t)long_at(csp, 28);
        }
        if (ptr_at(csp, 40) && long_at(csp, 52) > 0) {
            password.ptr = ptr_at(csp, 40); password.len = (uint32_t)long_at(csp, 52);
        }
    }
    char conname[512];
    char ccdt_text[512] = "";
    if (!ccdt.len) {
        const char *url = getenv("MQCCDTURL");
        if (url) snprintf(ccdt_text, sizeof ccdt_text, "%s", url);
        else if (getenv("MQCHLLIB") && getenv("MQCHLTAB"))
            snprintf(ccdt_text, sizeof ccdt_text, "file://%s/%s", getenv("MQCHLLIB"),
                     getenv("MQCHLTAB"));
        if (ccdt_text[0]) { ccdt.ptr = ccdt_text; ccdt.len = (uint32_t)strlen(ccdt_text); }
    }
    *pHconn = -1;
    if (conname_of(cd, conname, sizeof conname)) {
        MQLONG why = RC_Q_MGR_NAME_ERROR;
        if (!ccdt.len || ccdt_conname(ccdt.ptr, ccdt.len, name, name_len, conname,
                                      sizeof conname, &why)) {
            *pCC = CC_FAILED; *pRC = why;
            return;
        }
    }
    MQLONG reason;
    char reached[300];
    int fd = dial(conname, &reason, reached, sizeof reached);
    if (fd < 0) { *pCC = CC_FAILED; *pRC = reason; return; }
    MQHCONN h = add_conn(fd);
    if (!h) { close(fd); *pCC = CC_FAILED; *pRC = RC_RESOURCE_PROBLEM; return; }
    field_t in[] = {
        {name, (uint32_t)name_len}, {cno ? cno : "", cno_len}, {cd ? cd : "", cd ? 2000 : 0},
        user, password, ccdt, {reached, (uint32_t)strlen(reached)},
    };
    reply_field_t out[MAX_FIELDS];
    int nout;
    char *payload = call(h, V_CONNX, in, 7, out, &nout, pCC, pRC);
    if (*pCC == CC_FAILED) { free(payload); drop_conn(&conns[h % SLOTS]); return; }
    MQLONG mode = cno && cno_len >= 12 ? long_at(cno, 8) & (0x1000000 | 0x4000000) : 0;
    recon_t *r = mode ? calloc(1, sizeof *r) : NULL;
    if (r) {
        r->mode = mode;
        snprintf(r->name, sizeof r->name, "%.*s", (int)name_len, name);
        if (payload && nout >= 1)
            snprintf(r->qmgr, sizeof r->qmgr, "%.*s", (int)out[0].len, out[0].data);
#define KEEP(dst, f) do { (dst##_len) = (f).len <= sizeof dst ? (f).len : 0; \
                          memcpy(dst, (f).ptr, dst##_len); } while (0)
        KEEP(r->cno, in[1]); KEEP(r->cd, in[2]); KEEP(r->user, in[3]);
        KEEP(r->password, in[4]); KEEP(r->ccdt, in[5]);
#undef KEEP
        conns[h % SLOTS].recon = r;
    }
    free(payload);
    *pHconn = h;
}

static size_t name_length(const char *name) {
    size_t n = name ? strnlen(name, 48) : 0;
    while (n && name[n - 1] == ' ') n--;
    return n;
}

void MQCONN(PMQCHAR QMgrName, PMQHCONN pHconn, PMQLONG pCC, PMQLONG pRC) {
    do_connect(QMgrName ? QMgrName : "", name_length(QMgrName), NULL, pHconn, pCC, pRC);
}

void MQCONNX(PMQCHAR QMgrName, PMQVOID pConnectOpts, PMQHCONN pHconn, PMQLONG pCC,
             PMQLONG pRC) {
    do_connect(QMgrName ? QMgrName : "", name_length(QMgrName), pConnectOpts, pHconn, pCC, pRC);
}

void MQDISC(PMQHCONN pHconn, PMQLONG pCC, PMQLONG pRC) {
    reply_field_t out[MAX_FIELDS];
    int nout;
    MQHCONN h = *pHconn;
    free(call(h, V_DISC, NULL, 0, out, &nout, pCC, pRC));
    conn_t *c = find(h);
    if (c) drop_conn(c);
    if (*pCC != CC_FAILED || *pRC == RC_CONNECTION_BROKEN || *pRC == 2548) *pHconn = -1;
}

/* ---------------------------------------------------------------------------------------- */
/* objects and messages                                                                      */

static void od_fields(const void *od, field_t *f) {
    f[0].ptr = od; f[0].len = VLEN(od, OD_LEN);
    f[1] = long_at(od, 4) >= 4 ? charv(od, 344) : (field_t){"", 0};
}

void MQOPEN(MQHCONN Hconn, PMQVOID pObjDesc, MQLONG Options, PMQHOBJ pHobj, PMQLONG pCC,
            PMQLONG pRC) {
    field_t in[3];
    od_fields(pObjDesc, in);
    in[2] = (field_t){&Options, 4};
    reply_field_t out[MAX_FIELDS];
    int nout;
    char *payload = call(Hconn, V_OPEN, in, 3, out, &nout, pCC, pRC);
    if (payload && nout >= 2) {
        *pHobj = int_of(&out[0]);
        copy_out(pObjDesc, in[0].len, &out[1]);
    }
    free(payload);
}

void MQCLOSE(MQHCONN Hconn, PMQHOBJ pHobj, MQLONG Options, PMQLONG pCC, PMQLONG pRC) {
    field_t in[] = {{pHobj, 4}, {&Options, 4}};
    reply_field_t out[MAX_FIELDS];
    int nout;
    free(call(Hconn, V_CLOSE, in, 2, out, &nout, pCC, pRC));
    if (*pCC != CC_FAILED) *pHobj = -1;
}

static void put_common(MQHCONN Hconn, uint32_t verb, field_t *in, int nin, PMQVOID pMsgDesc,
                       PMQVOID pPutMsgOpts, PMQLONG pCC, PMQLONG pRC) {
    reply_field_t out[MAX_FIELDS];
    int nout;
    char *payload = call(Hconn, verb, in, nin, out, &nout, pCC, pRC);
    if (payload && nout >= 2) {
        copy_out(pMsgDesc, VLEN(pMsgDesc, MD_LEN), &out[0]);
        copy_out(pPutMsgOpts, VLEN(pPutMsgOpts, PMO_LEN), &out[1]);
    }
    free(payload);
}

void MQPUT(MQHCONN Hconn, MQHOBJ Hobj, PMQVOID pMsgDesc, PMQVOID pPutMsgOpts,
           MQLONG BufferLength, PMQVOID pBuffer, PMQLONG pCC, PMQLONG pRC) {
    field_t in[] = {{&Hobj, 4}, {pMsgDesc, VLEN(pMsgDesc, MD_LEN)},
                    {pPutMsgOpts, VLEN(pPutMsgOpts, PMO_LEN)},
                    {pBuffer ? pBuffer : "", BufferLength > 0 ? (uint32_t)BufferLength : 0}};
    put_common(Hconn, V_PUT, in, 4, pMsgDesc, pPutMsgOpts, pCC, pRC);
}

void MQPUT1(MQHCONN Hconn, PMQVOID pObjDesc, PMQVOID pMsgDesc, PMQVOID pPutMsgOpts,
            MQLONG BufferLength, PMQVOID pBuffer, PMQLONG pCC, PMQLONG pRC) {
    field_t in[5];
    od_fields(pObjDesc, in);
    in[2] = (field_t){pMsgDesc, VLEN(pMsgDesc, MD_LEN)};
    in[3] = (field_t){pPutMsgOpts, VLEN(pPutMsgOpts, PMO_LEN)};
    in[4] = (field_t){pBuffer ? pBuffer : "", BufferLength > 0 ? (uint32_t)BufferLength : 0};
    put_common(Hconn, V_PUT1, in, 5, pMsgDesc, pPutMsgOpts, pCC, pRC);
}

void MQGET(MQHCONN Hconn, MQHOBJ Hobj, PMQVOID pMsgDesc, PMQVOID pGetMsgOpts,
           MQLONG BufferLength, PMQVOID pBuffer, PMQLONG pDataLength, PMQLONG pCC,
           PMQLONG pRC) {
    field_t in[] = {{&Hobj, 4}, {pMsgDesc, VLEN(pMsgDesc, MD_LEN)},
                    {pGetMsgOpts, VLEN(pGetMsgOpts, GMO_LEN)}, {&BufferLength, 4}};
    reply_field_t out[MAX_FIELDS];
    int nout;
    char *payload = call(Hconn, V_GET, in, 4, out, &nout, pCC, pRC);
    if (payload && nout >= 4) {
        copy_out(pMsgDesc, in[1].len, &out[0]);
        copy_out(pGetMsgOpts, in[2].len, &out[1]);
        copy_out(pBuffer, BufferLength > 0 ? (uint32_t)BufferLength : 0, &out[2]);
        if (pDataLength) *pDataLength = int_of(&out[3]);
    }
    free(payload);
}

void MQINQ(MQHCONN Hconn, MQHOBJ Hobj, MQLONG SelectorCount, PMQLONG pSelectors,
           MQLONG IntAttrCount, PMQLONG pIntAttrs, MQLONG CharAttrLength, PMQCHAR pCharAttrs,
           PMQLONG pCC, PMQLONG pRC) {
    MQLONG counts[2] = {IntAttrCount, CharAttrLength};
    field_t in[] = {{&Hobj, 4},
                    {pSelectors ? (void *)pSelectors : "",
                     pSelectors && SelectorCount > 0 ? (uint32_t)SelectorCount * 4 : 0},
                    {counts, 8}};
    reply_field_t out[MAX_FIELDS];
    int nout;
    char *payload = call(Hconn, V_INQ, in, 3, out, &nout, pCC, pRC);
    if (payload && nout >= 2) {
        copy_out(pIntAttrs, IntAttrCount > 0 ? (uint32_t)IntAttrCount * 4 : 0, &out[0]);
        copy_out(pCharAttrs, CharAttrLength > 0 ? (uint32_t)CharAttrLength : 0, &out[1]);
    }
    free(payload);
}

void MQSET(MQHCONN Hconn, MQHOBJ Hobj, MQLONG SelectorCount, PMQLONG pSelectors,
           MQLONG IntAttrCount, PMQLONG pIntAttrs, MQLONG CharAttrLength, PMQCHAR pCharAttrs,
           PMQLONG pCC, PMQLONG pRC) {
    (void)Hconn; (void)Hobj; (void)SelectorCount; (void)pSelectors; (void)IntAttrCount;
    (void)pIntAttrs; (void)CharAttrLength; (void)pCharAttrs;
    unsupported(pCC, pRC);
}

/* ---------------------------------------------------------------------------------------- */
/* units of work                                                                             */

void MQBEGIN(MQHCONN Hconn, PMQVOID pBeginOptions, PMQLONG pCC, PMQLONG pRC) {
    (void)Hconn; (void)pBeginOptions;
    unsupported(pCC, pRC); /* a client has no global units of work */
}

void MQCMIT(MQHCONN Hconn, PMQLONG pCC, PMQLONG pRC) {
    reply_field_t out[MAX_FIELDS];
    int nout;
    free(call(Hconn, V_CMIT, NULL, 0, out, &nout, pCC, pRC));
}

void MQBACK(MQHCONN Hconn, PMQLONG pCC, PMQLONG pRC) {
    reply_field_t out[MAX_FIELDS];
    int nout;
    free(call(Hconn, V_BACK, NULL, 0, out, &nout, pCC, pRC));
}

/* ---------------------------------------------------------------------------------------- */
/* publish/subscribe                                                                         */

void MQSUB(MQHCONN Hconn, PMQVOID pSubDesc, PMQHOBJ pHobj, PMQHOBJ pHsub, PMQLONG pCC,
           PMQLONG pRC) {
    conn_t *c = find(Hconn);
    if (c && c->recon && c->recon->mode == 0x1000000 && long_at(pSubDesc, 8) & 0x8) {
        /* MQCNO_RECONNECT and MQSO_DURABLE: MQRC_RECONNECT_Q_MGR_REQD */
        *pCC = CC_FAILED; *pRC = 2555;
        return;
    }
    field_t in[] = {{pSubDesc, VLEN(pSubDesc, SD_LEN)}, charv(pSubDesc, 120),
                    charv(pSubDesc, 144), charv(pSubDesc, 168), {pHobj, 4}};
    reply_field_t out[MAX_FIELDS];
    int nout;
    char *payload = call(Hconn, V_SUB, in, 5, out, &nout, pCC, pRC);
    if (payload && nout >= 3) {
        copy_out(pSubDesc, in[0].len, &out[0]);
        *pHobj = int_of(&out[1]);
        *pHsub = int_of(&out[2]);
    }
    free(payload);
}

void MQSUBRQ(MQHCONN Hconn, MQHOBJ Hsub, MQLONG Action, PMQVOID pSubRqOpts, PMQLONG pCC,
             PMQLONG pRC) {
    (void)Hconn; (void)Hsub; (void)Action; (void)pSubRqOpts;
    unsupported(pCC, pRC);
}

/* ---------------------------------------------------------------------------------------- */
/* callbacks, status                                                                         */

/* MQCB: only MQOP_REGISTER/DEREGISTER of an event handler (MQCBT_EVENT_HANDLER) are accepted;
 * the dispatcher thread delivers the reconnection events (lost connections, uniform-cluster
 * moves) to it. */
void MQCB(MQHCONN Hconn, MQLONG Operation, PMQVOID pCallbackDesc, MQHOBJ Hobj,
          PMQVOID pMsgDesc, PMQVOID pGetMsgOpts, PMQLONG pCC, PMQLONG pRC) {
    (void)pMsgDesc; (void)pGetMsgOpts;
    MQLONG type = pCallbackDesc ? long_at(pCallbackDesc, 8) : 0;
    field_t in[] = {{&Operation, 4}, {&type, 4}, {&Hobj, 4}};
    reply_field_t out[MAX_FIELDS];
    int nout;
    (void)CBD_LEN;
    free(call(Hconn, V_CB, in, 3, out, &nout, pCC, pRC));
    conn_t *c = find(Hconn);
    if (*pCC == CC_FAILED || !c) return;
    if (Operation == 0x100) { /* MQOP_REGISTER */
        pthread_mutex_lock(&c->ev_lock);
        c->handler = (callback_t)ptr_at(pCallbackDesc, 24);
        memcpy(c->area, (const char *)pCallbackDesc + 16, 8);
        int start = !c->dispatching;
        c->dispatching = 1;
        pthread_mutex_unlock(&c->ev_lock);
        if (start && pthread_create(&c->dispatcher, NULL, dispatch, c)) c->dispatching = 0;
    } else if (Operation == 0x200) { /* MQOP_DEREGISTER */
        stop_dispatcher(c);
    }
}

void MQCTL(MQHCONN Hconn, MQLONG Operation, PMQVOID pControlOpts, PMQLONG pCC, PMQLONG pRC) {
    (void)Hconn; (void)Operation; (void)pControlOpts;
    unsupported(pCC, pRC);
}

void MQSTAT(MQHCONN Hconn, MQLONG Type, PMQVOID pStatus, PMQLONG pCC, PMQLONG pRC) {
    (void)Hconn; (void)Type; (void)pStatus; (void)STS_LEN; (void)SRO_LEN; (void)CSP_LEN;
    unsupported(pCC, pRC);
}

/* ---------------------------------------------------------------------------------------- */
/* message handles and properties: the handle's properties live in the queue manager          */

static const uint32_t CMHO_LEN = 12, DMHO_LEN = 12, DMPO_LEN = 12, SMPO_LEN = 20, PD_LEN = 24,
                      IMPO_LEN = 64;
#define TYPE_STRING 0x400 /* MQTYPE_STRING */
#define VL_NULL_TERMINATED (-1)

static field_t opt(const void *p, uint32_t len) { return (field_t){p ? p : "", p ? len : 0}; }

void MQCRTMH(MQHCONN Hconn, PMQVOID pCrtMsgHOpts, PMQHMSG pHmsg, PMQLONG pCC, PMQLONG pRC) {
    field_t in[] = {opt(pCrtMsgHOpts, CMHO_LEN)};
    reply_field_t out[MAX_FIELDS];
    int nout;
    char *payload = call(Hconn, V_CRTMH, in, 1, out, &nout, pCC, pRC);
    if (payload && nout >= 1 && out[0].len == sizeof *pHmsg) memcpy(pHmsg, out[0].data, 8);
    free(payload);
}

void MQDLTMH(MQHCONN Hconn, PMQHMSG pHmsg, PMQVOID pDltMsgHOpts, PMQLONG pCC, PMQLONG pRC) {
    field_t in[] = {{pHmsg, 8}, opt(pDltMsgHOpts, DMHO_LEN)};
    reply_field_t out[MAX_FIELDS];
    int nout;
    free(call(Hconn, V_DLTMH, in, 2, out, &nout, pCC, pRC));
    if (*pCC != CC_FAILED) *pHmsg = -1; /* MQHM_UNUSABLE_HMSG */
}

/* MQSETMP: the name (an MQCHARV) and ValueLength bytes of the value (MQVL_NULL_TERMINATED
 * strings: up to their NUL) travel; the queue manager checks the rest. */
void MQSETMP(MQHCONN Hconn, MQHMSG Hmsg, PMQVOID pSetPropOpts, PMQVOID pName, PMQVOID pPropDesc,
             MQLONG Type, MQLONG ValueLength, PMQVOID pValue, PMQLONG pCC, PMQLONG pRC) {
    uint32_t value_len = 0;
    if (pValue && ValueLength > 0) value_len = (uint32_t)ValueLength;
    else if (pValue && ValueLength == VL_NULL_TERMINATED && Type == TYPE_STRING)
        value_len = (uint32_t)strlen((const char *)pValue);
    field_t in[] = {{&Hmsg, 8}, opt(pSetPropOpts, SMPO_LEN),
                    pName ? charv(pName, 0) : (field_t){"", 0}, opt(pPropDesc, PD_LEN),
                    {&Type, 4}, {&ValueLength, 4}, {pValue ? pValue : "", value_len}};
    reply_field_t out[MAX_FIELDS];
    int nout;
    free(call(Hconn, V_SETMP, in, 7, out, &nout, pCC, pRC));
}

/* MQINQMP: the reply holds the MQIMPO (copied back except its ReturnedName MQCHARV, whose
 * buffer gets the name), the property's name, MQPD, type, value and full length. */
void MQINQMP(MQHCONN Hconn, MQHMSG Hmsg, PMQVOID pInqPropOpts, PMQVOID pName, PMQVOID pPropDesc,
             PMQLONG pType, MQLONG ValueLength, PMQVOID pValue, PMQLONG pDataLength,
             PMQLONG pCC, PMQLONG pRC) {
    MQLONG type = pType ? *pType : 0;
    field_t in[] = {{&Hmsg, 8}, opt(pInqPropOpts, IMPO_LEN),
                    pName ? charv(pName, 0) : (field_t){"", 0}, opt(pPropDesc, PD_LEN),
                    {&type, 4}, {&ValueLength, 4}};
    reply_field_t out[MAX_FIELDS];
    int nout;
    char *payload = call(Hconn, V_INQMP, in, 6, out, &nout, pCC, pRC);
    if (payload && nout >= 6) {
        char *impo = pInqPropOpts;
        if (impo && out[0].len >= IMPO_LEN) {
            memcpy(impo + 20, out[0].data + 20, 12); /* ReturnedEncoding, ReturnedCCSID */
            memcpy(impo + 56, out[0].data + 56, 8);  /* TypeString */
            char *name_buf = (char *)ptr_at(impo, 32);
            MQLONG room = long_at(impo, 44), got = long_at(out[0].data, 48);
            if (name_buf && room > 0 && out[1].len && got > 0) {
                copy_out(name_buf, (uint32_t)room, &out[1]);
                memcpy(impo + 48, &got, 4);
            }
        }
        copy_out(pPropDesc, PD_LEN, &out[2]);
        if (pType) *pType = int_of(&out[3]);
        copy_out(pValue, ValueLength > 0 ? (uint32_t)ValueLength : 0, &out[4]);
        if (pDataLength) *pDataLength = int_of(&out[5]);
    }
    free(payload);
}

void MQDLTMP(MQHCONN Hconn, MQHMSG Hmsg, PMQVOID pDltPropOpts, PMQVOID pName, PMQLONG pCC,
             PMQLONG pRC) {
    field_t in[] = {{&Hmsg, 8}, opt(pDltPropOpts, DMPO_LEN),
                    pName ? charv(pName, 0) : (field_t){"", 0}};
    reply_field_t out[MAX_FIELDS];
    int nout;
    free(call(Hconn, V_DLTMP, in, 3, out, &nout, pCC, pRC));
}
