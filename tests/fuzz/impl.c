/* The implementations of the three headers, compiled once and linked into
   every fuzz harness (each harness includes the headers alone). */
#define PBD_IMPLEMENTATION
#include "pbd.h"
#define PBD_SM_IMPLEMENTATION
#include "pbd_sm.h"
#define PBD_UPSAMPLE_IMPLEMENTATION
#include "pbd_upsample.h"
