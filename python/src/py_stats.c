/* hdmlp_stats → dict, keyed by the struct's field names. */
#include "py_internal.h"

static int put_u64(PyObject *d, const char *key, uint64_t v)
{
    PyObject *o = PyLong_FromUnsignedLongLong(v);
    if (o == NULL) {
        return -1;
    }
    const int rc = PyDict_SetItemString(d, key, o);
    Py_DECREF(o);
    return rc;
}

PyObject *py_stats_dict(const hdmlp_stats *stats)
{
    const hdmlp_stats s = *stats;
    PyObject *d = PyDict_New();
    if (d == NULL) {
        return NULL;
    }
#define PUT(f)                                                                                 \
    if (put_u64(d, #f, s.f) < 0) {                                                             \
        Py_DECREF(d);                                                                          \
        return NULL;                                                                           \
    }
    PUT(samples)
    PUT(batches)
    PUT(epochs)
    PUT(requests)
    PUT(hits)
    PUT(misses)
    PUT(chunk_loads)
    PUT(read_ops)
    PUT(bytes_read)
    PUT(bytes_delivered)
    PUT(stored_bytes_delivered)
    PUT(samples_filled)
    PUT(whole_refills)
    PUT(ranged_refills)
    PUT(peak_memory_bytes)
    PUT(memory_budget)
    PUT(stall_ns)
    const size_t nh = sizeof(s.fill_hist) / sizeof(s.fill_hist[0]);
    PyObject *hist = PyList_New((Py_ssize_t)nh);
    for (size_t i = 0; hist != NULL && i < nh; i++) {
        PyObject *o = PyLong_FromUnsignedLongLong(s.fill_hist[i]);
        if (o == NULL) {
            Py_CLEAR(hist);
            break;
        }
        PyList_SET_ITEM(hist, (Py_ssize_t)i, o);
    }
    if (hist == NULL || PyDict_SetItemString(d, "fill_hist", hist) < 0) {
        Py_XDECREF(hist);
        Py_DECREF(d);
        return NULL;
    }
    Py_DECREF(hist);
    PUT(abstract_chunks)
    PUT(chunk_groups)
    PUT(remote_requests)
    PUT(remote_hits)
    PUT(prefetch_sent)
    PUT(answers_sent)
    PUT(net_bytes_out)
    PUT(net_bytes_in)
    PUT(net_bytes_lent)
    PUT(source_bytes)
    PUT(ram_cache_bytes)
    PUT(ssd_cache_bytes)
    PUT(ram_cached_chunks)
    PUT(ssd_staged_chunks)
    PUT(tier_fallbacks)
    PUT(source_op_ns)
    PUT(source_bytes_per_s)
    PUT(ssd_op_ns)
    PUT(ssd_bytes_per_s)
    PUT(calibrated)
    PUT(skipped_samples)
    PUT(cost_learning)
    PUT(cost_reads)
    PUT(cost_changes)
    PUT(cost_explorations)
    PUT(source_op_ns_start)
    PUT(source_bytes_per_s_start)
    PUT(direct_io)
    PUT(page_cache_room)
    PUT(budget_read_buffers)
    PUT(budget_batches)
    PUT(budget_remote)
    PUT(budget_ram_cache)
    PUT(budget_lookahead)
    PUT(budget_slots)
    PUT(peers_same_host)
    PUT(images_decoded)
    PUT(decode_failures)
    PUT(dct_scaled)
    PUT(decode_busy_ns)
    PUT(decode_rate)
    PUT(read_rate)
    PUT(io_threads_active)
    PUT(decode_threads_active)
    PUT(balance_moves)
    PUT(board_active)
    PUT(board_windows)
    PUT(board_hold_windows)
    PUT(board_starved_windows)
    PUT(board_idle_windows)
    PUT(board_lead_samples)
    PUT(board_lent_peak)
    PUT(board_borrowed_peak)
    PUT(node_stall_max_ns)
    PUT(node_stall_min_ns)
    PUT(budget_images)
    PUT(refills_in_flight_peak)
    PUT(cost_replans)
    PUT(remote_peak)
    PUT(order)
    PUT(pool_unit)
    PUT(policy)
    PUT(memory_configured)
    PUT(metadata_bytes)
    PUT(index_bytes)
    PUT(budget_sample_tables)
#undef PUT
    return d;
}
