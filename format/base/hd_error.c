/* The error table, thread-local error detail, and errno mapping. */
#include "hd_base.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>

#define HD_ERR_DETAIL_MAX 1024

/* Each thread's detail is a heap buffer reached through a thread-local pointer of the
 * initial-exec model, which sits in the static TLS block glibc makes with the thread. A
 * thread-local array in a library that Python loads with dlopen is allocated by glibc on its
 * first use in each thread instead, and a failed allocation there ends the process ("cannot
 * allocate memory for thread-local data: ABORT") on the very path that reports running out
 * of memory. Without a buffer (malloc failed) the detail is a fixed text. A thread's buffer
 * is freed when it exits (a C11 thread-specific key's destructor). */
static _Thread_local char *detail __attribute__((tls_model("initial-exec")));
static _Thread_local int detail_failed __attribute__((tls_model("initial-exec")));
static once_flag detail_once = ONCE_FLAG_INIT;
static tss_t detail_key;
/* Atomic: call_once orders its write before every caller's read, but glibc's call_once
 * reaches pthread_once internally, past the interceptor through which ThreadSanitizer sees
 * that ordering, so a plain int is reported as a race. */
static atomic_int detail_key_ok;

static const char detail_lost[] = "out of memory (no room for the error's detail)";

static void detail_key_make(void)
{
    detail_key_ok = tss_create(&detail_key, free) == thrd_success;
}

/* This thread's buffer, made on first use; NULL when out of memory. */
static char *detail_buf(void)
{
    if (detail == NULL) {
        call_once(&detail_once, detail_key_make);
        char *b = calloc(1, HD_ERR_DETAIL_MAX);
        if (b != NULL && detail_key_ok) {
            tss_set(detail_key, b);
        }
        detail = b;
        detail_failed = b == NULL;
    }
    return detail;
}

const char *hdmlp_strerror(int code)
{
    switch (code) {
#define HDMLP_MSG_ENTRY(name, value, msg)                                                      \
    case (value):                                                                              \
        return msg;
        HDMLP_ERRNO_MAP(HDMLP_MSG_ENTRY)
#undef HDMLP_MSG_ENTRY
    default:
        return "unknown error";
    }
}

const char *hdmlp_err_name(int code)
{
    switch (code) {
#define HDMLP_NAME_ENTRY(name, value, msg)                                                     \
    case (value):                                                                              \
        return "HDMLP_" #name;
        HDMLP_ERRNO_MAP(HDMLP_NAME_ENTRY)
#undef HDMLP_NAME_ENTRY
    default:
        return "HDMLP_E_UNKNOWN";
    }
}

const char *hdmlp_last_error(void)
{
    return detail != NULL ? detail : detail_failed ? detail_lost : "";
}

void hd_clear_error(void)
{
    if (detail != NULL) {
        detail[0] = '\0';
    }
}

int hd_verr(int code, const char *fmt, va_list ap)
{
    char *b = detail_buf();
    if (b != NULL) {
        vsnprintf(b, HD_ERR_DETAIL_MAX, fmt, ap);
    }
    return code;
}

int hd_err(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    hd_verr(code, fmt, ap);
    va_end(ap);
    return code;
}

int hd_err_wrap(int code, const char *fmt, ...)
{
    char *b = detail_buf();
    if (b == NULL) {
        return code;
    }
    char old[HD_ERR_DETAIL_MAX];
    memcpy(old, b, sizeof(old));
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(b, HD_ERR_DETAIL_MAX, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < HD_ERR_DETAIL_MAX - 1) {
        size_t len = strnlen(old, sizeof(old) - 1);
        const size_t room = HD_ERR_DETAIL_MAX - 1 - (size_t)n;
        len = len < room ? len : room;
        memcpy(b + n, old, len);
        b[(size_t)n + len] = '\0';
    }
    return code;
}

int hd_errno_code(int err)
{
    switch (err) {
    case 0:
        return HDMLP_OK;
    case ENOENT:
    case ENOTDIR:
        return HDMLP_E_NOTFOUND;
    case EEXIST:
    case ENOTEMPTY:
        return HDMLP_E_EXISTS;
    case ENOMEM:
        return HDMLP_E_NOMEM;
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
        return HDMLP_E_NOSPC;
    case EMFILE:
    case ENFILE:
        return HDMLP_E_MFILE;
    case EINVAL:
        return HDMLP_E_INVAL;
    case EINTR:
        return HDMLP_E_INTERRUPTED;
    default:
        return HDMLP_E_IO;
    }
}

unsigned hdmlp_version_number(void) { return HDMLP_VERSION_NUMBER; }

const char *hdmlp_version_string(void)
{
#define HD_STR2(x) #x
#define HD_STR(x) HD_STR2(x)
    return HD_STR(HDMLP_VERSION_MAJOR) "." HD_STR(HDMLP_VERSION_MINOR) "." HD_STR(
        HDMLP_VERSION_PATCH);
#undef HD_STR
#undef HD_STR2
}
