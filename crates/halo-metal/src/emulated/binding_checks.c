// Contains the emulated Metal device's buffer accesses to the dispatch's bindings, as a GPU's
// robust buffer access would: an element outside every binding reads as zero and is written
// nowhere, and the first such access is reported after the threadgroup (the dispatch then fails,
// naming it). Kernels reach their bindings' runtime arrays through `halo_binding_element`
// (`halo_binding_array` in halo's <metal_stdlib>). Compiled with every library.
#include <stddef.h>
#include <string.h>

struct halo_binding {
    size_t start, length;
};

// The bindings of the threadgroup this host thread runs (one at a time per host thread; its
// lockstep fibers share them).
static _Thread_local const struct halo_binding* halo_bindings;
static _Thread_local unsigned halo_binding_count, halo_last_binding;
static _Thread_local size_t halo_stray_address, halo_stray_size;
static _Thread_local int halo_strayed;
// Where out-of-range elements go: the largest element a kernel may name (checked where the
// header instantiates `halo_binding_array`).
static _Thread_local _Alignas(64) unsigned char halo_scratch[256];

void halo_bindings_enter(const struct halo_binding* bindings, unsigned count) {
    halo_bindings = bindings;
    halo_binding_count = count;
    halo_last_binding = 0;
    halo_strayed = 0;
}

static int halo_within(const struct halo_binding* binding, size_t address, size_t size) {
    size_t offset = address - binding->start;
    return offset < binding->length && size <= binding->length - offset;
}

size_t halo_binding_element(size_t address, size_t size) {
    if (halo_last_binding < halo_binding_count && halo_within(&halo_bindings[halo_last_binding], address, size)) {
        return address;
    }
    for (unsigned i = 0; i < halo_binding_count; ++i) {
        if (halo_within(&halo_bindings[i], address, size)) {
            halo_last_binding = i;
            return address;
        }
    }
    if (!halo_strayed) {
        halo_strayed = 1;
        halo_stray_address = address;
        halo_stray_size = size;
    }
    memset(halo_scratch, 0, sizeof halo_scratch);
    return (size_t)halo_scratch;
}

// 1 and the first stray access's address and size in `stray`, or 0 when there was none.
int halo_bindings_leave(size_t* stray) {
    halo_bindings = NULL;
    halo_binding_count = 0;
    if (!halo_strayed) return 0;
    stray[0] = halo_stray_address;
    stray[1] = halo_stray_size;
    return 1;
}
