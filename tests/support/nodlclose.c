/*
 * LD_PRELOAD shim for the MPI ranks of the ASan run (tests/run.sh): dlclose() does nothing.
 * OpenMPI unloads its components at MPI_Finalize, before LeakSanitizer's check at exit, which
 * then can neither name their frames (<unknown module>, so tests/lsan.supp cannot suppress
 * them) nor see the memory their data segments still pointed to (reported as leaked).
 */
#include <stddef.h>

int dlclose(void *handle);

int dlclose(void *handle)
{
    (void)handle;
    return 0;
}
