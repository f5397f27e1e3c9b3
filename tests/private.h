/* tests/private.h - for the test files that test pbd.h's private
   functions: a static copy of the implementation in that file
   (PBD_STATIC), so that its private functions can be called, and unused
   ones do not warn. Include it first, instead of pbd.h. */
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wunused-function"
#endif
#define PBD_STATIC
#define PBD_IMPLEMENTATION
#include "../pbd.h"
#include "test.h"
