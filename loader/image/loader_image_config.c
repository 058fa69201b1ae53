/* The image pipeline's configuration: a value object with range-checked setters. */
#include "loader_image.h"

#include "format.h"

#include <math.h>
#include <string.h>

static void image_defaults(struct hdmlp_image_config *ic)
{
    memset(ic, 0, sizeof(*ic));
    ic->height = 224;
    ic->width = 224;
    ic->mode = HDMLP_IMAGE_TRAIN;
    ic->scale_min = 0.08;
    ic->scale_max = 1.0;
    ic->ratio_min = 3.0 / 4.0;
    ic->ratio_max = 4.0 / 3.0;
    ic->crop_fraction = 0.875;
    ic->flip = -1.0;
    ic->layout = HDMLP_LAYOUT_NHWC;
    ic->dtype = HDMLP_DTYPE_UINT8;
    for (int i = 0; i < 3; i++) {
        ic->mean[i] = 0.0f;
        ic->std[i] = 1.0f;
    }
    ic->channels = 3;
    ic->decode_threads = 0;
    ic->prefetch = 2;
    ic->dct_scaling = 1;
    ic->fast_decode = 0;
}

double image_flip_prob(const struct hdmlp_image_config *ic)
{
    if (ic->flip >= 0.0) {
        return ic->flip;
    }
    return ic->mode == HDMLP_IMAGE_TRAIN ? 0.5 : 0.0;
}

size_t image_elem_size(const struct hdmlp_image_config *ic)
{
    return ic->dtype == HDMLP_DTYPE_FLOAT32 ? sizeof(float) : 1;
}

uint64_t image_out_bytes(const struct hdmlp_image_config *ic)
{
    return (uint64_t)ic->height * ic->width * ic->channels * image_elem_size(ic);
}

int hdmlp_image_config_create(hdmlp_image_config **out)
{
    if (out == NULL) {
        return hd_err(HDMLP_E_INVAL, "image config: out is NULL");
    }
    *out = hd_calloc(1, sizeof(**out));
    if (*out == NULL) {
        return hd_err(HDMLP_E_NOMEM, "image config: out of memory");
    }
    image_defaults(*out);
    return HDMLP_OK;
}

void hdmlp_image_config_free(hdmlp_image_config *ic) { hd_free(ic); }

#define CHECK_IC(ic)                                                                           \
    do {                                                                                       \
        if ((ic) == NULL) {                                                                    \
            return hd_err(HDMLP_E_INVAL, "image config is NULL");                              \
        }                                                                                      \
    } while (0)

int hdmlp_image_config_set_size(hdmlp_image_config *ic, uint32_t height, uint32_t width)
{
    CHECK_IC(ic);
    if (height < 1 || height > 8192 || width < 1 || width > 8192) {
        return hd_err(HDMLP_E_INVAL, "image size: %u x %u is outside 1..8192 per side", height,
                      width);
    }
    ic->height = height;
    ic->width = width;
    return HDMLP_OK;
}

int hdmlp_image_config_set_mode(hdmlp_image_config *ic, hdmlp_image_mode mode)
{
    CHECK_IC(ic);
    if (mode != HDMLP_IMAGE_TRAIN && mode != HDMLP_IMAGE_VAL) {
        return hd_err(HDMLP_E_INVAL, "image mode: %d is neither TRAIN (0) nor VAL (1)",
                      (int)mode);
    }
    ic->mode = mode;
    return HDMLP_OK;
}

int hdmlp_image_config_set_scale(hdmlp_image_config *ic, double min, double max)
{
    CHECK_IC(ic);
    if (!(min > 0.0) || !(min <= max) || !(max <= 1.0)) {
        return hd_err(HDMLP_E_INVAL, "image scale: %g .. %g is not within 0 < min <= max <= 1",
                      min, max);
    }
    ic->scale_min = min;
    ic->scale_max = max;
    return HDMLP_OK;
}

int hdmlp_image_config_set_ratio(hdmlp_image_config *ic, double min, double max)
{
    CHECK_IC(ic);
    if (!(min > 0.0) || !(min <= max) || !(max <= 100.0)) {
        return hd_err(HDMLP_E_INVAL,
                      "image ratio: %g .. %g is not within 0 < min <= max <= 100", min, max);
    }
    ic->ratio_min = min;
    ic->ratio_max = max;
    return HDMLP_OK;
}

int hdmlp_image_config_set_crop_fraction(hdmlp_image_config *ic, double f)
{
    CHECK_IC(ic);
    if (!(f > 0.0) || !(f <= 1.0)) {
        return hd_err(HDMLP_E_INVAL, "image crop fraction: %g is not within (0, 1]", f);
    }
    ic->crop_fraction = f;
    return HDMLP_OK;
}

int hdmlp_image_config_set_flip(hdmlp_image_config *ic, double p)
{
    CHECK_IC(ic);
    if (!(p >= 0.0) || !(p <= 1.0)) {
        return hd_err(HDMLP_E_INVAL, "image flip: probability %g is not within [0, 1]", p);
    }
    ic->flip = p;
    return HDMLP_OK;
}

int hdmlp_image_config_set_layout(hdmlp_image_config *ic, hdmlp_image_layout layout)
{
    CHECK_IC(ic);
    if (layout != HDMLP_LAYOUT_NHWC && layout != HDMLP_LAYOUT_NCHW) {
        return hd_err(HDMLP_E_INVAL, "image layout: %d is neither NHWC (0) nor NCHW (1)",
                      (int)layout);
    }
    ic->layout = layout;
    return HDMLP_OK;
}

int hdmlp_image_config_set_dtype(hdmlp_image_config *ic, hdmlp_image_dtype dtype)
{
    CHECK_IC(ic);
    if (dtype != HDMLP_DTYPE_UINT8 && dtype != HDMLP_DTYPE_FLOAT32) {
        return hd_err(HDMLP_E_INVAL, "image dtype: %d is neither UINT8 (0) nor FLOAT32 (1)",
                      (int)dtype);
    }
    ic->dtype = dtype;
    return HDMLP_OK;
}

int hdmlp_image_config_set_normalize(hdmlp_image_config *ic, const float mean[3],
                                     const float std[3])
{
    CHECK_IC(ic);
    if (mean == NULL || std == NULL) {
        return hd_err(HDMLP_E_INVAL, "image normalize: mean and std are required");
    }
    for (int i = 0; i < 3; i++) {
        if (!isfinite(mean[i]) || !isfinite(std[i]) || !(std[i] > 0.0f)) {
            return hd_err(HDMLP_E_INVAL,
                          "image normalize: channel %d has mean %g, std %g (finite values "
                          "and std > 0 needed)",
                          i, (double)mean[i], (double)std[i]);
        }
    }
    memcpy(ic->mean, mean, sizeof(ic->mean));
    memcpy(ic->std, std, sizeof(ic->std));
    return HDMLP_OK;
}

int hdmlp_image_config_set_channels(hdmlp_image_config *ic, uint32_t channels)
{
    CHECK_IC(ic);
    if (channels != 1 && channels != 3) {
        return hd_err(HDMLP_E_INVAL, "image channels: %u is neither 1 nor 3", channels);
    }
    ic->channels = channels;
    return HDMLP_OK;
}

int hdmlp_image_config_set_decode_threads(hdmlp_image_config *ic, uint32_t n)
{
    CHECK_IC(ic);
    if (n > 64) {
        return hd_err(HDMLP_E_INVAL, "image decode threads: %u is above 64", n);
    }
    ic->decode_threads = n;
    return HDMLP_OK;
}

int hdmlp_image_config_set_prefetch(hdmlp_image_config *ic, uint32_t batches)
{
    CHECK_IC(ic);
    if (batches < 1 || batches > 16) {
        return hd_err(HDMLP_E_INVAL, "image prefetch: %u batches is outside 1..16", batches);
    }
    ic->prefetch = batches;
    return HDMLP_OK;
}

int hdmlp_image_config_set_field(hdmlp_image_config *ic, const char *name)
{
    CHECK_IC(ic);
    const size_t n = name != NULL ? strlen(name) : 0;
    if (name != NULL && (n == 0 || n >= sizeof(ic->field))) {
        return hd_err(HDMLP_E_INVAL, "image field: a name of %zu bytes (1..%zu)", n,
                      sizeof(ic->field) - 1);
    }
    memcpy(ic->field, name != NULL ? name : "", n + 1);
    return HDMLP_OK;
}

int hdmlp_image_config_set_dct_scaling(hdmlp_image_config *ic, int on)
{
    CHECK_IC(ic);
    if (on != 0 && on != 1) {
        return hd_err(HDMLP_E_INVAL, "image dct scaling: %d is neither 0 nor 1", on);
    }
    ic->dct_scaling = on;
    return HDMLP_OK;
}

int hdmlp_image_config_set_fast_decode(hdmlp_image_config *ic, int on)
{
    CHECK_IC(ic);
    if (on != 0 && on != 1) {
        return hd_err(HDMLP_E_INVAL, "image fast decode: %d is neither 0 nor 1", on);
    }
    ic->fast_decode = on;
    return HDMLP_OK;
}

int hdmlp_image_config_set_allocator(hdmlp_image_config *ic,
                                     void *(*alloc)(void *arg, size_t bytes),
                                     void (*free_fn)(void *arg, void *ptr, size_t bytes),
                                     void *arg)
{
    CHECK_IC(ic);
    if ((alloc == NULL) != (free_fn == NULL)) {
        return hd_err(HDMLP_E_INVAL, "image allocator: give both functions or neither");
    }
    ic->alloc = alloc;
    ic->free = free_fn;
    ic->alloc_arg = alloc != NULL ? arg : NULL;
    return HDMLP_OK;
}
