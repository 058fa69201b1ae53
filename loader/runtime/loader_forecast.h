/*
 * The forecast (loader_forecast.c): the protocol run on metadata alone, for
 * hdmlp_loader_forecast and for placing chunks in tiers.
 */
#ifndef HDMLP_LOADER_FORECAST_H
#define HDMLP_LOADER_FORECAST_H

#include "loader_core.h"

/* Chunk placement for tiers from a forecast of the first epochs. */
int loader_place_tiers(const fmt_index *ix, const fmt_tables *tables,
                       const struct hdmlp_config *cfg, const loader_sizing *sz, tier **out);

#endif
