/* Hooks for the in-tree tests: switches and waits no program or binding uses. Not part of
 * the public API; tests include it beside loader.h. */
#ifndef HDMLP_LOADER_TESTING_H
#define HDMLP_LOADER_TESTING_H

#include "loader.h"

/* A loader made from cfg starts no SSD stager thread, so only first loads stage chunks (as
 * when I/O is never idle). Set before hdmlp_loader_create; copied with the config. */
void loader_testing_stager_off(hdmlp_config *cfg, int off);

/* Waits until the SSD stager has gone through its chunks (staging only uses idle I/O
 * capacity, so it finishes once the consumer stops asking); returns at once without one. */
void loader_wait_staged(hdmlp_loader *ld);

#endif
