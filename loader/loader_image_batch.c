/* hdmlp_batch_image: the decoded view of a batch from a loader with an image pipeline. */
#include "loader_core.h"
#include "loader_image.h"

int hdmlp_batch_image(const hdmlp_batch *batch, hdmlp_image_batch *out)
{
    if (batch == NULL || out == NULL) {
        return hd_err(HDMLP_E_INVAL, "batch_image: batch and out are required");
    }
    return hd_err(HDMLP_E_STATE, "batch_image: the loader has no image pipeline");
}
