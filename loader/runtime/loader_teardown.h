/*
 * Reference count and teardown of the loader, source bytes per planned epoch, the
 * loader's first failure (loader_teardown.c).
 */
#ifndef HDMLP_LOADER_TEARDOWN_H
#define HDMLP_LOADER_TEARDOWN_H

#include "loader_core.h"

/* Drops a reference (lock held; released here) and frees the loader after the last. */
void loader_unref_unlock(struct hdmlp_loader *ld);
/* Adds bytes read from the dataset directory in planned epoch `epoch` (lock held). */
void loader_count_source(struct hdmlp_loader *ld, uint64_t epoch, uint64_t bytes);
/* Records the loader's first failure (code, detail) and returns it with hd_err (lock held). */
int loader_fail(struct hdmlp_loader *ld, int code, const char *detail);

#endif
