/*
 * The image pipeline's thread split (policy only; loader_image_pipe.c measures and applies
 * it). Each window (~200 ms) gives two signals: how long the active decode threads waited
 * for data while the decode queue had room (the I/O side is short), and how long the
 * consumer waited on a full queue (decoding is short). A clear verdict in two windows in a
 * row moves one thread; one noisy window moves nothing.
 */
#include "loader_image.h"

int image_balance(image_split *s, uint64_t starved_ns, uint64_t full_ns, uint64_t span_ns)
{
    if (span_ns == 0 || s->decode == 0) {
        return 0;
    }
    const double idle = (double)starved_ns / ((double)s->decode * (double)span_ns);
    const double full = (double)full_ns / (double)span_ns;
    int verdict = 0;
    if (idle > 0.25 && full < 0.1) {
        verdict = -1; /* decoders wait for data: more I/O */
    } else if (full > 0.25 && idle < 0.1) {
        verdict = 1; /* data waits for decoders: more decoding */
    }
    int moved = 0;
    if (verdict != 0 && verdict == s->verdict) {
        if (verdict < 0 && s->io < s->io_max && s->decode > 1) {
            s->io++;
            s->decode--;
            moved = -1;
        } else if (verdict > 0 && s->io > 1 && s->decode < s->decode_max) {
            s->io--;
            s->decode++;
            moved = 1;
        }
    }
    s->verdict = moved != 0 ? 0 : verdict;
    return moved;
}
