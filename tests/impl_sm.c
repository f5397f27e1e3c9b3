/* tests/impl_sm.c - the implementation of pbd_sm.h for the test runner, in
   its own translation unit so that a parallel build compiles the three
   headers' implementations side by side (pbd_sm.h uses only pbd.h's public
   API; pbd.h's implementation is in tests/main.c).
   PBD_SM_MALLOC counts its calls: pbd_sm.h allocates with it only what has
   no world, and tests/test_sm.c checks that what a world owns never does. */
#include <stdlib.h>
long pbdt_sm_mallocs = 0;
#define PBD_SM_MALLOC(sz) (++pbdt_sm_mallocs, malloc(sz))
#define PBD_SM_FREE(p) free(p)
#define PBD_SM_IMPLEMENTATION
#include "../pbd_sm.h"
