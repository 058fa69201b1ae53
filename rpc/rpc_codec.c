/* peer_msg <-> protobuf-c bytes, with validation of everything received (rpc_codec.h). */
#include "rpc_codec.h"

#include "format.h"
#include "hdmlp.pb-c.h"

#include <stdio.h>
#include <string.h>

const char *rpc_kind_name(uint32_t kind)
{
    switch (kind) {
    case PEER_REQUEST:
        return "REQUEST";
    case PEER_SAMPLE:
        return "SAMPLE";
    case PEER_DONE:
        return "DONE";
    default:
        return "?";
    }
}

/* ---- allocation through the library's wrappers ---------------------------------------- */

static void *pb_alloc(void *data, size_t size)
{
    (void)data;
    return hd_malloc(size != 0 ? size : 1);
}

static void pb_free(void *data, void *p)
{
    (void)data;
    hd_free(p);
}

static ProtobufCAllocator pb_allocator = {pb_alloc, pb_free, NULL};

/* ---- sending -------------------------------------------------------------------------- */

int rpc_msg_check_send(const peer_msg *m, uint32_t world, uint32_t self, uint64_t max_data)
{
    if (m == NULL) {
        return hd_err(HDMLP_E_INVAL, "rpc: send: NULL message");
    }
    if (m->kind != PEER_REQUEST && m->kind != PEER_SAMPLE && m->kind != PEER_DONE) {
        return hd_err(HDMLP_E_INVAL, "rpc: send: unknown message kind %u", m->kind);
    }
    if (m->to >= world || m->to == self) {
        return hd_err(HDMLP_E_INVAL, "rpc: send: %s to rank %u (this is rank %u of %u)",
                      rpc_kind_name(m->kind), m->to, self, world);
    }
    if (m->kind == PEER_SAMPLE) {
        if (m->size > max_data) {
            return hd_err(HDMLP_E_RANGE,
                          "rpc: send: sample %llu has %llu bytes, above the %llu-byte limit",
                          (unsigned long long)m->index, (unsigned long long)m->size,
                          (unsigned long long)max_data);
        }
        if (m->size > 0 && m->data == NULL) {
            return hd_err(HDMLP_E_INVAL, "rpc: send: sample %llu: NULL data of %llu bytes",
                          (unsigned long long)m->index, (unsigned long long)m->size);
        }
        if (m->prefetch > 1) {
            return hd_err(HDMLP_E_INVAL, "rpc: send: prefetch must be 0 or 1, got %u",
                          m->prefetch);
        }
    }
    return HDMLP_OK;
}

int rpc_encode_msg(const peer_msg *m, uint8_t **out, size_t *len)
{
    Hdmlp__Msg pm = HDMLP__MSG__INIT;
    pm.has_kind = 1;
    pm.kind = m->kind;
    if (m->kind == PEER_REQUEST || m->kind == PEER_SAMPLE) {
        pm.has_epoch = pm.has_position = pm.has_group = pm.has_slot = 1;
        pm.epoch = m->epoch;
        pm.position = m->position;
        pm.group = m->group;
        pm.slot = m->slot;
    }
    if (m->kind == PEER_REQUEST) {
        pm.has_credit = 1;
        pm.credit = m->credit;
    }
    if (m->kind == PEER_SAMPLE) {
        pm.has_prefetch = pm.has_index = pm.has_label = pm.has_size = pm.has_data = 1;
        pm.prefetch = m->prefetch != 0;
        pm.index = m->index;
        pm.label = m->label;
        pm.size = m->size;
        pm.data.len = (size_t)m->size;
        pm.data.data = (uint8_t *)m->data; /* only read by pack */
    }
    Hdmlp__Msg *one = &pm;
    Hdmlp__Envelope env = HDMLP__ENVELOPE__INIT;
    env.n_msgs = 1;
    env.msgs = &one;
    const size_t n = hdmlp__envelope__get_packed_size(&env);
    uint8_t *buf = hd_malloc(n);
    if (buf == NULL) {
        *out = NULL;
        *len = 0;
        return hd_err(HDMLP_E_NOMEM, "rpc: out of memory packing a %zu-byte message", n);
    }
    *len = hdmlp__envelope__pack(&env, buf);
    *out = buf;
    return HDMLP_OK;
}

size_t rpc_encode_header(uint64_t token, uint32_t from, uint32_t to, uint8_t *buf)
{
    Hdmlp__Envelope env = HDMLP__ENVELOPE__INIT;
    env.has_token = env.has_from = env.has_to = 1;
    env.token = token;
    env.from = from;
    env.to = to;
    return hdmlp__envelope__pack(&env, buf);
}

/* ---- receiving: structural scan of the wire format --------------------------------------
 * Before protobuf-c allocates anything, walk the bytes: known fields only, each with its
 * wire type, no field twice (except `msgs`), varints in range for their type, message
 * count bounded. protobuf-c then does the typed unpack of bytes known to be sane. */

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

typedef struct scan {
    const uint8_t *p, *end;
} scan;

static int get_varint(scan *s, uint64_t *v)
{
    uint64_t r = 0;
    for (unsigned shift = 0; shift < 70; shift += 7) {
        if (s->p >= s->end) {
            return 0;
        }
        const uint8_t b = *s->p++;
        if (shift == 63 && b > 1) {
            return 0; /* more than 64 bits */
        }
        r |= (uint64_t)(b & 0x7f) << shift;
        if ((b & 0x80) == 0) {
            *v = r;
            return 1;
        }
    }
    return 0;
}

/* Field rules: wire type and the largest varint value (0 = any). */
typedef struct field_rule {
    const char *name;
    int wt;
    uint64_t max;
} field_rule;

static const field_rule msg_rules[] = {
    {NULL, -1, 0},
    {"kind", WT_VARINT, UINT32_MAX},
    {"epoch", WT_VARINT, 0},
    {"position", WT_VARINT, 0},
    {"group", WT_VARINT, 0},
    {"slot", WT_VARINT, UINT32_MAX},
    {"prefetch", WT_VARINT, 1},
    {"credit", WT_VARINT, 0},
    {"index", WT_VARINT, 0},
    {"label", WT_VARINT, UINT32_MAX},
    {"size", WT_VARINT, 0},
    {"data", WT_LEN, 0},
};

static const field_rule env_rules[] = {
    {NULL, -1, 0},
    {"token", WT_I64, 0},
    {"from", WT_VARINT, UINT32_MAX},
    {"to", WT_VARINT, UINT32_MAX},
    {"msgs", WT_LEN, 0},
};

/* Scans one message body [p, end) against rules[1..n_rules). `repeated` is the one field
 * number allowed more than once (0 = none): *n_rep counts its occurrences and `each` is
 * called with the bytes of each. */
static int scan_fields(const uint8_t *p, const uint8_t *end, const field_rule *rules,
                       unsigned n_rules, unsigned repeated, const char *what, size_t *n_rep,
                       int (*each)(void *arg, const uint8_t *sp, size_t sl), void *arg)
{
    scan s = {p, end};
    uint32_t seen = 0;
    while (s.p < s.end) {
        uint64_t key, v;
        if (!get_varint(&s, &key)) {
            return hd_err(HDMLP_E_CORRUPT, "rpc: %s: truncated field key", what);
        }
        const uint64_t field = key >> 3;
        const int wt = (int)(key & 7);
        if (field == 0 || field >= n_rules) {
            return hd_err(HDMLP_E_CORRUPT, "rpc: %s: unknown field %llu", what,
                          (unsigned long long)field);
        }
        const field_rule *r = &rules[field];
        if (wt != r->wt) {
            return hd_err(HDMLP_E_CORRUPT, "rpc: %s: field %s has wire type %d", what, r->name,
                          wt);
        }
        if ((unsigned)field != repeated) {
            if (seen & (1u << field)) {
                return hd_err(HDMLP_E_CORRUPT, "rpc: %s: field %s twice", what, r->name);
            }
            seen |= 1u << field;
        }
        switch (wt) {
        case WT_VARINT:
            if (!get_varint(&s, &v)) {
                return hd_err(HDMLP_E_CORRUPT, "rpc: %s: truncated field %s", what, r->name);
            }
            if (r->max != 0 && v > r->max) {
                return hd_err(HDMLP_E_CORRUPT, "rpc: %s: field %s = %llu out of range", what,
                              r->name, (unsigned long long)v);
            }
            break;
        case WT_I64:
            if (s.end - s.p < 8) {
                return hd_err(HDMLP_E_CORRUPT, "rpc: %s: truncated field %s", what, r->name);
            }
            s.p += 8;
            break;
        default: /* WT_LEN */
            if (!get_varint(&s, &v) || v > (uint64_t)(s.end - s.p)) {
                return hd_err(HDMLP_E_CORRUPT, "rpc: %s: field %s overruns the message", what,
                              r->name);
            }
            if ((unsigned)field == repeated) {
                if (++*n_rep > RPC_MAX_MSGS) {
                    return hd_err(HDMLP_E_CORRUPT, "rpc: %s: more than %u messages", what,
                                  RPC_MAX_MSGS);
                }
                const int rc = each(arg, s.p, (size_t)v);
                if (rc != HDMLP_OK) {
                    return rc;
                }
            }
            s.p += v;
            break;
        }
    }
    return HDMLP_OK;
}

static int scan_msg(void *arg, const uint8_t *p, size_t len)
{
    size_t *index = arg;
    char what[40];
    snprintf(what, sizeof what, "message %zu", (*index)++);
    return scan_fields(p, p + len, msg_rules, sizeof msg_rules / sizeof msg_rules[0], 0, what,
                       NULL, NULL, NULL);
}

/* ---- receiving: semantic checks -------------------------------------------------------- */

static int check_msg(const rpc_check *chk, size_t i, const Hdmlp__Msg *pm, peer_msg *m)
{
    if (!pm->has_kind) {
        return hd_err(HDMLP_E_CORRUPT, "rpc: message %zu: missing field kind", i);
    }
    const uint32_t kind = pm->kind;
    if (kind != PEER_REQUEST && kind != PEER_SAMPLE && kind != PEER_DONE) {
        return hd_err(HDMLP_E_CORRUPT, "rpc: message %zu: unknown kind %u", i, kind);
    }
    /* Which fields each kind must carry (and no others). */
    const int loc = kind == PEER_REQUEST || kind == PEER_SAMPLE;
    const int req = kind == PEER_REQUEST;
    const int smp = kind == PEER_SAMPLE;
    const struct {
        const char *name;
        int has, want;
    } f[] = {
        {"epoch", pm->has_epoch, loc},   {"position", pm->has_position, loc},
        {"group", pm->has_group, loc},   {"slot", pm->has_slot, loc},
        {"credit", pm->has_credit, req}, {"prefetch", pm->has_prefetch, smp},
        {"index", pm->has_index, smp},   {"label", pm->has_label, smp},
        {"size", pm->has_size, smp},     {"data", pm->has_data, smp},
    };
    for (size_t k = 0; k < sizeof f / sizeof f[0]; k++) {
        if ((f[k].has != 0) != (f[k].want != 0)) {
            return hd_err(HDMLP_E_CORRUPT, "rpc: message %zu (%s): %s field %s", i,
                          rpc_kind_name(kind), f[k].want ? "missing" : "unexpected", f[k].name);
        }
    }
    if (smp) {
        if (pm->size != pm->data.len) {
            return hd_err(
                HDMLP_E_CORRUPT, "rpc: message %zu (SAMPLE %llu): size %llu but %zu data bytes",
                i, (unsigned long long)pm->index, (unsigned long long)pm->size, pm->data.len);
        }
        if (pm->size > chk->max_data) {
            return hd_err(HDMLP_E_RANGE,
                          "rpc: message %zu (SAMPLE %llu): %llu bytes, above the %llu-byte "
                          "limit",
                          i, (unsigned long long)pm->index, (unsigned long long)pm->size,
                          (unsigned long long)chk->max_data);
        }
    }
    memset(m, 0, sizeof *m);
    m->kind = kind;
    m->epoch = pm->epoch;
    m->position = pm->position;
    m->group = pm->group;
    m->slot = pm->slot;
    m->prefetch = pm->prefetch ? 1 : 0;
    m->credit = pm->credit;
    m->index = pm->index;
    m->label = pm->label;
    m->data = pm->data.data;
    m->size = pm->data.len;
    return HDMLP_OK;
}

int rpc_decode(const rpc_check *chk, const uint8_t *buf, size_t len, rpc_envelope *out)
{
    memset(out, 0, sizeof *out);
    if (len > RPC_ENVELOPE_MAX(chk->max_data)) {
        return hd_err(HDMLP_E_RANGE, "rpc: envelope of %zu bytes, above the %llu-byte limit",
                      len, (unsigned long long)RPC_ENVELOPE_MAX(chk->max_data));
    }
    if (buf == NULL && len > 0) {
        return hd_err(HDMLP_E_INVAL, "rpc: decode: NULL buffer");
    }
    size_t n_msgs = 0, index = 0;
    int rc = scan_fields(buf, buf + len, env_rules, sizeof env_rules / sizeof env_rules[0], 4,
                         "envelope", &n_msgs, scan_msg, &index);
    if (rc != HDMLP_OK) {
        return rc;
    }
    Hdmlp__Envelope *env = hdmlp__envelope__unpack(&pb_allocator, len, buf);
    if (env == NULL) {
        /* The scan accepted it, so this is allocation failure (or a protobuf-c rule the
         * scan does not know). */
        return hd_err(HDMLP_E_CORRUPT, "rpc: envelope of %zu bytes does not unpack", len);
    }
    if (!env->has_token || !env->has_from || !env->has_to) {
        rc = hd_err(HDMLP_E_CORRUPT, "rpc: envelope: missing field %s",
                    !env->has_token  ? "token"
                    : !env->has_from ? "from"
                                     : "to");
        goto fail;
    }
    if (env->from >= chk->world || env->from == chk->self) {
        rc = hd_err(HDMLP_E_CORRUPT, "rpc: envelope from rank %u (this is rank %u of %u)",
                    env->from, chk->self, chk->world);
        goto fail;
    }
    if (env->to != chk->self) {
        rc = hd_err(HDMLP_E_CORRUPT, "rpc: envelope for rank %u delivered to rank %u", env->to,
                    chk->self);
        goto fail;
    }
    if (env->token != chk->token) {
        rc = hd_err(HDMLP_E_PEER, "rpc: envelope from rank %u carries another job's token",
                    env->from);
        goto fail;
    }
    peer_msg *msgs = NULL;
    if (env->n_msgs > 0) {
        msgs = hd_calloc(env->n_msgs, sizeof *msgs);
        if (msgs == NULL) {
            rc = hd_err(HDMLP_E_NOMEM, "rpc: out of memory decoding %zu messages", env->n_msgs);
            goto fail;
        }
    }
    for (size_t i = 0; i < env->n_msgs; i++) {
        rc = check_msg(chk, i, env->msgs[i], &msgs[i]);
        if (rc != HDMLP_OK) {
            hd_free(msgs);
            goto fail;
        }
        msgs[i].from = env->from;
        msgs[i].to = env->to;
        msgs[i].token = env->token;
    }
    out->token = env->token;
    out->from = env->from;
    out->to = env->to;
    out->n = env->n_msgs;
    out->msgs = msgs;
    out->pb = env;
    return HDMLP_OK;
fail:
    hdmlp__envelope__free_unpacked(env, &pb_allocator);
    return rc;
}

void rpc_envelope_free(rpc_envelope *e)
{
    if (e != NULL) {
        hd_free(e->msgs);
        if (e->pb != NULL) {
            hdmlp__envelope__free_unpacked(e->pb, &pb_allocator);
        }
        memset(e, 0, sizeof *e);
    }
}
