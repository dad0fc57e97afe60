#!/usr/bin/env bash
# Runs the small_shm test inside a private mount namespace whose /dev/shm is
# an 8 MiB tmpfs (Docker's default /dev/shm is 64 MiB). Exit 77 (skipped)
# where this process may not make a mount namespace (not root, or a
# container without CAP_SYS_ADMIN).
set -u
tests=$1
if ! unshare --mount --propagation private true 2>/dev/null; then
  echo "skip: cannot create a mount namespace here (needs root or CAP_SYS_ADMIN)"; exit 77
fi
exec unshare --mount --propagation private sh -c \
  'mount -t tmpfs -o size=8m tmpfs /dev/shm || exit 77; exec "$0" small_shm' "$tests"
