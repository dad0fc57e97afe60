/* perturb0.c - glibc's own freed-memory fill, set to zero: mallopt(M_PERTURB,
 * 256) makes free() write (256 & 0xff) = 0 into freed chunks (and malloc()
 * write 0xff into new ones). The glibc.malloc.perturb tunable stops at 255,
 * so the value 256 can only be set through mallopt; this shim does that at
 * load. Used with GLIBC_TUNABLES=glibc.malloc.tcache_count=0 so that small
 * chunks, which the tcache would keep unfilled, are filled too. */
#include <malloc.h>

__attribute__((constructor)) static void perturb_zero(void)
{
    mallopt(M_PERTURB, 256);
}
