/* The implementation of pbd.h, compiled once and linked into every fuzz
   harness (each harness includes the headers alone). The three headers'
   implementations are three translation units so that a parallel build
   compiles them side by side. */
#define PBD_IMPLEMENTATION
#include "pbd.h"
