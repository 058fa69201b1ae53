/* The error table, thread-local error detail, and errno mapping. */
#include "format.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define HD_ERR_DETAIL_MAX 1024

static _Thread_local char last_error[HD_ERR_DETAIL_MAX];

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

const char *hdmlp_last_error(void) { return last_error; }

void hd_clear_error(void) { last_error[0] = '\0'; }

int hd_verr(int code, const char *fmt, va_list ap)
{
    vsnprintf(last_error, sizeof(last_error), fmt, ap);
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
    char old[HD_ERR_DETAIL_MAX];
    memcpy(old, last_error, sizeof(old));
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(last_error, sizeof(last_error), fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof(last_error) - 1) {
        size_t len = strnlen(old, sizeof(old) - 1);
        const size_t room = sizeof(last_error) - 1 - (size_t)n;
        len = len < room ? len : room;
        memcpy(last_error + n, old, len);
        last_error[(size_t)n + len] = '\0';
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
