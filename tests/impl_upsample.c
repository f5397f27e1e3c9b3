/* tests/impl_upsample.c - the implementation of pbd_upsample.h for the test
   runner, in its own translation unit (see tests/impl_sm.c). */
#define PBD_UPSAMPLE_IMPLEMENTATION
#include "../pbd_upsample.h"
