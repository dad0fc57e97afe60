/* Geometry, initialisation and validation of a channel segment. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "shm/layout_int.h"

static uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

int zimp__geometry(uint32_t slots, uint32_t slot_size, uint32_t max_senders,
                   uint32_t max_receivers, bool heap, struct zimp_geometry *g)
{
    if (slots < 2 || slots > ZIMP_SLOTS_MAX || (slots & (slots - 1)) != 0)
        return -EINVAL;
    if (slot_size > ZIMP_SLOT_SIZE_MAX)
        return -EINVAL;
    if (max_senders < 1 || max_senders > 1024 || max_receivers < 1 || max_receivers > 4096)
        return -EINVAL;

    memset(g, 0, sizeof *g);
    g->slots = slots;
    g->slot_size = slot_size;
    g->max_senders = max_senders;
    g->max_receivers = max_receivers;
    g->off_wait = sizeof(struct zimp_header);
    g->off_senders = g->off_wait + sizeof(struct zimp_wait);
    g->off_receivers = round_up(g->off_senders + (uint64_t)max_senders * sizeof(struct zimp_sender_rec),
                                ZIMP_PAGE);
    g->receiver_stride = ZIMP_PAGE;
    g->off_slots = g->off_receivers + (uint64_t)max_receivers * g->receiver_stride;
    g->off_data = round_up(g->off_slots + (uint64_t)slots * sizeof(struct zimp_slot), ZIMP_PAGE);
    if (heap) {
        g->off_holds = g->off_data;
        g->off_data = round_up(g->off_holds + (uint64_t)slots * sizeof(struct zimp_hold), ZIMP_PAGE);
    }
    uint64_t stride = slot_size >= ZIMP_PAGE / 2 ? round_up(slot_size, ZIMP_PAGE)
                                                 : round_up(slot_size ? slot_size : 1, ZIMP_LINE);
    g->data_stride = (uint32_t)stride;
    g->segment_size = round_up(g->off_data + (uint64_t)slots * stride, ZIMP_PAGE);
    if (g->segment_size > ZIMP_SEGMENT_MAX)
        return -EINVAL;
    return 0;
}

void zimp__layout_init(void *base, const struct zimp_geometry *g, uint32_t flags,
                       uint32_t mode, uint64_t stall_timeout_ns, int32_t pid, uint64_t ident,
                       uint64_t nonce)
{
    struct zimp_header *h = zimp__hdr(base);

    memcpy(h->magic, ZIMP_MAGIC, sizeof h->magic);
    h->layout_major = ZIMP_LAYOUT_MAJOR;
    h->layout_minor = ZIMP_LAYOUT_MINOR;
    h->header_size = sizeof *h;
    h->segment_size = g->segment_size;
    h->slots = g->slots;
    h->slot_size = g->slot_size;
    h->max_senders = g->max_senders;
    h->max_receivers = g->max_receivers;
    h->flags = flags;
    h->mode = mode;
    h->stall_timeout_ns = stall_timeout_ns;
    h->creator_pid = pid;
    h->off_wait = g->off_wait;
    h->off_senders = g->off_senders;
    h->off_receivers = g->off_receivers;
    h->off_slots = g->off_slots;
    h->off_data = g->off_data;
    h->off_holds = g->off_holds;
    h->data_stride = g->data_stride;
    h->receiver_stride = g->receiver_stride;
    h->creator_ident = ident;
    h->nonce = nonce;
    zimp_store_relaxed(&h->tail, 0);
    zimp_store_relaxed(&h->sender_opens, 0);
    zimp_store_relaxed(&h->sender_closes, 0);

    for (uint32_t i = 0; i < g->max_senders; i++)
        zimp_store_relaxed(&zimp__srec(base, g, i)->intent, ZIMP_NO_INTENT);
    /* Slot seq 0 means "never published": position p publishes p + 1. */
}

static int fail(char *detail, size_t cap, const char *fmt, ...)
{
    if (detail && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(detail, cap, fmt, ap);
        va_end(ap);
    }
    return -EPROTO;
}

int zimp__layout_validate(const void *base, uint64_t size, struct zimp_geometry *g,
                          struct zimp_header *copy, char *detail, size_t cap)
{
    const struct zimp_header *h = base;
    struct zimp_geometry want;

    if (size < sizeof *h)
        return fail(detail, cap, "segment of %llu bytes is smaller than a header",
                    (unsigned long long)size);
    /* The acquire pairs with the creator's release of `ready`; then one
     * private snapshot of the fields: shared memory is read once. */
    uint32_t ready = zimp_load_acquire(&((struct zimp_header *)base)->ready);
    memcpy(copy, h, offsetof(struct zimp_header, ready));
    memcpy(&copy->off_wait, &h->off_wait,
           offsetof(struct zimp_header, reserved) - offsetof(struct zimp_header, off_wait));
    copy->heap_name[sizeof copy->heap_name - 1] = '\0';

    if (memcmp(copy->magic, ZIMP_MAGIC, sizeof copy->magic) != 0)
        return fail(detail, cap, "not a zimp channel (bad magic)");
    if (copy->layout_major != ZIMP_LAYOUT_MAJOR)
        return fail(detail, cap, "layout version %u.%u, this library knows %u.%u",
                    copy->layout_major, copy->layout_minor, ZIMP_LAYOUT_MAJOR, ZIMP_LAYOUT_MINOR);
    if (ready != ZIMP_READY)
        return fail(detail, cap, "readiness word is 0x%x, not 0x%x", ready, ZIMP_READY);
    if (copy->header_size != sizeof *h)
        return fail(detail, cap, "header size %u, expected %zu", copy->header_size, sizeof *h);
    if (copy->flags & ~(0x3u | ZIMP_F_HEAP | ZIMP_F_MEMBARRIER))
        return fail(detail, cap, "unknown channel flags 0x%x", copy->flags);
    if ((copy->flags & ZIMP_F_MEMBARRIER) && copy->max_senders != 1)
        return fail(detail, cap, "membarrier flag on a channel of %u senders", copy->max_senders);
    bool heap = copy->flags & ZIMP_F_HEAP;
    if (zimp__geometry(copy->slots, copy->slot_size, copy->max_senders, copy->max_receivers, heap,
                       &want) != 0)
        return fail(detail, cap, "sizes out of range (slots %u, slot_size %u, senders %u, receivers %u)",
                    copy->slots, copy->slot_size, copy->max_senders, copy->max_receivers);
    if (copy->segment_size != want.segment_size || copy->off_wait != want.off_wait ||
        copy->off_senders != want.off_senders || copy->off_receivers != want.off_receivers ||
        copy->off_slots != want.off_slots || copy->off_data != want.off_data ||
        copy->off_holds != want.off_holds ||
        copy->data_stride != want.data_stride ||
        copy->receiver_stride != want.receiver_stride)
        return fail(detail, cap, "geometry fields do not match the sizes");
    if (size != want.segment_size)
        return fail(detail, cap, "segment is %llu bytes, header says %llu",
                    (unsigned long long)size, (unsigned long long)want.segment_size);
    if (heap && (copy->heap_name[0] == '\0' || copy->heap_id == 0))
        return fail(detail, cap, "large-message channel names no heap");
    *g = want;
    return 0;
}
