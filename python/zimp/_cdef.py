"""The part of include/zimp/zimp.h the binding calls, as cffi declarations.

Plain text with no imports, so that the build of the compiled module (cffi_build.py)
can read it without loading the library. It must match the header: the compiled module
includes the header next to these declarations when it finds it (the compiler then
refuses a mismatch), and the tests compare the structs field by field.
"""

CDEF = """
struct zimp_config {
    uint32_t slots; uint32_t slot_size; uint32_t max_senders; uint32_t max_receivers;
    uint32_t mode; uint64_t stall_timeout_ns; uint32_t flags;
    const char *heap;
};
typedef struct zimp_sender zimp_sender;
typedef struct zimp_receiver zimp_receiver;

int zimp_create(const char *name, const struct zimp_config *cfg);
int zimp_unlink(const char *name);
int zimp_sender_open(const char *name, zimp_sender **out);
int zimp_receiver_open(const char *name, zimp_receiver **out);
int zimp_receiver_open_lossy(const char *name, zimp_receiver **out);
int zimp_receiver_missed(zimp_receiver *r, uint64_t *count);
void zimp_sender_close(zimp_sender *s);
void zimp_receiver_close(zimp_receiver *r);
int zimp_loan(zimp_sender *s, size_t len, void **buf, int64_t timeout_ns);
int zimp_publish(zimp_sender *s, void *buf, size_t len);
int zimp_unloan(zimp_sender *s, void *buf);
int zimp_send(zimp_sender *s, const void *buf, size_t len, int64_t timeout_ns);
ssize_t zimp_recv(zimp_receiver *r, void *buf, size_t cap, int64_t timeout_ns);
int zimp_read(zimp_receiver *r, const void **buf, size_t *len, int64_t timeout_ns);
int zimp_release(zimp_receiver *r);
int zimp_receiver_fd(zimp_receiver *r);
int zimp_receiver_index(const zimp_receiver *r);
int zimp_stalled(zimp_sender *s, unsigned *receivers, size_t cap);
int zimp_evict(zimp_sender *s, unsigned receiver_index);
int zimp_stalled_senders(zimp_sender *s, unsigned *senders, size_t cap);
int zimp_evict_sender(zimp_sender *s, unsigned sender_index);
int zimp_sender_index(const zimp_sender *s);
const char *zimp_strerror(int err);
const char *zimp_last_detail(void);
int zimp_sender_set_spin(zimp_sender *s, uint64_t spin_ns);
int zimp_receiver_set_spin(zimp_receiver *r, uint64_t spin_ns);

struct zimp_info {
    uint32_t slots, slot_size, max_senders, max_receivers, flags, mode;
    uint64_t stall_timeout_ns;
    uint64_t segment_size;
    uint32_t senders, receivers;
    int32_t creator_pid;
    uint32_t layout_major, layout_minor;
    uint64_t published;
    uint64_t lag;
};
int zimp_info(const char *name, struct zimp_info *out);
int zimp_reap(const char *name);

typedef struct zimp_heap zimp_heap;
struct zimp_heap_config { uint64_t size; uint32_t max_members; uint32_t mode; uint32_t flags; };
struct zimp_ref { uint32_t heap; uint32_t gen; uint64_t off; };
int zimp_heap_create(const char *name, const struct zimp_heap_config *cfg);
int zimp_heap_unlink(const char *name);
int zimp_heap_open(const char *name, zimp_heap **out);
void zimp_heap_close(zimp_heap *h);
int zimp_heap_alloc(zimp_heap *h, size_t len, void **buf, struct zimp_ref *ref);
int zimp_heap_resolve(zimp_heap *h, const struct zimp_ref *ref, const void **buf, size_t *len);
int zimp_heap_release(zimp_heap *h, const struct zimp_ref *ref);
int zimp_heap_reap(zimp_heap *h);
struct zimp_heap_stats { uint64_t size; uint64_t used; uint64_t blocks; uint32_t members; uint32_t unit; };
int zimp_heap_stats(zimp_heap *h, struct zimp_heap_stats *out);
"""
