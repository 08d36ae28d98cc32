/*
 * md5_modes: the native loop of `s3gw bench digest`.
 *
 * Measures what obtaining the MD5 algorithm costs per digest on OpenSSL 3, the question of
 * Ceph PR 71062. Each iteration allocates a digest context, obtains MD5 in one of three modes,
 * inits, hashes the payload, finalizes and frees:
 *
 *   fetch     EVP_MD_fetch(NULL, "MD5", "fips=no") and EVP_MD_free per iteration
 *   cached    one fetch per process; EVP_MD_up_ref and EVP_MD_free per iteration
 *   implicit  the legacy static EVP_md5(): OpenSSL 3 fetches inside every EVP_DigestInit_ex
 *
 * Usage: md5_modes MODE THREADS ITERATIONS_PER_THREAD PAYLOAD_BYTES
 * Prints one JSON object: elapsed wall-clock nanoseconds from the first thread's start (all
 * wait at a barrier) to the last one's end, failures, and the MD5 every thread computed
 * last (the caller checks it against its own).
 *
 * Built by gateway/bench/digest.py with the system compiler into a temporary folder at run
 * time. Without the OpenSSL headers (no libssl-dev) it is built with S3GW_NO_OPENSSL_HEADERS
 * and declares the few prototypes it uses, which are part of OpenSSL 3's stable ABI.
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef S3GW_NO_OPENSSL_HEADERS
#include <openssl/crypto.h>
#include <openssl/evp.h>
#else
typedef struct evp_md_st EVP_MD;
typedef struct evp_md_ctx_st EVP_MD_CTX;
typedef struct ossl_lib_ctx_st OSSL_LIB_CTX;
typedef struct engine_st ENGINE;
EVP_MD *EVP_MD_fetch(OSSL_LIB_CTX *libctx, const char *algorithm, const char *properties);
int EVP_MD_up_ref(EVP_MD *md);
void EVP_MD_free(EVP_MD *md);
const EVP_MD *EVP_md5(void);
EVP_MD_CTX *EVP_MD_CTX_new(void);
void EVP_MD_CTX_free(EVP_MD_CTX *ctx);
int EVP_DigestInit_ex(EVP_MD_CTX *ctx, const EVP_MD *type, ENGINE *impl);
int EVP_DigestUpdate(EVP_MD_CTX *ctx, const void *d, size_t cnt);
int EVP_DigestFinal_ex(EVP_MD_CTX *ctx, unsigned char *md, unsigned int *s);
const char *OpenSSL_version(int type);
#endif

enum mode { FETCH, CACHED, IMPLICIT };

struct worker {
    pthread_t thread;
    long iterations;
    long failures;
    int64_t start_ns, end_ns;
    unsigned char last[16];
};

static enum mode mode;
static EVP_MD *cached_md;
static unsigned char *payload;
static size_t payload_len;
static pthread_barrier_t start_line;

/* One iteration: what one object's ETag costs. Returns 1 on success. */
static int one_digest(unsigned char out[16])
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    EVP_MD *owned = NULL;
    const EVP_MD *md = NULL;
    int ok = ctx != NULL;

    switch (mode) {
    case FETCH:
        owned = EVP_MD_fetch(NULL, "MD5", "fips=no");
        md = owned;
        break;
    case CACHED:
        if (EVP_MD_up_ref(cached_md))
            owned = cached_md;
        md = owned;
        break;
    case IMPLICIT:
        md = EVP_md5();
        break;
    }
    ok = ok && md != NULL && EVP_DigestInit_ex(ctx, md, NULL)
         && EVP_DigestUpdate(ctx, payload, payload_len) && EVP_DigestFinal_ex(ctx, out, NULL);
    EVP_MD_CTX_free(ctx);
    EVP_MD_free(owned); /* NULL in implicit mode: a no-op */
    return ok;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void *run(void *arg)
{
    struct worker *w = arg;
    pthread_barrier_wait(&start_line);
    w->start_ns = now_ns();
    for (long i = 0; i < w->iterations; i++) {
        if (!one_digest(w->last))
            w->failures++;
    }
    w->end_ns = now_ns();
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s fetch|cached|implicit THREADS ITERATIONS PAYLOAD_BYTES\n",
                argv[0]);
        return 2;
    }
    if (strcmp(argv[1], "fetch") == 0)
        mode = FETCH;
    else if (strcmp(argv[1], "cached") == 0)
        mode = CACHED;
    else if (strcmp(argv[1], "implicit") == 0)
        mode = IMPLICIT;
    else {
        fprintf(stderr, "unknown mode %s\n", argv[1]);
        return 2;
    }
    int threads = atoi(argv[2]);
    long iterations = atol(argv[3]);
    payload_len = (size_t)atol(argv[4]);
    if (threads < 1 || iterations < 1) {
        fprintf(stderr, "THREADS and ITERATIONS must be positive\n");
        return 2;
    }
    payload = malloc(payload_len ? payload_len : 1);
    for (size_t i = 0; i < payload_len; i++)
        payload[i] = (unsigned char)(i * 131 + 7); /* the same bytes the Python side makes */

    /* The once-per-process fetch of the cached mode, also a warm-up of the provider store and
     * its method cache for the other modes: no mode pays a first-use cost inside the timing. */
    cached_md = EVP_MD_fetch(NULL, "MD5", "fips=no");
    if (cached_md == NULL) {
        fprintf(stderr, "EVP_MD_fetch(NULL, \"MD5\", \"fips=no\") failed\n");
        return 1;
    }
    unsigned char warm[16];
    if (!one_digest(warm)) {
        fprintf(stderr, "a digest failed in %s mode\n", argv[1]);
        return 1;
    }

    struct worker *workers = calloc((size_t)threads, sizeof *workers);
    pthread_barrier_init(&start_line, NULL, (unsigned)threads + 1);
    for (int t = 0; t < threads; t++) {
        workers[t].iterations = iterations;
        if (pthread_create(&workers[t].thread, NULL, run, &workers[t]) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            return 1;
        }
    }
    pthread_barrier_wait(&start_line);
    long failures = 0;
    int agree = 1;
    /* From the first thread's start to the last one's end: the main thread may itself get the
     * CPU late once 32 workers are runnable, so it takes no timestamps. */
    int64_t start = INT64_MAX, end = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(workers[t].thread, NULL);
        failures += workers[t].failures;
        agree = agree && memcmp(workers[t].last, workers[0].last, 16) == 0;
        start = workers[t].start_ns < start ? workers[t].start_ns : start;
        end = workers[t].end_ns > end ? workers[t].end_ns : end;
    }
    int64_t elapsed = end - start;

    char hex[33];
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", workers[0].last[i]);
    printf("{\"mode\": \"%s\", \"threads\": %d, \"iterations\": %ld, \"payload\": %zu, "
           "\"elapsed_ns\": %lld, \"failures\": %ld, \"agree\": %s, \"md5\": \"%s\", "
           "\"openssl\": \"%s\"}\n",
           argv[1], threads, iterations, payload_len, (long long)elapsed, failures,
           agree ? "true" : "false", hex, OpenSSL_version(0));
    EVP_MD_free(cached_md);
    free(workers);
    free(payload);
    return failures == 0 && agree ? 0 : 1;
}
