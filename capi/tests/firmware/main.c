/* A C firmware image on the C API's bare-metal static library: qemu's mps2-an386 (Cortex-M4),
 * picolibc with semihosting. SysTick's interrupt handler is a timer queue: each tick it begins a
 * submission, commits a signal of the `ticks` semaphore and retires it, which fires a timepoint
 * the main loop armed. The main loop sleeps in WFI until then, decides waits on its own queues
 * (satisfied, elided, a device wait, a failed one), merges frontiers, round-trips one through
 * the wire encoding and checks bad input, printing each check over semihosting. The image's
 * exit status is the verdict. Built and run by scripts/capi.sh. */
#include "causeway.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

/* SysTick, the Cortex-M core timer. */
#define SYST_CSR (*(volatile uint32_t *)0xE000E010u)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014u)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018u)
#define SYST_CSR_ENABLE_TICKINT_CORE 0x7u
/* qemu models the AN386's core at 25 MHz: a tick per millisecond. */
#define CYCLES_PER_TICK 25000u
#define TICKS 5u

static int passed, failed;

#define CHECK(condition, what)                                                                 \
    do {                                                                                       \
        if (condition) {                                                                       \
            passed++;                                                                          \
            printf("ok - %s\n", what);                                                         \
        } else {                                                                               \
            failed++;                                                                          \
            printf("FAILED: %s (line %d; last error: %s)\n", what, __LINE__,                   \
                   cw_last_error_message());                                                   \
        }                                                                                      \
    } while (0)

/* Shared with the interrupt handler. */
static cw_semaphore ticks;
static cw_queue timer_queue;
static volatile uint32_t ticks_signalled;
static volatile uint32_t handler_errors;
static atomic_bool third_tick;
static volatile uint32_t fired_value;

/* Called if causeway panics (never on input; see causeway.h). */
void cw_abort(void) {
    printf("FAILED: causeway aborted\n");
    exit(101);
}

void arm_systick_isr(void) {
    uint32_t tick = ticks_signalled + 1;
    cw_signal signal = {ticks, tick};
    cw_submitted submitted;
    cw_failure ok = {CW_FAILURE_KIND_NONE, 0};
    if (cw_queue_begin(timer_queue) != CW_STATUS_OK ||
        cw_queue_commit(timer_queue, &signal, 1, (cw_frontier){0}, &submitted) != CW_STATUS_OK ||
        cw_retire(&signal, 1, ok) != CW_STATUS_OK) {
        handler_errors++;
    }
    ticks_signalled = tick;
    if (tick == TICKS) SYST_CSR = 0;
}

/* Runs in the interrupt handler, inside the retirement of tick 3. */
static void on_third_tick(void *user_data, cw_outcome outcome) {
    (void)user_data;
    fired_value = (uint32_t)outcome.value;
    atomic_store(&third_tick, true);
}

static uint64_t axis(cw_domain domain, uint64_t ordinal) {
    uint64_t bits = 0;
    cw_axis_make(0, (uint32_t)domain, ordinal, &bits);
    return bits;
}

int main(void) {
    uint64_t timer_axis = axis(CW_DOMAIN_HOST, 1);
    cw_queue main_queue, other_queue;
    cw_frontier known, other, decoded;
    CHECK(cw_semaphore_create(0, &ticks) == CW_STATUS_OK, "the ticks semaphore");
    CHECK(cw_queue_create(timer_axis, true, &timer_queue) == CW_STATUS_OK &&
              cw_queue_create(axis(CW_DOMAIN_QUEUE, 2), true, &main_queue) == CW_STATUS_OK &&
              cw_queue_create(axis(CW_DOMAIN_QUEUE, 3), true, &other_queue) == CW_STATUS_OK,
          "three queue clocks (the timer's, two of the main loop's)");
    CHECK(cw_frontier_create(&known) == CW_STATUS_OK && cw_frontier_create(&other) == CW_STATUS_OK &&
              cw_frontier_create(&decoded) == CW_STATUS_OK,
          "frontiers");
    cw_timepoint timepoint;
    cw_arm arm;
    CHECK(cw_timepoint_create(on_third_tick, NULL, &timepoint) == CW_STATUS_OK &&
              cw_timepoint_arm(timepoint, ticks, 3, &arm) == CW_STATUS_OK && arm.armed,
          "a timepoint armed on tick 3");

    SYST_RVR = CYCLES_PER_TICK - 1;
    SYST_CVR = 0;
    SYST_CSR = SYST_CSR_ENABLE_TICKINT_CORE;
    while (!atomic_load(&third_tick)) __asm__ volatile("wfi");
    CHECK(fired_value >= 3, "the interrupt handler's signal fired the timepoint");

    /* Decide waits on the main queue. */
    cw_wait_result wait;
    cw_submitted op;
    uint64_t epoch = 0;
    CHECK(cw_queue_begin(main_queue) == CW_STATUS_OK &&
              cw_queue_wait(main_queue, ticks, 3, &wait) == CW_STATUS_OK &&
              wait.resolution == CW_RESOLUTION_SATISFIED,
          "a wait on tick 3 is satisfied");
    CHECK(cw_queue_commit(main_queue, NULL, 0, known, &op) == CW_STATUS_OK &&
              cw_frontier_get(known, timer_axis, &epoch) == CW_STATUS_OK && epoch == 3,
          "its operation knows the timer's third operation");
    CHECK(cw_queue_begin(main_queue) == CW_STATUS_OK &&
              cw_queue_wait(main_queue, ticks, 2, &wait) == CW_STATUS_OK &&
              wait.resolution == CW_RESOLUTION_ELIDED,
          "a wait on tick 2 is elided: the queue knows it");
    CHECK(cw_queue_wait(main_queue, ticks, 1000, &wait) == CW_STATUS_OK &&
              wait.resolution == CW_RESOLUTION_DEVICE_WAIT,
          "a wait on a tick to come is a device wait");
    CHECK(cw_queue_abandon(main_queue) == CW_STATUS_OK, "that submission is abandoned");

    /* Merge, dominate, round-trip the wire encoding. */
    bool dominates = true;
    CHECK(cw_frontier_insert_or_raise(other, axis(CW_DOMAIN_QUEUE, 3), 1) == CW_STATUS_OK &&
              cw_frontier_dominates(other, known, &dominates) == CW_STATUS_OK && !dominates,
          "another frontier does not dominate the main queue's");
    CHECK(cw_frontier_merge(other, known) == CW_STATUS_OK &&
              cw_frontier_dominates(other, known, &dominates) == CW_STATUS_OK && dominates,
          "merged, it does");
    uint8_t wire[CW_FRONTIER_WIRE_MAX];
    size_t written = 0, consumed = 0;
    CHECK(cw_frontier_encode(other, wire, sizeof wire, &written) == CW_STATUS_OK &&
              cw_frontier_decode(decoded, wire, written, &consumed) == CW_STATUS_OK &&
              consumed == written && cw_frontier_dominates(decoded, other, &dominates) == CW_STATUS_OK &&
              dominates,
          "a frontier survives its wire encoding");

    /* Failure: an operation of the main queue fails; the other queue's wait on it is doomed. */
    cw_semaphore link;
    CHECK(cw_semaphore_create(0, &link) == CW_STATUS_OK, "a link semaphore");
    cw_signal link1 = {link, 1};
    CHECK(cw_queue_begin(main_queue) == CW_STATUS_OK &&
              cw_queue_commit(main_queue, &link1, 1, known, &op) == CW_STATUS_OK,
          "an operation that will signal it");
    CHECK(cw_queue_begin(other_queue) == CW_STATUS_OK &&
              cw_queue_wait(other_queue, link, 1, &wait) == CW_STATUS_OK &&
              wait.resolution == CW_RESOLUTION_DEVICE_WAIT &&
              cw_queue_commit(other_queue, NULL, 0, (cw_frontier){0}, &op) == CW_STATUS_OK,
          "a waiter on it, submitted before it ran");
    cw_failure failure = {CW_FAILURE_KIND_APPLICATION, 5};
    CHECK(cw_retire(&link1, 1, failure) == CW_STATUS_OK, "the operation retires failed");
    cw_failure seen;
    CHECK(cw_semaphore_failure_for(link, 1, &seen) == CW_STATUS_OK &&
              seen.kind == CW_FAILURE_KIND_APPLICATION && seen.code == 5,
          "its waiters see the failure");
    CHECK(cw_queue_begin(other_queue) == CW_STATUS_OK &&
              cw_queue_wait(other_queue, link, 1, &wait) == CW_STATUS_OK &&
              wait.resolution == CW_RESOLUTION_FAILED &&
              cw_queue_commit(other_queue, NULL, 0, (cw_frontier){0}, &op) == CW_STATUS_OK &&
              op.failure.kind == CW_FAILURE_KIND_APPLICATION,
          "a later wait on it is committed doomed, not refused");

    /* Bad input: codes, never undefined behaviour. */
    cw_point host = {timer_axis, 1};
    CHECK(cw_semaphore_signal(ticks, 1, host, known) == CW_STATUS_NOT_ADVANCING,
          "a signal that goes backwards is refused");
    CHECK(cw_frontier_destroy(decoded) == CW_STATUS_OK &&
              cw_frontier_clear(decoded) == CW_STATUS_STALE_HANDLE,
          "a destroyed frontier's handle is stale");
    CHECK(cw_frontier_clear((cw_frontier){0}) == CW_STATUS_NULL_HANDLE, "a null handle is refused");
    CHECK(cw_semaphore_signal_external((cw_semaphore){known.bits}, 9) == CW_STATUS_WRONG_HANDLE_TYPE,
          "a frontier passed as a semaphore is refused");
    CHECK(cw_frontier_create(NULL) == CW_STATUS_NULL_POINTER, "a NULL output is refused");

    while (ticks_signalled < TICKS) __asm__ volatile("wfi");
    uint64_t value = 0;
    CHECK(cw_semaphore_value(ticks, &value) == CW_STATUS_OK && value == TICKS && handler_errors == 0,
          "every tick was signalled from the interrupt handler");
    CHECK(cw_timepoint_destroy(timepoint) == CW_STATUS_OK && cw_semaphore_destroy(link) == CW_STATUS_OK,
          "objects are destroyed");
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
