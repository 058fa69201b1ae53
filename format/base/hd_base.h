/*
 * format/base/ — the shared base of every module: the error table's thread-local detail
 * (hd_error.c, which also holds hdmlp_strerror and the version) and the allocation
 * wrappers (hd_alloc.c). libc only. Internal header: not installed.
 */
#ifndef HDMLP_HD_BASE_H
#define HDMLP_HD_BASE_H

#include "hdmlp.h"

#include <stdarg.h>
#include <stddef.h>

/* Records `code` with a printf-style detail as the calling thread's last error and returns
 * `code`, so callers can write `return hd_err(HDMLP_E_IO, "...", ...)`. */
int hd_err(int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
int hd_verr(int code, const char *fmt, va_list ap);
/* Prefixes the current last-error detail with more context ("chunk 7: " + detail). */
int hd_err_wrap(int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Maps an errno value to an HDMLP_E_* code (ENOENT → E_NOTFOUND, ENOSPC → E_NOSPC, ...). */
int hd_errno_code(int err);
void hd_clear_error(void);

/* All library allocations go through these (NULL on failure; no abort). */
void *hd_malloc(size_t n);
void *hd_calloc(size_t count, size_t size);
void *hd_realloc(void *p, size_t n);
void *hd_aligned_alloc(size_t align, size_t n); /* free with hd_free */
void hd_free(void *p);
/* Page-aligned (2 MiB-aligned when n >= 2 MiB) anonymous mapping for I/O buffers; free with
 * hd_map_free(p, n) using the same n. */
void *hd_map_alloc(size_t n);
void hd_map_free(void *p, size_t n);
/* Gives the pages of a mapping from hd_map_alloc(n) back to the system (they read as zero
 * afterwards); the mapping stays valid. */
void hd_map_release_pages(void *p, size_t n);

#endif /* HDMLP_HD_BASE_H */
