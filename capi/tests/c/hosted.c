/* The C API from C, hosted: the core objects (frontiers, semaphores, timepoints, queue clocks)
 * and a device with CPU queues and host callbacks, through their success and failure paths and
 * every kind of bad input. Built by scripts/capi.sh with gcc -std=c11 -Wall -Wextra -Werror
 * under AddressSanitizer and UndefinedBehaviorSanitizer, against the release static library.
 * Prints one line per check and "N passed, M failed"; exits non-zero on any failure. */
#define _POSIX_C_SOURCE 200809L
#define CW_HOSTED
#include "causeway.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static int passed, failed;

#define CHECK(condition, what)                                                              \
    do {                                                                                    \
        if (condition) {                                                                    \
            passed++;                                                                       \
        } else {                                                                            \
            failed++;                                                                       \
            printf("FAILED: %s (%s:%d; last error: %s)\n", what, __FILE__, __LINE__,      \
                   cw_last_error_message());                                                \
        }                                                                                   \
    } while (0)

/* A call that must fail with `status` and leave a message saying so. */
#define REFUSED(call, status, what)                                                         \
    do {                                                                                    \
        cw_status got_ = (call);                                                            \
        CHECK(got_ == (status) && cw_last_error_message()[0] != '\0', what);                \
        if (got_ == (status)) printf("ok - %s: %s\n", what, cw_last_error_message());       \
    } while (0)

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void sleep_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static uint64_t axis(uint64_t ordinal) {
    uint64_t bits = 0;
    CHECK(cw_axis_make(0, CW_DOMAIN_QUEUE, ordinal, &bits) == CW_STATUS_OK, "cw_axis_make");
    return bits;
}

/* --- core ------------------------------------------------------------------------------- */

static void frontiers(void) {
    cw_frontier a, b;
    CHECK(cw_frontier_create(&a) == CW_STATUS_OK && cw_frontier_create(&b) == CW_STATUS_OK,
          "frontiers are created");
    uint64_t x = axis(1), y = axis(2);
    CHECK(cw_frontier_insert_or_raise(a, x, 3) == CW_STATUS_OK, "insert");
    CHECK(cw_frontier_insert_or_raise(a, x, 2) == CW_STATUS_OK, "a lower epoch is no error");
    CHECK(cw_frontier_insert_or_raise(b, y, 5) == CW_STATUS_OK, "insert into b");
    bool dominates = true;
    CHECK(cw_frontier_dominates(a, b, &dominates) == CW_STATUS_OK && !dominates,
          "a does not know b's point");
    CHECK(cw_frontier_merge(a, b) == CW_STATUS_OK, "merge");
    CHECK(cw_frontier_dominates(a, b, &dominates) == CW_STATUS_OK && dominates,
          "after the merge it does");
    uint64_t epoch = 0;
    CHECK(cw_frontier_get(a, x, &epoch) == CW_STATUS_OK && epoch == 3, "never lowered");
    uint8_t wire[CW_FRONTIER_WIRE_MAX];
    size_t written = 0, consumed = 0, len = 0;
    bool tainted = true;
    CHECK(cw_frontier_encode(a, wire, sizeof wire, &written) == CW_STATUS_OK && written > 3,
          "encode");
    CHECK(cw_frontier_clear(b) == CW_STATUS_OK, "clear");
    CHECK(cw_frontier_decode(b, wire, written, &consumed) == CW_STATUS_OK && consumed == written,
          "decode");
    CHECK(cw_frontier_info(b, &len, &tainted) == CW_STATUS_OK && len == 2 && !tainted,
          "the decoded frontier has both points");
    CHECK(cw_frontier_dominates(b, a, &dominates) == CW_STATUS_OK && dominates,
          "and dominates the original");

    /* Bad input. */
    REFUSED(cw_frontier_encode(a, wire, 2, &written), CW_STATUS_BUFFER_TOO_SMALL,
            "a small buffer is refused");
    CHECK(written == (size_t)(2 * 9 + 3), "with the size needed");
    wire[0] = 99;
    REFUSED(cw_frontier_decode(b, wire, 3, &consumed), CW_STATUS_MALFORMED_WIRE,
            "an unknown wire version is refused");
    REFUSED(cw_frontier_decode(b, NULL, 4, &consumed), CW_STATUS_NULL_POINTER,
            "NULL bytes are refused");
    REFUSED(cw_frontier_create(NULL), CW_STATUS_NULL_POINTER, "a NULL output is refused");
    cw_frontier null_frontier = {0};
    REFUSED(cw_frontier_merge(a, null_frontier), CW_STATUS_NULL_HANDLE,
            "the null handle is refused");
    cw_frontier garbage = {0x00ff00ff00ff00ffULL};
    REFUSED(cw_frontier_clear(garbage), CW_STATUS_INVALID_HANDLE, "garbage bits are refused");
    REFUSED(cw_frontier_insert_or_raise(a, 0, 1), CW_STATUS_INVALID_ARGUMENT,
            "an axis that is no axis is refused");
    CHECK(cw_frontier_destroy(b) == CW_STATUS_OK, "destroy");
    REFUSED(cw_frontier_merge(a, b), CW_STATUS_STALE_HANDLE, "a destroyed frontier is stale");
    REFUSED(cw_frontier_destroy(b), CW_STATUS_STALE_HANDLE, "destroying twice is refused");
    cw_frontier reused;
    CHECK(cw_frontier_create(&reused) == CW_STATUS_OK, "a new frontier may take the slot");
    REFUSED(cw_frontier_clear(b), CW_STATUS_STALE_HANDLE, "the old handle stays stale");
    cw_semaphore not_a_semaphore = {a.bits};
    REFUSED(cw_semaphore_signal_external(not_a_semaphore, 1), CW_STATUS_WRONG_HANDLE_TYPE,
            "a frontier handle passed as a semaphore is refused");
    cw_frontier_destroy(reused);
    cw_frontier_destroy(a);
}

struct fired {
    atomic_int count;
    uint64_t value;
    uint32_t failure;
};

static void on_fire(void *user_data, cw_outcome outcome) {
    struct fired *fired = user_data;
    fired->value = outcome.value;
    fired->failure = outcome.failure.kind;
    atomic_fetch_add(&fired->count, 1);
}

static void semaphores_and_queues(void) {
    cw_semaphore s;
    cw_queue producer, consumer;
    cw_frontier knowledge;
    CHECK(cw_semaphore_create(0, &s) == CW_STATUS_OK, "semaphore");
    CHECK(cw_queue_create(axis(10), true, &producer) == CW_STATUS_OK, "producer queue");
    CHECK(cw_queue_create(axis(11), true, &consumer) == CW_STATUS_OK, "consumer queue");
    CHECK(cw_frontier_create(&knowledge) == CW_STATUS_OK, "frontier");

    /* A timepoint armed before the signal exists. */
    struct fired fired = {0};
    cw_timepoint timepoint;
    cw_arm arm;
    CHECK(cw_timepoint_create(on_fire, &fired, &timepoint) == CW_STATUS_OK, "timepoint");
    CHECK(cw_timepoint_arm(timepoint, s, 1, &arm) == CW_STATUS_OK && arm.armed, "armed");
    REFUSED(cw_timepoint_arm(timepoint, s, 1, &arm), CW_STATUS_BUSY, "arming twice is refused");

    /* The consumer waits before the producer submitted: a device wait. */
    cw_wait_result wait;
    CHECK(cw_queue_begin(consumer) == CW_STATUS_OK, "begin");
    REFUSED(cw_queue_begin(consumer), CW_STATUS_SUBMISSION_OPEN, "begin twice is refused");
    CHECK(cw_queue_wait(consumer, s, 1, &wait) == CW_STATUS_OK &&
              wait.resolution == CW_RESOLUTION_DEVICE_WAIT,
          "an early wait is a device wait");
    cw_submitted early;
    CHECK(cw_queue_commit(consumer, NULL, 0, knowledge, &early) == CW_STATUS_OK &&
              early.failure.kind == CW_FAILURE_KIND_NONE && early.point.epoch == 1,
          "commit");

    /* The producer commits a signal and retires it. */
    cw_signal signal = {s, 1};
    cw_submitted produced;
    CHECK(cw_queue_begin(producer) == CW_STATUS_OK, "producer begins");
    CHECK(cw_queue_commit(producer, &signal, 1, knowledge, &produced) == CW_STATUS_OK,
          "producer commits its signal");
    CHECK(atomic_load(&fired.count) == 0, "not reached before retirement");
    cw_failure ok = {CW_FAILURE_KIND_NONE, 0};
    CHECK(cw_retire(&signal, 1, ok) == CW_STATUS_OK, "retire");
    CHECK(atomic_load(&fired.count) == 1 && fired.value == 1 &&
              fired.failure == CW_FAILURE_KIND_NONE,
          "the timepoint fired once with the value");
    cw_cancel cancelled;
    CHECK(cw_timepoint_cancel(timepoint, &cancelled) == CW_STATUS_OK &&
              cancelled == CW_CANCEL_ALREADY_FIRED,
          "cancel after firing says so");

    /* A late waiter: satisfied, then elided once the queue knows the producer. */
    CHECK(cw_queue_begin(consumer) == CW_STATUS_OK && cw_queue_wait(consumer, s, 1, &wait) == CW_STATUS_OK &&
              wait.resolution == CW_RESOLUTION_SATISFIED,
          "a reached value is satisfied");
    CHECK(cw_queue_commit(consumer, NULL, 0, knowledge, &early) == CW_STATUS_OK, "commit");
    uint64_t epoch = 0;
    CHECK(cw_frontier_get(knowledge, produced.point.axis, &epoch) == CW_STATUS_OK && epoch == 1,
          "the consumer's operation knows the producer's");
    CHECK(cw_queue_begin(consumer) == CW_STATUS_OK && cw_queue_wait(consumer, s, 1, &wait) == CW_STATUS_OK &&
              wait.resolution == CW_RESOLUTION_ELIDED,
          "a known signal is elided");
    CHECK(cw_queue_abandon(consumer) == CW_STATUS_OK, "abandon");
    REFUSED(cw_queue_abandon(consumer), CW_STATUS_NO_SUBMISSION, "abandon twice is refused");
    uint64_t committed = 0;
    CHECK(cw_queue_state(consumer, &committed, knowledge) == CW_STATUS_OK && committed == 2,
          "an abandoned submission commits nothing");

    /* A semaphore value that goes backwards. */
    cw_point host = {axis(12), 1};
    REFUSED(cw_semaphore_signal(s, 1, host, knowledge), CW_STATUS_NOT_ADVANCING,
            "a signal that does not advance is refused");
    CHECK(cw_queue_begin(producer) == CW_STATUS_OK, "begin");
    REFUSED(cw_queue_commit(producer, &signal, 1, knowledge, &produced), CW_STATUS_NOT_ADVANCING,
            "a commit whose signal goes backwards is refused");
    CHECK(cw_queue_state(producer, &committed, (cw_frontier){0}) == CW_STATUS_OK && committed == 1,
          "and commits nothing");

    /* Failure: a failed semaphore dooms its waiters at submission; it is no error. */
    CHECK(cw_timepoint_arm(timepoint, s, 5, &arm) == CW_STATUS_OK && arm.armed, "armed again");
    cw_failure application = {CW_FAILURE_KIND_APPLICATION, 42};
    bool first = false;
    CHECK(cw_semaphore_fail(s, application, &first) == CW_STATUS_OK && first, "fail");
    CHECK(atomic_load(&fired.count) == 2 && fired.failure == CW_FAILURE_KIND_APPLICATION,
          "the armed timepoint is told of the failure");
    CHECK(cw_queue_begin(consumer) == CW_STATUS_OK && cw_queue_wait(consumer, s, 5, &wait) == CW_STATUS_OK &&
              wait.resolution == CW_RESOLUTION_FAILED && wait.failure.code == 42,
          "a wait on the failed semaphore resolves failed");
    CHECK(cw_queue_commit(consumer, NULL, 0, (cw_frontier){0}, &early) == CW_STATUS_OK &&
              early.failure.kind == CW_FAILURE_KIND_APPLICATION,
          "the operation is committed doomed");
    cw_failure status;
    CHECK(cw_semaphore_failure_for(s, 1, &status) == CW_STATUS_OK && status.kind == CW_FAILURE_KIND_NONE,
          "a value reached before the failure stays reached");
    cw_failure unknown = {77, 0};
    REFUSED(cw_semaphore_fail(s, unknown, NULL), CW_STATUS_INVALID_ARGUMENT,
            "an unknown failure kind is refused");
    REFUSED(cw_timepoint_create(NULL, NULL, &timepoint), CW_STATUS_NULL_POINTER,
            "a NULL callback is refused");

    CHECK(cw_timepoint_destroy(timepoint) == CW_STATUS_OK, "destroy the timepoint");
    REFUSED(cw_timepoint_arm(timepoint, s, 9, &arm), CW_STATUS_STALE_HANDLE,
            "a destroyed timepoint is stale");
    CHECK(cw_semaphore_destroy(s) == CW_STATUS_OK, "destroy the semaphore");
    REFUSED(cw_retire(&signal, 1, ok), CW_STATUS_STALE_HANDLE,
            "retiring a signal of a destroyed semaphore reports it");
    cw_queue_destroy(producer);
    cw_queue_destroy(consumer);
    REFUSED(cw_queue_begin(consumer), CW_STATUS_STALE_HANDLE, "a destroyed queue is stale");
    cw_frontier_destroy(knowledge);
}

/* --- the device --------------------------------------------------------------------------- */

static atomic_int ran;
static atomic_int release_blockers;

static uint32_t count_run(void *user_data) {
    (void)user_data;
    atomic_fetch_add(&ran, 1);
    return 0;
}

static uint32_t fail_with(void *user_data) {
    return *(const uint32_t *)user_data;
}

static uint32_t block_until_released(void *user_data) {
    (void)user_data;
    while (!atomic_load(&release_blockers)) sleep_ms(1);
    return 0;
}

static void *release_later(void *arg) {
    (void)arg;
    sleep_ms(150);
    atomic_store(&release_blockers, 1);
    return NULL;
}

static cw_op op_of(const cw_device_value *waits, size_t wait_count, const cw_device_value *signals,
                   size_t signal_count, cw_host_fn host, void *user_data) {
    cw_op op = {waits, wait_count, signals, signal_count, host, user_data};
    return op;
}

static void device(void) {
    cw_device_config config;
    CHECK(cw_device_config_default(&config) == CW_STATUS_OK, "default configuration");
    config.queues = 2;
    config.queue_capacity = 2;
    cw_device dev;
    CHECK(cw_device_create(&config, &dev) == CW_STATUS_OK, "device");
    cw_device_semaphore a, b, bad, doomed;
    CHECK(cw_device_semaphore_create(dev, 0, &a) == CW_STATUS_OK &&
              cw_device_semaphore_create(dev, 0, &b) == CW_STATUS_OK &&
              cw_device_semaphore_create(dev, 0, &bad) == CW_STATUS_OK &&
              cw_device_semaphore_create(dev, 0, &doomed) == CW_STATUS_OK,
          "semaphores");
    cw_receipt receipt;
    cw_outcome outcome;

    /* Success: queue 0 signals a, queue 1 waits on it and signals b. */
    cw_device_value a1 = {a, 1}, b1 = {b, 1};
    cw_op produce = op_of(NULL, 0, &a1, 1, count_run, NULL);
    cw_op consume = op_of(&a1, 1, &b1, 1, count_run, NULL);
    CHECK(cw_device_submit(dev, 0, &produce, &receipt) == CW_STATUS_OK, "submit the producer");
    CHECK(cw_device_submit(dev, 1, &consume, &receipt) == CW_STATUS_OK && receipt.wait_count == 1 &&
              receipt.failure.kind == CW_FAILURE_KIND_NONE,
          "submit the consumer behind it");
    CHECK(cw_device_wait(dev, b, 1, 5000000000ULL, &outcome) == CW_STATUS_OK && outcome.value == 1,
          "the host waits for the consumer");
    CHECK(atomic_load(&ran) == 2, "both callbacks ran");

    /* Failure: a callback's code fails its signal, the waiter behind it, and a host wait. */
    static const uint32_t code = 7;
    cw_device_value bad1 = {bad, 1}, doomed1 = {doomed, 1};
    cw_op failing = op_of(NULL, 0, &bad1, 1, fail_with, (void *)&code);
    cw_op waiter = op_of(&bad1, 1, &doomed1, 1, count_run, NULL);
    CHECK(cw_device_submit(dev, 0, &failing, &receipt) == CW_STATUS_OK, "submit a failing op");
    CHECK(cw_device_submit(dev, 1, &waiter, &receipt) == CW_STATUS_OK, "and a waiter on it");
    REFUSED(cw_device_wait(dev, doomed, 1, 5000000000ULL, &outcome), CW_STATUS_FAILED,
            "the waiter's signal fails");
    CHECK(outcome.failure.kind == CW_FAILURE_KIND_APPLICATION && outcome.failure.code == 7,
          "with the callback's code");
    CHECK(atomic_load(&ran) == 2, "the failed waiter's callback never ran");
    cw_device_value doomed2 = {doomed, 2};
    cw_op late = op_of(&bad1, 1, &doomed2, 1, count_run, NULL);
    CHECK(cw_device_submit(dev, 1, &late, &receipt) == CW_STATUS_OK &&
              receipt.failure.kind == CW_FAILURE_KIND_APPLICATION && receipt.waits[0] == CW_RESOLUTION_FAILED,
          "a submission on a failed semaphore is accepted doomed");

    /* A full ring: the caller waits, try-submit answers FULL, a timeout gives up. */
    cw_device_value a2 = {a, 2}, a3 = {a, 3}, a4 = {a, 4};
    cw_op block2 = op_of(NULL, 0, &a2, 1, block_until_released, NULL);
    cw_op block3 = op_of(NULL, 0, &a3, 1, block_until_released, NULL);
    cw_op next = op_of(NULL, 0, &a4, 1, count_run, NULL);
    CHECK(cw_device_submit(dev, 0, &block2, &receipt) == CW_STATUS_OK &&
              cw_device_submit(dev, 0, &block3, &receipt) == CW_STATUS_OK,
          "two blocking ops fill queue 0's ring of 2");
    REFUSED(cw_device_try_submit(dev, 0, &next, &receipt), CW_STATUS_FULL,
            "try-submit on the full ring answers FULL");
    double started = now_ms();
    REFUSED(cw_device_submit_timeout(dev, 0, &next, 50000000ULL, &receipt), CW_STATUS_TIMED_OUT,
            "submit with a timeout gives up");
    CHECK(now_ms() - started >= 45.0, "after its timeout");
    pthread_t releaser;
    pthread_create(&releaser, NULL, release_later, NULL);
    started = now_ms();
    CHECK(cw_device_submit(dev, 0, &next, &receipt) == CW_STATUS_OK, "a waiting submit gets in");
    double waited = now_ms() - started;
    CHECK(waited >= 100.0, "once the ring had room (the caller waited)");
    printf("ok - the full ring made the caller wait %.0f ms\n", waited);
    pthread_join(releaser, NULL);
    CHECK(cw_device_wait(dev, a, 4, 5000000000ULL, &outcome) == CW_STATUS_OK, "all of it ran");

    /* Bad input: nothing is submitted, nothing hangs. */
    cw_device_value a4again = {a, 4};
    cw_op backwards = op_of(NULL, 0, &a4again, 1, NULL, NULL);
    REFUSED(cw_device_submit(dev, 0, &backwards, &receipt), CW_STATUS_NOT_ADVANCING,
            "a signal that goes backwards is refused");
    REFUSED(cw_device_submit(dev, 9, &produce, &receipt), CW_STATUS_INVALID_ARGUMENT,
            "an unknown queue is refused");
    REFUSED(cw_device_submit(dev, 0, NULL, &receipt), CW_STATUS_NULL_POINTER, "a NULL op");
    REFUSED(cw_device_wait(dev, a, 100, 20000000ULL, &outcome), CW_STATUS_TIMED_OUT,
            "a wait for a value never signalled times out");
    cw_device_semaphore wrong = {dev.bits};
    REFUSED(cw_device_wait(dev, wrong, 1, 0, &outcome), CW_STATUS_WRONG_HANDLE_TYPE,
            "a device handle passed as a semaphore is refused");
    CHECK(cw_device_semaphore_destroy(dev, b) == CW_STATUS_OK, "destroy a semaphore");
    REFUSED(cw_device_semaphore_value(dev, b, &outcome.value), CW_STATUS_STALE_HANDLE,
            "a destroyed semaphore is stale");
    REFUSED(cw_device_submit(dev, 1, &consume, &receipt), CW_STATUS_STALE_HANDLE,
            "and cannot be submitted");

    /* An operation is counted once it has finished, just after its signals: a waiter may be
     * woken a moment before the count moves. */
    cw_device_stats stats;
    for (int tries = 0; tries < 2000; tries++) {
        if (cw_device_query_stats(dev, &stats) != CW_STATUS_OK || stats.in_flight == 0) break;
        sleep_ms(1);
    }
    CHECK(cw_device_query_stats(dev, &stats) == CW_STATUS_OK && stats.submitted == 8 && stats.completed == 5 &&
              stats.failed == 3 && stats.callbacks_failed == 1 && stats.in_flight == 0,
          "the run's statistics");
    printf("ok - stats: submitted %llu, completed %llu, failed %llu, elided %llu, satisfied %llu, "
           "device waits %llu\n",
           (unsigned long long)stats.submitted, (unsigned long long)stats.completed,
           (unsigned long long)stats.failed, (unsigned long long)stats.waits_elided,
           (unsigned long long)stats.waits_satisfied, (unsigned long long)stats.waits_device);

    /* Shutdown within a grace period: queued work is cancelled, its waiters end. */
    atomic_store(&release_blockers, 0);
    cw_device_value a5 = {a, 5}, a6 = {a, 6};
    cw_op block5 = op_of(NULL, 0, &a5, 1, block_until_released, NULL);
    cw_op queued = op_of(NULL, 0, &a6, 1, count_run, NULL);
    CHECK(cw_device_submit(dev, 0, &block5, &receipt) == CW_STATUS_OK &&
              cw_device_submit(dev, 0, &queued, &receipt) == CW_STATUS_OK,
          "work in flight at shutdown");
    pthread_create(&releaser, NULL, release_later, NULL);
    cw_shutdown_report report;
    CHECK(cw_device_destroy(dev, 2000000000ULL, &report) == CW_STATUS_OK && report.shut_down &&
              report.stuck == 0 && !report.leaked,
          "destroy shuts the device down");
    printf("ok - shutdown: cancelled %llu, stuck %llu\n", (unsigned long long)report.cancelled,
           (unsigned long long)report.stuck);
    pthread_join(releaser, NULL);
    REFUSED(cw_device_query_stats(dev, &stats), CW_STATUS_STALE_HANDLE, "a destroyed device is stale");
    REFUSED(cw_device_destroy(dev, 0, NULL), CW_STATUS_STALE_HANDLE, "destroying twice is refused");
    config.workers = 0;
    REFUSED(cw_device_create(&config, &dev), CW_STATUS_INVALID_ARGUMENT,
            "a configuration out of range is refused");
}

int main(void) {
    CHECK(cw_last_error_message() != NULL && cw_last_error_message()[0] == '\0',
          "no message before any failure");
    frontiers();
    semaphores_and_queues();
    device();
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
