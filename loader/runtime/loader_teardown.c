/*
 * The loader object's lowest layer, used by every other file: its reference count and
 * teardown (the last of the consumer, the API and released batches frees it, and gives the
 * sample memory back to the system), and the bytes read from the dataset per planned epoch,
 * and the loader's first failure.
 */
#include "loader_teardown.h"
#include "loader_core.h"

#include <stdio.h>

static void loader_destroy(hdmlp_loader *ld)
{
    pthread_mutex_destroy(&ld->lock);
    cost_clock_destroy(&ld->src_clock);
    cost_clock_destroy(&ld->ssd_clock);
    pthread_cond_destroy(&ld->work_cv);
    pthread_cond_destroy(&ld->ready_cv);
    config_clear(&ld->cfg);
    /* Gives the pooled sample buffers back (and malloc's memory to the system) now, or as
     * the last batches still held release theirs. */
    sample_pool_close(ld->pool);
    hd_free(ld);
}

void loader_unref_unlock(hdmlp_loader *ld)
{
    const unsigned left = --ld->refs;
    pthread_mutex_unlock(&ld->lock);
    if (left == 0) {
        loader_destroy(ld);
    }
}

void loader_count_source(hdmlp_loader *ld, uint64_t epoch, uint64_t bytes)
{
    ld->st.source_bytes += bytes;
    if (epoch >= ld->epoch_source_cap) {
        uint64_t cap = ld->epoch_source_cap ? ld->epoch_source_cap : 16;
        while (cap <= epoch) {
            cap *= 2;
        }
        uint64_t *a = hd_realloc(ld->epoch_source, cap * sizeof(uint64_t));
        if (a == NULL) {
            return; /* the total above still counts */
        }
        for (uint64_t i = ld->epoch_source_cap; i < cap; i++) {
            a[i] = 0;
        }
        ld->epoch_source = a;
        ld->epoch_source_cap = cap;
    }
    ld->epoch_source[epoch] += bytes;
    if (epoch + 1 > ld->epoch_source_known) {
        ld->epoch_source_known = epoch + 1;
    }
}

int loader_fail(hdmlp_loader *ld, int code, const char *detail)
{
    if (ld->failed == 0) {
        ld->failed = code;
        snprintf(ld->fail_detail, sizeof(ld->fail_detail), "%s", detail);
    }
    return hd_err(ld->failed, "%s", ld->fail_detail);
}
