/*
 * Test images: deterministic pixel patterns and their JPEG (libjpeg-turbo) and PNG (libspng)
 * encodings, and small image datasets packed with the packer library. Not part of the
 * library.
 */
#ifndef HDMLP_TESTIMG_H
#define HDMLP_TESTIMG_H

#include <stddef.h>
#include <stdint.h>

/* A w × h × c (1 or 3) image: smooth gradients, a few edges and noise from seed (malloc'd). */
uint8_t *testimg_pattern(uint32_t w, uint32_t h, uint32_t c, uint64_t seed);
/* Encodes px (w × h × c) as JPEG at quality q (4:2:0 for colour) / as an 8-bit PNG; the
 * buffer is malloc'd. 0 or -1. */
int testimg_jpeg(const uint8_t *px, uint32_t w, uint32_t h, uint32_t c, int q, uint8_t **out,
                 size_t *len);
int testimg_png(const uint8_t *px, uint32_t w, uint32_t h, uint32_t c, uint8_t **out,
                size_t *len);
/* Decodes with the libraries themselves (reference): RGB or gray, malloc'd, w × h set.
 * denom > 1: TurboJPEG's 1/denom scaled decode. 0 or -1. */
int testimg_ref_jpeg(const uint8_t *buf, size_t len, uint32_t c, uint32_t denom, uint8_t **px,
                     uint32_t *w, uint32_t *h);
int testimg_ref_png(const uint8_t *buf, size_t len, uint8_t **px, uint32_t *w, uint32_t *h);

/* Writes n images into dir/class-<i % labels>/img-<i>.{jpg,png} (even i JPEG, odd PNG) of
 * sides w_i × h_i varying around w × h (fixed when exact is set), pattern seed i, and packs
 * them into out (K = k) with the packer library. Returns 0 or -1 (message on stderr). */
int testimg_pack(const char *dir, const char *out, uint32_t n, uint32_t labels, uint32_t w,
                 uint32_t h, int exact, uint32_t k);

#endif
