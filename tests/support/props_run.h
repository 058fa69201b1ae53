/*
 * Running the loader property tests' cases (test_loader_props*.c): the loader_props suite
 * and its temporary dataset directories, each case's dataset and budget (from the smallest
 * the loader accepts to more than the dataset), a loader run to the end with everything it
 * delivered recorded, and the checkers, which see only the recorded run.
 */
#ifndef HDMLP_TEST_PROPS_RUN_H
#define HDMLP_TEST_PROPS_RUN_H

#include "hdmlp.h"
#include "support/props_case.h"
#include "support/testds.h"

#include <stddef.h>
#include <stdint.h>

/* Removes the temporary datasets made so far (also after each test). */
void remove_tmp_dirs(void);
/* Writes the case's dataset into a fresh directory and opens it. */
hdmlp_dataset *make_dataset(const testds_spec *spec, char *dir, size_t cap);
/* The case's budget: the minimum the loader accepts, log-uniform between it and "more
 * than the dataset", or more than the dataset: the minimum (which covers the loader's
 * fixed reserve for read buffers and batches) plus twice the raw and stored bytes. */
uint64_t case_budget(hdmlp_dataset *ds, const lcase *c);

typedef struct run_out {
    uint64_t n;    /* samples in the dataset */
    uint64_t *seq; /* delivered indices, in order */
    uint64_t n_seq, cap_seq;
    uint32_t *bsize; /* per batch: size, epoch */
    uint64_t *bepoch;
    uint64_t n_batches, cap_batches;
    uint64_t bytes_delivered;
    uint64_t stored_delivered;
    uint64_t bad_views; /* views with a wrong size, label or content */
    char first_bad[320];
    uint64_t slot_checks;    /* epoch boundaries where the slot hook was read */
    uint64_t slots_boundary; /* max slots occupied at those boundaries */
    uint64_t ahead_boundary; /* max requests planned into the next epoch at a boundary */
    uint64_t slots_end;      /* slots occupied after HDMLP_END */
    int rc;                  /* status that ended the run (HDMLP_END expected) */
    char rc_detail[512];
    int rc_again;       /* status of one more hdmlp_loader_next after it */
    int again_out_null; /* whether that call left *out NULL */
    int end_out_null;   /* whether the ending call left *out NULL */
    hdmlp_stats st;
    uint64_t budget;
    hdmlp_engine engine;
} run_out;

void run_free(run_out *r);
/* Checks one view against the dataset's metadata and testds's deterministic content:
 * 1, or 0 with the reason in why. */
int view_ok(hdmlp_dataset *ds, const testds_spec *spec, const hdmlp_sample_view *v,
            uint8_t *scratch, char *why, size_t cap);
/* Appends a delivered index, and a batch's size and epoch, to r. */
void push_seq(run_out *r, uint64_t x);
void push_batch(run_out *r, uint32_t size, uint64_t epoch);
/* Samples a full epoch delivers. */
uint64_t per_epoch(uint64_t n, uint32_t batch, int drop_last);
/* Runs the case's loader to HDMLP_END (or an error) with the given budget, engine and
 * thread count. Releases each batch before asking for the next. When check_boundaries is
 * set (lookahead 1, drop_last off), reads the slot hook after each epoch's last batch. */
void run_loader(hdmlp_dataset *ds, const lcase *c, uint64_t budget, hdmlp_engine engine,
                int check_boundaries, run_out *r);

/* Exactly-once: each epoch (a run of batches with the same epoch number) holds every
 * sample of 0..n-1 at most once, and exactly `expect` distinct samples. Returns 1 or
 * writes the first violation into why. */
int check_exactly_once(const run_out *r, uint64_t expect, uint64_t epochs, char *why,
                       size_t cap);
/* Batch structure: epochs 0, 1, 2, ... in order; every batch of an epoch has `batch`
 * samples except the last, which has the remainder (never with drop_last). */
int check_batches(const run_out *r, uint32_t batch, int drop_last, uint64_t epochs, char *why,
                  size_t cap);

#endif
