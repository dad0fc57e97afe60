/* ckpt_int.h - the checkpoint-size meter's scanner (private to tools/ckpt).
 *
 * ckpt_scan() reads another process's memory the way a process-level
 * checkpointer does: /proc/PID/maps for the mappings, /proc/PID/pagemap for
 * which pages exist, process_vm_readv (or /proc/PID/mem) for their bytes.
 */
#ifndef ZIMP_CKPT_INT_H
#define ZIMP_CKPT_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Mapping kinds, as a checkpointer sorts them. */
enum ckpt_kind {
    CKPT_HEAP,    /* [heap] (brk) */
    CKPT_STACK,   /* [stack] */
    CKPT_ANON,    /* other private anonymous memory (mmap, thread arenas) */
    CKPT_FILE,    /* private file mappings: only their copied-on-write pages */
    CKPT_SHARED,  /* shared memory with no backing file (memfd, /dev/shm, SysV) */
    CKPT_NKINDS
};
extern const char *const ckpt_kind_names[CKPT_NKINDS];

#define CKPT_MAX_CODECS 8
enum ckpt_algo { CKPT_ZSTD, CKPT_LZ4, CKPT_LZ4HC };
struct ckpt_codec { enum ckpt_algo algo; int level; char name[24]; };

struct ckpt_opts {
    unsigned kinds;        /* bit (1 << kind) per selected kind; 0: all */
    uintptr_t addr;        /* nonzero: only the mapping containing addr */
    int all_pages;         /* count never-touched pages too (as zero pages) */
    int ncodecs;
    struct ckpt_codec codecs[CKPT_MAX_CODECS];
};

struct ckpt_counts {
    uint64_t mappings;
    uint64_t mapped_bytes;     /* size of the selected mappings */
    uint64_t resident_pages;   /* present in RAM (pagemap) */
    uint64_t swapped_pages;
    uint64_t dumped_pages;     /* pages a checkpointer saves without zero detection */
    uint64_t zero_pages;       /* of those, all bytes zero: skipped with detection */
    uint64_t partial_pages;    /* non-zero pages holding a zero 64-byte line */
    uint64_t nonzero_pages;    /* saved with zero detection */
    uint64_t zero_bytes_in_nonzero; /* bytes in zero 64-byte lines of non-zero pages */
    uint64_t unreadable_pages; /* present but unreadable (skipped) */
    uint64_t compressed[CKPT_MAX_CODECS]; /* non-zero pages compressed, 1 MiB blocks */
};

struct ckpt_result {
    pid_t pid;
    size_t page_size;
    char comm[64];
    struct ckpt_counts kind[CKPT_NKINDS];
    struct ckpt_counts total;
};

/* Parses "zstd-3,lz4-1,lz4hc-9" into o->codecs. Returns 0 or -EINVAL. */
int ckpt_parse_codecs(struct ckpt_opts *o, const char *list);

/* Parses "heap,anon,..." (or "all") into o->kinds. Returns 0 or -EINVAL. */
int ckpt_parse_kinds(struct ckpt_opts *o, const char *list);

/* The state letter of /proc/PID/stat ('R', 'S', 'T', 'Z', ...), or 0 if it
 * cannot be read. */
char ckpt_proc_state(pid_t pid);

/* Whether pid has exited: no such process, exiting, or a zombie (or
 * pid <= 0). */
int ckpt_gone(pid_t pid);

/* Scans pid. Returns 0, or a negative errno with a message in err:
 * -ESRCH no such process (or it exited during the scan: "no such process:
 * PID (it exited)"), -EACCES/-EPERM not allowed to read it, -ENOENT
 * no mapping contains opts->addr, -ENOMEM. Does not stop the process. */
int ckpt_scan(pid_t pid, const struct ckpt_opts *o, struct ckpt_result *r,
              char *err, size_t errlen);

#endif /* ZIMP_CKPT_INT_H */
