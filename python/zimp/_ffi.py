"""Loads libzimp.so through cffi in ABI mode and declares the part of zimp.h we call.

ABI mode needs no compiler when the package is installed: the declarations below are
parsed by cffi at import time and the library is opened with dlopen. cffi releases the
GIL around every call into the library, so a blocked receive never stalls other Python
threads. The declarations must match include/zimp/zimp.h; the tests check the struct
sizes against what the header implies and every function the binding uses resolves.
"""
from __future__ import annotations

import ctypes.util
import os
from pathlib import Path

import cffi

CDEF = """
struct zimp_config {
    uint32_t slots; uint32_t slot_size; uint32_t max_senders; uint32_t max_receivers;
    uint32_t mode; uint64_t stall_timeout_ns; uint32_t flags;
};
typedef struct zimp_sender zimp_sender;
typedef struct zimp_receiver zimp_receiver;

int zimp_create(const char *name, const struct zimp_config *cfg);
int zimp_unlink(const char *name);
int zimp_sender_open(const char *name, zimp_sender **out);
int zimp_receiver_open(const char *name, zimp_receiver **out);
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

ffi = cffi.FFI()
ffi.cdef(CDEF)


def _candidates() -> list[str]:
    """Where to look for libzimp, most explicit first.

    ZIMP_LIBRARY names the file (the tests point it at the build's libzimp.so); then
    the dynamic loader's own search (an installed libzimp.so.0); then the in-tree
    build folders of a checkout, so that `pip install -e python` works after a build.
    """
    found: list[str] = []
    explicit = os.environ.get("ZIMP_LIBRARY")
    if explicit:
        return [explicit]
    found.append("libzimp.so.0")
    system = ctypes.util.find_library("zimp")
    if system:
        found.append(system)
    root = Path(__file__).resolve().parent.parent.parent
    for build in ("build", "build-py", "build-test-normal"):
        lib = root / build / "src" / "libzimp.so"
        if lib.exists():
            found.append(str(lib))
    return found


def _load() -> object:
    """Opens the first loadable candidate; ImportError listing every try otherwise."""
    errors = []
    for path in _candidates():
        try:
            return ffi.dlopen(path)
        except OSError as err:
            errors.append(f"{path}: {err}")
    raise ImportError("zimp: cannot load libzimp (set ZIMP_LIBRARY=/path/to/libzimp.so "
                      "or install the C library): " + "; ".join(errors))


lib = _load()

# Output structs the library fills get this much room at least, so that a library
# newer than these declarations (a struct grown at its end) cannot write past them.
_OUT_SLACK = 1024


def new_out(ctype: str) -> object:
    """A zeroed `ctype *` (a struct the library writes) with room to spare."""
    size = max(ffi.sizeof(ctype), _OUT_SLACK)
    raw = ffi.new("char[]", size)
    return ffi.gc(ffi.cast(ctype + " *", raw), lambda _p, _keep=raw: None)
