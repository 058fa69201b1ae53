/* One whole read of a file's range (below every file of the dataset that reads one: the
 * segments, the index, the tables and the keys). */
#include "loader_dataset_private.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

int ds_fd_read(int fd, void *buf, uint64_t len, uint64_t off, const char *path,
               const char *what)
{
    uint8_t *p = buf;
    for (uint64_t done = 0; done < len;) {
        const uint64_t want = len - done < ((uint64_t)1 << 30) ? len - done : (uint64_t)1 << 30;
        const ssize_t r = pread(fd, p + done, (size_t)want, (off_t)(off + done));
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            const int err = errno;
            return hd_err(hd_errno_code(err),
                          "%s: %s: read of %llu bytes at offset %llu failed: %s", path, what,
                          (ull)len, (ull)off, strerror(err));
        }
        if (r == 0) {
            return hd_err(
                HDMLP_E_CORRUPT,
                "%s: %s: unexpected end of file at offset %llu (truncated after open?)", path,
                what, (ull)(off + done));
        }
        done += (uint64_t)r;
    }
    return HDMLP_OK;
}
