/* SPDX-License-Identifier: MIT */
#include <stdlib.h>
#include <unistd.h>

#include "shared/artifact.h"

void artifact_done(Artifact *a) {
        if (!a)
                return;
        free(a->name);
        if (a->fd >= 0)
                (void) close(a->fd);
        *a = (Artifact){ .fd = -1 };
}
