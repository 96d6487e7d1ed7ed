// Runs the threads of one threadgroup of the emulated Metal device in lockstep, as fibers on the
// calling host thread: each runs until it reaches a barrier (or ends); when every thread still
// running has reached it, all go on. Compiled with each library whose kernels need it, next to
// the kernels and the entries halo writes for them (`halo_threads`, one per export).
#include <stddef.h>
#include <stdlib.h>
#include <ucontext.h>

// Each thread's stack: kernels keep their private arrays there.
#define HALO_FIBER_STACK (64 * 1024)

extern void (*const halo_threads[])(size_t context, unsigned index);

struct halo_fiber {
    ucontext_t context;
    int done;
};

struct halo_group {
    ucontext_t scheduler;
    struct halo_fiber* fibers;
    char* stacks;
    char* slots;
    unsigned count, running, entry;
    size_t context;
};

// The group this host thread runs now (one at a time per host thread).
static __thread struct halo_group* halo_current;

void halo_barrier(void) {
    struct halo_group* group = halo_current;
    swapcontext(&group->fibers[group->running].context, &group->scheduler);
}

unsigned halo_thread_index(void) { return halo_current->running; }
unsigned halo_thread_count(void) { return halo_current->count; }
int halo_thread_done(unsigned index) { return halo_current->fibers[index].done; }
// Where each thread leaves its value for a simd-group operation (up to 32 bytes per thread).
size_t halo_simd_slots(void) { return (size_t)halo_current->slots; }

static void halo_fiber_main(int index) {
    struct halo_group* group = halo_current;
    halo_threads[group->entry](group->context, (unsigned)index);
    group->fibers[index].done = 1;
}

// Runs threads 0..count of entry `entry` over `context`; 0, or 1 when memory ran out.
int halo_run_group(size_t context, unsigned count, unsigned entry) {
    struct halo_group group = {0};
    group.count = count;
    group.entry = entry;
    group.context = context;
    group.fibers = calloc(count, sizeof *group.fibers);
    group.stacks = malloc((size_t)count * HALO_FIBER_STACK);
    group.slots = calloc(count, 32);
    int status = 1;
    if (group.fibers && group.stacks && group.slots) {
        struct halo_group* outer = halo_current;
        halo_current = &group;
        for (unsigned i = 0; i < count; ++i) {
            ucontext_t* fiber = &group.fibers[i].context;
            getcontext(fiber);
            fiber->uc_stack.ss_sp = group.stacks + (size_t)i * HALO_FIBER_STACK;
            fiber->uc_stack.ss_size = HALO_FIBER_STACK;
            fiber->uc_link = &group.scheduler;
            makecontext(fiber, (void (*)(void))halo_fiber_main, 1, (int)i);
        }
        for (unsigned remaining = count; remaining > 0;) {
            for (unsigned i = 0; i < count; ++i) {
                if (group.fibers[i].done) continue;
                group.running = i;
                swapcontext(&group.scheduler, &group.fibers[i].context);
                remaining -= (unsigned)group.fibers[i].done;
            }
        }
        halo_current = outer;
        status = 0;
    }
    free(group.fibers);
    free(group.stacks);
    free(group.slots);
    return status;
}
