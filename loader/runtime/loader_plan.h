/*
 * Planning (loader_plan.c): the scheduler run ahead of the consumer into refill jobs and
 * outboxes, sample buffers, and the cost model's learning. Lock held unless said.
 */
#ifndef HDMLP_LOADER_PLAN_H
#define HDMLP_LOADER_PLAN_H

#include "loader_core.h"

/* A completed read (whole chunk or ranges) of `ops` operations and `bytes` from the source or
 * the SSD tier took `service_us` of the storage's time: the cost model learns from it (lock
 * held). */
void loader_learn(struct hdmlp_loader *ld, int tier_kind, uint32_t ops, uint64_t bytes,
                  double service_us);

int plan_advance(struct hdmlp_loader *ld);
int plan_stuck(const struct hdmlp_loader *ld);
void sample_free(ld_sample *s);
/* s->data for s->size bytes: from the transport's shared sample memory when it has room
 * (lock held), else the loader's pool (loader_pool.h). HDMLP_E_NOMEM. */
int sample_data_new(struct hdmlp_loader *ld, ld_sample *s);
/* Gives s->data back where it came from; s->data NULL after. */
void sample_data_free(ld_sample *s);
void job_free(ld_job *job);
uint32_t plan_owner(const struct hdmlp_loader *ld, uint64_t group);
/* A refill job for the samples at in-chunk `slots` (increasing) of chunk, sized from
 * `table` (the chunk's, from the scheduler's step) or, when NULL, from planning's table
 * source; prepared (records and read plan) at once when that view has offsets, else left
 * to the I/O thread (plan_records, plan_prepared). Not queued. */
int plan_job(struct hdmlp_loader *ld, uint64_t chunk, const fmt_table *table,
             const uint32_t *slots, uint32_t n, ld_job **out);
/* Lock NOT held (an I/O thread, before reading an unprepared job): the job's records from
 * job_tables (a checked view, read into buf: cap ≥ job_tables.scratch), each sample's
 * stored size and label set from them. HDMLP_E_CORRUPT naming the chunk and sample when a
 * record's raw size is not the one planned (the table changed since), else the table
 * source's errors. */
int plan_records(struct hdmlp_loader *ld, ld_job *job, void *buf, size_t cap);
/* Lock held: the read plan of a job plan_records filled, the job then prepared; its reads
 * counted (plan_count_reads). Out of memory: HDMLP_E_NOMEM, the job not prepared. */
int plan_prepared(struct hdmlp_loader *ld, ld_job *job);
/* Counts a prepared, queued job's planned reads in the stats (read ops and bytes, and for a
 * miss a whole or ranged refill); nothing for an unprepared one (counted when prepared). */
void plan_count_reads(struct hdmlp_loader *ld, const ld_job *job);
/* Plans a queued auto-refill job again with the model's current estimate when the model
 * has moved since it was planned (an I/O thread calls it when it takes the job): plans run
 * ahead of the reads, and the first ones would otherwise keep the start's guess. The samples
 * do not change, only the read shape; out of memory, the job keeps its plan. */
void plan_refresh(struct hdmlp_loader *ld, ld_job *job);
/* The sample at position pos of plan_epoch's order (positions asked in increasing order
 * run through the sampler SAMPLER_RUN at a time). */
uint64_t plan_sample_at(struct hdmlp_loader *ld, uint64_t pos);
/* Bytes a job adds to the budget (its samples). */
uint64_t job_bytes(const ld_job *job);
/* Queues a job for the workers (lock held; charge it first). */
void plan_enqueue(struct hdmlp_loader *ld, ld_job *job);
/* Appends a decision for peer `peer` to its outbox, which the exchange sends from. */
int plan_outbox_push(struct hdmlp_loader *ld, uint32_t peer, const ld_out *o);

#endif
