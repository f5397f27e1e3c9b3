/* tests/impl_sm.c - the implementation of pbd_sm.h for the test runner, in
   its own translation unit so that a parallel build compiles the three
   headers' implementations side by side (pbd_sm.h uses only pbd.h's public
   API; pbd.h's implementation is in tests/main.c). */
#define PBD_SM_IMPLEMENTATION
#include "../pbd_sm.h"
