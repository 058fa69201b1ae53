/*
 * Resume (loader_resume.c): a new loader moved to a saved position.
 */
#ifndef HDMLP_LOADER_RESUME_H
#define HDMLP_LOADER_RESUME_H

#include "loader_core.h"

/* Moves a new loader to a saved position (before consumers start). */
int resume_apply(struct hdmlp_loader *ld);

#endif
