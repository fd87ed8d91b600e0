#!/usr/bin/env python3
"""Who calls the C allocator, from `perf script` output with full stacks
(scripts/profile.sh with CALL_GRAPH=dwarf).

For every sample whose innermost frame is in malloc, realloc or free
(glibc's entry points and their internals), names the first frame outward
that is kobo's own code or a library's entry point, skipping the
allocation plumbing (`alloc::`, `core::`, `std::` and the allocator).
Prints the share of all samples each such caller holds, largest first.

    perf script -i perf.data | python3 scripts/alloc_callers.py [TOP]
"""

import collections
import re
import sys

ALLOCATOR = re.compile(
    r"^(malloc|_int_malloc|realloc|_int_realloc|free|cfree|_int_free|"
    r"malloc_consolidate|unlink_chunk|__libc_malloc|__libc_free|__libc_realloc|"
    r"tcache_|_int_free_merge_chunk|_int_free_create_chunk|__rust_alloc|"
    r"__rust_dealloc|__rust_realloc|__GI___libc_|__libc_calloc|calloc)"
)
PLUMBING = re.compile(
    r"^(alloc::|core::|std::|<alloc::|<core::|<std::|__rust|_?_?rdl_|"
    r"hashbrown::raw|<hashbrown::raw|\[unknown\]|malloc|free|cfree|realloc|calloc|"
    r"_int_|__GI_|__libc_|tcache|unlink_chunk)"
)


def frames(block):
    """The symbols of one sample's stack, innermost first."""
    out = []
    for line in block[1:]:
        parts = line.strip().split(None, 1)
        if len(parts) < 2:
            continue
        sym = parts[1].rsplit(" (", 1)[0]
        sym = re.sub(r"\+0x[0-9a-f]+$", "", sym)
        out.append(sym)
    return out


def main():
    top = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    total = 0
    in_alloc = 0
    callers = collections.Counter()
    block = []
    for line in list(sys.stdin) + [""]:
        if line.strip():
            block.append(line)
            continue
        if not block:
            continue
        total += 1
        stack = frames(block)
        block = []
        if not stack or not ALLOCATOR.match(stack[0]):
            continue
        in_alloc += 1
        caller = next((s for s in stack if not PLUMBING.match(s)), "(no caller found)")
        callers[caller[:160]] += 1
    if total == 0:
        print("no samples")
        return
    print(f"samples: {total}; in the allocator: {in_alloc} ({100 * in_alloc / total:.1f}%)")
    for caller, n in callers.most_common(top):
        print(f"{100 * n / total:6.2f}%  {caller}")


if __name__ == "__main__":
    main()
