/*
 * amqpgen: a small AMQP 0-9-1 load generator on librabbitmq (rabbitmq-c), the C baseline of
 * bench/generators.py.
 *
 * N producer threads and N consumer threads, each with its own connection and one channel, on
 * one existing queue (published through the default exchange). Consumers use basic.qos with a
 * prefetch and acknowledge with multiple=true every --multi-ack messages (and whatever is left
 * when they have been idle for 100 ms). Producers publish as fast as they can, or at a total
 * --rate spread evenly over them; with --confirms each keeps at most --confirm-window
 * publishes unconfirmed. It runs for --seconds (or until SIGTERM / SIGINT), then prints one
 * JSON line of counts on stdout.
 *
 * The password is read from the AMQPGEN_PASSWORD environment variable, not the command line.
 *
 *   gcc -O2 -o amqpgen amqpgen.c -lrabbitmq -lpthread
 *   AMQPGEN_PASSWORD=... ./amqpgen --port 5672 --user u --queue q --producers 1 --consumers 1
 */

#define _GNU_SOURCE
#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct {
    const char *host, *user, *password, *queue;
    int port, producers, consumers, size, persistent, confirms, prefetch, multi_ack;
    int confirm_window;
    double rate, seconds;
} opt = {"127.0.0.1", NULL, NULL, NULL, 5672, 1, 1, 2048, 0, 0, 200, 50, 2000, 0.0, 10.0};

static volatile sig_atomic_t stopping = 0;
static atomic_long published, confirmed, nacked, consumed, errors;
static atomic_int consumers_ready, consumers_failed;
static double deadline;
static amqp_bytes_t body;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int done(void) { return stopping || now() >= deadline; }

static void on_signal(int signum) {
    (void)signum;
    stopping = 1;
}

static void fail(const char *who, const char *what) {
    fprintf(stderr, "amqpgen %s: %s\n", who, what);
    atomic_fetch_add(&errors, 1);
}

static int rpc_ok(amqp_connection_state_t conn, const char *who, const char *what) {
    amqp_rpc_reply_t reply = amqp_get_rpc_reply(conn);
    if (reply.reply_type == AMQP_RESPONSE_NORMAL) return 1;
    char text[256];
    snprintf(text, sizeof text, "%s failed (reply type %d, library error %s)", what,
             reply.reply_type, amqp_error_string2(reply.library_error));
    fail(who, text);
    return 0;
}

/* One connection with channel 1 open, or NULL (counted as an error). */
static amqp_connection_state_t open_channel(const char *who) {
    amqp_connection_state_t conn = amqp_new_connection();
    amqp_socket_t *socket = amqp_tcp_socket_new(conn);
    if (!socket || amqp_socket_open(socket, opt.host, opt.port) != AMQP_STATUS_OK) {
        fail(who, "cannot open the TCP connection");
        amqp_destroy_connection(conn);
        return NULL;
    }
    amqp_rpc_reply_t login = amqp_login(conn, "/", 0, AMQP_DEFAULT_FRAME_SIZE, 0,
                                        AMQP_SASL_METHOD_PLAIN, opt.user, opt.password);
    if (login.reply_type != AMQP_RESPONSE_NORMAL) {
        fail(who, "login refused");
        amqp_destroy_connection(conn);
        return NULL;
    }
    amqp_channel_open(conn, 1);
    if (!rpc_ok(conn, who, "channel.open")) {
        amqp_destroy_connection(conn);
        return NULL;
    }
    return conn;
}

static void close_connection(amqp_connection_state_t conn) {
    amqp_channel_close(conn, 1, AMQP_REPLY_SUCCESS);
    amqp_connection_close(conn, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(conn);
}

/* Read one frame (waiting at most timeout_us; < 0: as long as it takes) and count confirms.
 * Returns 0 on a frame or a timeout, -1 when the connection failed. */
static int read_confirms(amqp_connection_state_t conn, uint64_t *settled, long timeout_us) {
    amqp_frame_t frame;
    struct timeval tv = {timeout_us / 1000000, timeout_us % 1000000};
    int status = timeout_us < 0 ? amqp_simple_wait_frame(conn, &frame)
                                : amqp_simple_wait_frame_noblock(conn, &frame, &tv);
    if (status == AMQP_STATUS_TIMEOUT) return 0;
    if (status != AMQP_STATUS_OK) return -1;
    if (frame.frame_type != AMQP_FRAME_METHOD) return 0;
    uint64_t tag = 0;
    int multiple = 0, nack = 0;
    if (frame.payload.method.id == AMQP_BASIC_ACK_METHOD) {
        amqp_basic_ack_t *ack = frame.payload.method.decoded;
        tag = ack->delivery_tag, multiple = ack->multiple;
    } else if (frame.payload.method.id == AMQP_BASIC_NACK_METHOD) {
        amqp_basic_nack_t *n = frame.payload.method.decoded;
        tag = n->delivery_tag, multiple = n->multiple, nack = 1;
    } else if (frame.payload.method.id == AMQP_CHANNEL_CLOSE_METHOD ||
               frame.payload.method.id == AMQP_CONNECTION_CLOSE_METHOD) {
        return -1;
    } else {
        return 0;
    }
    uint64_t count = multiple ? (tag > *settled ? tag - *settled : 0) : 1;
    if (tag > *settled) *settled = tag;
    atomic_fetch_add(nack ? &nacked : &confirmed, (long)count);
    return 0;
}

static void *producer(void *arg) {
    long index = (long)arg;
    amqp_connection_state_t conn = open_channel("producer");
    if (!conn) return NULL;
    if (opt.confirms) {
        amqp_confirm_select(conn, 1);
        if (!rpc_ok(conn, "producer", "confirm.select")) {
            amqp_destroy_connection(conn);
            return NULL;
        }
    }
    amqp_basic_properties_t props;
    props._flags = AMQP_BASIC_DELIVERY_MODE_FLAG;
    props.delivery_mode = opt.persistent ? 2 : 1;
    amqp_bytes_t exchange = amqp_cstring_bytes(""), key = amqp_cstring_bytes(opt.queue);
    double interval = opt.rate > 0 ? opt.producers / opt.rate : 0.0, start = now();
    uint64_t sent = 0, settled = 0;
    long mine = 0;
    (void)index;
    while (!done()) {
        if (interval > 0) {
            double due = start + sent * interval, wait = due - now();
            if (wait > 0) {
                if (wait > 0.1) wait = 0.1; /* look at the clock and the stop flag again */
                struct timespec ts = {(time_t)wait, (long)((wait - (time_t)wait) * 1e9)};
                nanosleep(&ts, NULL);
                continue;
            }
        }
        if (opt.confirms) {
            while (sent - settled >= (uint64_t)opt.confirm_window && !done())
                if (read_confirms(conn, &settled, 100000) < 0) goto broken;
        }
        if (amqp_basic_publish(conn, 1, exchange, key, 0, 0, &props, body) != AMQP_STATUS_OK)
            goto broken;
        sent++;
        if (++mine == 64) { /* publish counts in batches: no shared cache line per message */
            atomic_fetch_add(&published, mine);
            mine = 0;
        }
        if (opt.confirms && (sent & 63) == 0)
            while (amqp_frames_enqueued(conn) || amqp_data_in_buffer(conn))
                if (read_confirms(conn, &settled, 0) < 0) goto broken;
    }
    atomic_fetch_add(&published, mine);
    if (opt.confirms) { /* wait up to 2 s for the last confirms, so the counts are complete */
        double until = now() + 2.0;
        while (settled < sent && now() < until)
            if (read_confirms(conn, &settled, 100000) < 0) break;
    }
    close_connection(conn);
    return NULL;
broken:
    atomic_fetch_add(&published, mine);
    if (!done()) fail("producer", "connection lost");
    amqp_destroy_connection(conn);
    return NULL;
}

/* Acknowledge every delivery held (multiple), and count them as consumed; 0 if broken. */
static int ack_held(amqp_connection_state_t conn, uint64_t last_tag, long *unacked, long *mine) {
    if (*unacked) {
        if (amqp_basic_ack(conn, 1, last_tag, 1) != AMQP_STATUS_OK) return 0;
        *unacked = 0;
    }
    atomic_fetch_add(&consumed, *mine);
    *mine = 0;
    return 1;
}

static void *consumer(void *arg) {
    (void)arg;
    amqp_connection_state_t conn = open_channel("consumer");
    if (!conn) {
        atomic_fetch_add(&consumers_failed, 1);
        return NULL;
    }
    amqp_basic_qos(conn, 1, 0, (uint16_t)opt.prefetch, 0);
    if (!rpc_ok(conn, "consumer", "basic.qos")) goto failed;
    amqp_basic_consume(conn, 1, amqp_cstring_bytes(opt.queue), amqp_empty_bytes, 0, 0, 0,
                       amqp_empty_table);
    if (!rpc_ok(conn, "consumer", "basic.consume")) goto failed;
    atomic_fetch_add(&consumers_ready, 1);
    uint64_t last_tag = 0;
    long unacked = 0, mine = 0;
    struct timeval idle = {0, 100000};
    while (!done()) {
        amqp_envelope_t envelope;
        amqp_maybe_release_buffers(conn);
        amqp_rpc_reply_t reply = amqp_consume_message(conn, &envelope, &idle, 0);
        if (reply.reply_type == AMQP_RESPONSE_NORMAL) {
            last_tag = envelope.delivery_tag;
            amqp_destroy_envelope(&envelope);
            mine++;
            if (++unacked >= opt.multi_ack && !ack_held(conn, last_tag, &unacked, &mine))
                goto broken;
            continue;
        }
        if (reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
            reply.library_error == AMQP_STATUS_TIMEOUT) {
            if (!ack_held(conn, last_tag, &unacked, &mine)) goto broken; /* idle */
            continue;
        }
        if (reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
            reply.library_error == AMQP_STATUS_UNEXPECTED_STATE) {
            amqp_frame_t frame; /* something else than a delivery: only a close matters */
            if (amqp_simple_wait_frame(conn, &frame) != AMQP_STATUS_OK) goto broken;
            if (frame.frame_type == AMQP_FRAME_METHOD &&
                (frame.payload.method.id == AMQP_CHANNEL_CLOSE_METHOD ||
                 frame.payload.method.id == AMQP_CONNECTION_CLOSE_METHOD))
                goto broken;
            continue;
        }
        goto broken;
    }
    if (unacked) amqp_basic_ack(conn, 1, last_tag, 1);
    atomic_fetch_add(&consumed, mine);
    close_connection(conn);
    return NULL;
broken:
    atomic_fetch_add(&consumed, mine);
    if (!done()) fail("consumer", "connection lost");
    amqp_destroy_connection(conn);
    return NULL;
failed:
    atomic_fetch_add(&consumers_failed, 1);
    amqp_destroy_connection(conn);
    return NULL;
}

static void usage(void) {
    fprintf(stderr,
            "usage: AMQPGEN_PASSWORD=... amqpgen --user U --queue Q [--host H] [--port P]\n"
            "  [--producers N] [--consumers N] [--size BYTES] [--persistent] [--confirms]\n"
            "  [--confirm-window N] [--rate TOTAL_MSG_PER_S (0: unlimited)] [--seconds S]\n"
            "  [--prefetch N] [--multi-ack N]\n");
    exit(2);
}

int main(int argc, char **argv) {
    static struct option options[] = {
        {"host", 1, 0, 'h'},      {"port", 1, 0, 'p'},      {"user", 1, 0, 'u'},
        {"queue", 1, 0, 'q'},     {"producers", 1, 0, 'x'}, {"consumers", 1, 0, 'y'},
        {"size", 1, 0, 's'},      {"persistent", 0, 0, 'P'}, {"confirms", 0, 0, 'c'},
        {"confirm-window", 1, 0, 'w'}, {"rate", 1, 0, 'r'}, {"seconds", 1, 0, 'z'},
        {"prefetch", 1, 0, 'f'},  {"multi-ack", 1, 0, 'a'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
        switch (c) {
        case 'h': opt.host = optarg; break;
        case 'p': opt.port = atoi(optarg); break;
        case 'u': opt.user = optarg; break;
        case 'q': opt.queue = optarg; break;
        case 'x': opt.producers = atoi(optarg); break;
        case 'y': opt.consumers = atoi(optarg); break;
        case 's': opt.size = atoi(optarg); break;
        case 'P': opt.persistent = 1; break;
        case 'c': opt.confirms = 1; break;
        case 'w': opt.confirm_window = atoi(optarg); break;
        case 'r': opt.rate = atof(optarg); break;
        case 'z': opt.seconds = atof(optarg); break;
        case 'f': opt.prefetch = atoi(optarg); break;
        case 'a': opt.multi_ack = atoi(optarg); break;
        default: usage();
        }
    }
    opt.password = getenv("AMQPGEN_PASSWORD");
    if (!opt.user || !opt.password || !opt.queue || opt.producers < 0 || opt.consumers < 0 ||
        opt.size < 0 || opt.prefetch < 1 || opt.prefetch > 65535 || opt.multi_ack < 1 ||
        opt.confirm_window < 1 || opt.rate < 0 || opt.seconds <= 0)
        usage();

    struct sigaction action = {0};
    action.sa_handler = on_signal;
    sigaction(SIGTERM, &action, NULL);
    sigaction(SIGINT, &action, NULL);
    signal(SIGPIPE, SIG_IGN);

    body.len = (size_t)opt.size;
    body.bytes = malloc(body.len ? body.len : 1);
    for (size_t i = 0; i < body.len; i++) ((unsigned char *)body.bytes)[i] = (unsigned char)rand();

    double started = now();
    deadline = started + opt.seconds;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    int total = opt.producers + opt.consumers, made = 0;
    pthread_t *threads = calloc((size_t)total + 1, sizeof *threads);
    for (long i = 0; i < opt.consumers; i++)
        if (pthread_create(&threads[made], &attr, consumer, (void *)i) == 0) made++;
    /* producers start once every consumer consumes (or gave up) */
    while (atomic_load(&consumers_ready) + atomic_load(&consumers_failed) < opt.consumers &&
           !done())
        usleep(1000);
    double ready_s = now() - started;
    for (long i = 0; i < opt.producers; i++)
        if (pthread_create(&threads[made], &attr, producer, (void *)i) == 0) made++;
    for (int i = 0; i < made; i++) pthread_join(threads[i], NULL);

    printf("{\"published\": %ld, \"confirmed\": %ld, \"nacked\": %ld, \"consumed\": %ld, "
           "\"errors\": %ld, \"consumers_ready_s\": %.3f, \"elapsed_s\": %.3f}\n",
           atomic_load(&published), atomic_load(&confirmed), atomic_load(&nacked),
           atomic_load(&consumed), atomic_load(&errors), ready_s, now() - started);
    return atomic_load(&errors) ? 1 : 0;
}
