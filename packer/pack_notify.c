/*
 * How the packing library reports to its caller: cancellation, progress, warnings. Every
 * layer of the packer (scanners, codec, writer, output directory) calls these, never the
 * driver in pack_run.c; they only call the callbacks of the caller's pack_opts.
 */
#include "pack_internal.h"

#include <stdarg.h>
#include <stdio.h>

bool pack_cancelled(const pack_opts *o) { return o->cancel && o->cancel(o->cb_arg) != 0; }

void pack_report(const pack_opts *o, pack_phase phase, uint64_t samples_done,
                 uint64_t samples_total, uint64_t bytes_done, uint64_t bytes_total)
{
    if (o->progress) {
        const pack_progress p = {phase, samples_done, samples_total, bytes_done, bytes_total};
        o->progress(o->cb_arg, &p);
    }
}

void pack_warn(const pack_opts *o, const char *fmt, ...)
{
    if (!o->message) {
        return;
    }
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    o->message(o->cb_arg, msg);
}

#define SKIP_WARNINGS 5

void pack_skip(pack_ctx *ctx, pack_skip_reason reason, const char *fmt, ...)
{
    ctx->skipped[reason]++;
    const uint32_t warned = ctx->skip_warned[reason];
    if (warned > SKIP_WARNINGS || !ctx->o->message) {
        return;
    }
    ctx->skip_warned[reason]++;
    if (warned == SKIP_WARNINGS) {
        pack_warn(ctx->o, "further %s are not named (the summary counts them)",
                  pack_skip_reason_text(reason));
        return;
    }
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    ctx->o->message(ctx->o->cb_arg, msg);
}

const char *pack_skip_reason_text(int reason)
{
    switch (reason) {
    case PACK_SKIP_LINK_MISSING:
        return "symbolic links naming no member of the archive";
    case PACK_SKIP_LINK_DIR:
        return "symbolic links to a directory of the archive";
    case PACK_SKIP_LINK_LOOP:
        return "symbolic links in a loop";
    case PACK_SKIP_SPECIAL:
        return "special members (fifos, devices, sockets)";
    case PACK_SKIP_DATASET:
        return "hdmlp datasets (directories, or archive members)";
    case PACK_SKIP_OUTPUT:
        return "the output being replaced, inside an input";
    default:
        return "?";
    }
}

void pack_scan_tick(pack_ctx *ctx, uint64_t pending)
{
    const uint64_t bytes = ctx->raw_bytes + pending;
    if (ctx->n_items - ctx->last_progress_items >= 1024 ||
        bytes - ctx->last_progress_bytes >= (16u << 20)) {
        ctx->last_progress_items = ctx->n_items;
        ctx->last_progress_bytes = bytes;
        pack_report(ctx->o, PACK_PHASE_SCAN, ctx->n_items, 0, bytes, 0);
    }
}
